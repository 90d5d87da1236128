// SPDX-License-Identifier: MIT
// The GJS module's own parts, across processes where a process is involved: the command-line
// tool found or named (never magic-wormhole's `wormhole`, nor another program named
// `wormholectl`), and a large mailbox message read and delivered while the main loop keeps running.
// Run: gjs -m GJS/tests/test-module.js   (WORMHOLE_SWIFT_BIN: the directory of the Swift tools)
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import * as W from '../wormhole.js';
import {
    Inbox, PrivateBus, WORMHOLE, assert, assertEqual, makeWorld, removeTree, runProgram, tempDir
} from './harness.js';

const bus = await new PrivateBus().start();
const tag = GLib.getenv('GJS_TEST_RUNTIME') === 'unset' ? 'mn' : 'mr';
let counter = 0;
const cleanups = [];
const world = () => makeWorld(bus, cleanups, `${tag}-${++counter}`);

/** A directory for PATH holding executables: name → shell script text, or a path to link to. */
function binDir(entries) {
    const dir = tempDir('wormhole-gjs-path');
    cleanups.push(() => removeTree(dir));
    for (const [name, what] of Object.entries(entries)) {
        const file = Gio.File.new_for_path(`${dir}/${name}`);
        if (what.startsWith('/')) {
            file.make_symbolic_link(what, null);
        } else {
            file.replace_contents(new TextEncoder().encode(`#!/bin/sh\n${what}\n`), null, false, Gio.FileCreateFlags.NONE, null);
            GLib.spawn_command_line_sync(`chmod 755 ${GLib.shell_quote(file.get_path())}`);
        }
    }
    return dir;
}

/** Runs `fn` with PATH set to `dirs` (and WORMHOLE_BIN unset), restoring both after. */
async function withPath(dirs, fn) {
    const path = GLib.getenv('PATH');
    const bin = GLib.getenv('WORMHOLE_BIN');
    GLib.setenv('PATH', dirs.join(':'), true);
    GLib.unsetenv('WORMHOLE_BIN');
    try {
        return await fn();
    } finally {
        GLib.setenv('PATH', path, true);
        if (bin !== null)
            GLib.setenv('WORMHOLE_BIN', bin, true);
    }
}

async function rejection(promise) {
    try {
        await promise;
    } catch (e) {
        return e;
    }
    return null;
}

const tests = [
    ['the tool is found or named: wormholectl, checked by --version; never magic-wormhole', async () => {
        const w = world();
        const json = {group: w.group, identifier: 'm', json: '{"n":1}', bus: w.wb};
        const bad = await rejection(W.sendMessage({...json, json: '{"n":'}));
        assert(bad instanceof W.WormholeError && bad.code === 'invalidJSON' && bad.message.includes('byte offset 5'),
            `bad JSON rejects, naming the offset: ${bad}`);
        // Nothing on PATH: a WormholeError naming the tool and the package, before anything starts.
        let e = await withPath([binDir({})], () => rejection(W.sendMessage(json)));
        assert(e instanceof W.WormholeError && e.code === 'toolMissing', `no tool: ${e}`);
        for (const word of ["'wormholectl'", "Debian package 'wormholectl'", '--product wormholectl', 'WORMHOLE_BIN'])
            assert(e.message.includes(word), `the error names ${word}: ${e.message}`);
        assert(!e.message.includes("'wormhole'"), `magic-wormhole's name is not looked for: ${e.message}`);
        // magic-wormhole's `wormhole` on PATH is never looked at; another program named
        // `wormholectl` (its --version line) is refused, named, and never run for the write.
        const marker = `${tempDir('wormhole-gjs-marker')}/ran`;
        cleanups.push(() => removeTree(GLib.path_get_dirname(marker)));
        const impostor = '[ "$1" = --version ] && { echo \'magic-wormhole 0.12.0\'; exit 0; }\n' +
            `touch ${GLib.shell_quote(marker)}`;
        const magic = binDir({wormhole: impostor});
        e = await withPath([magic], () => rejection(W.sendMessage(json)));
        assert(e instanceof W.WormholeError && e.code === 'toolMissing' && e.message.includes('no wormholectl on PATH'),
            `magic-wormhole's wormhole is not taken: ${e}`);
        const other = binDir({wormholectl: impostor});
        e = await withPath([other], () => rejection(W.sendMessage(json)));
        assert(e instanceof W.WormholeError && e.code === 'toolMissing' && e.message.includes('magic-wormhole 0.12.0'),
            `another wormholectl refused, naming what it said: ${e}`);
        assert(!GLib.file_test(marker, GLib.FileTest.EXISTS), 'neither was run for the write');
        // This project's `wormholectl` is found past another program's `wormhole`.
        const ctl = binDir({wormholectl: WORMHOLE});
        const found = await withPath([magic, ctl], () => W.findTool());
        assertEqual(found, `${ctl}/wormholectl`, 'wormholectl found past magic-wormhole');
        const r = await withPath([magic, ctl], () => W.sendMessage(json));
        assertEqual(r.status, 0, 'a send through wormholectl');
        assertEqual(W.readMessage({group: w.group, identifier: 'm', root: w.root}).text, '{"n":1}', 'stored');
        // The answer is cached: found again without looking (PATH no longer has it).
        assertEqual(await withPath([binDir({})], () => W.findTool()), found, 'cached');
        // An explicit override is taken only when it is this project's tool.
        e = await rejection(W.findTool({command: `${magic}/wormhole`}));
        assert(e instanceof W.WormholeError && e.code === 'toolMissing', `an override that is magic-wormhole: ${e}`);
        assertEqual(await W.findTool({command: WORMHOLE}), WORMHOLE, 'an override that is the tool');
    }],

    ['a 10 MiB message is read and delivered while the main loop runs (Gio async reads, parse in slices)', async () => {
        const w = world();
        const dir = `${w.root}/${w.group}/wormhole`;
        GLib.mkdir_with_parents(dir, 0o700);
        const items = [];
        for (let i = 0, size = 0; size < 10 * 1024 * 1024; i++) {
            const item = `{"id":"clip-${i}","text":"line ${i} of the clipboard","n":${i * 7919},"big":${9007199254740993n + BigInt(i)}}`;
            items.push(item);
            size += item.length + 1;
        }
        const text = `[${items.join(',')}]`;
        const got = new Inbox();
        await w.wb.listen({group: w.group, identifiers: ['big']}, d => got.push(d)).ready;
        // Stored by the tool (under its lock), which posts: the listener reads on that post.
        await W.sendMessage({group: w.group, identifier: 'big', json: text, bus: w.wb, command: WORMHOLE});
        // One-shot timeouts every 5 ms: those that run before the delivery show that the main loop
        // ran during the read. (Independent sources: GJS 1.74 may block the callbacks that come
        // while it sweeps, which would stop a single repeating ticker for good.)
        let delivered = false, during = 0, last = GLib.get_monotonic_time(), longest = 0;
        const mark = () => {
            if (!delivered) {
                during++;
                const now = GLib.get_monotonic_time();
                longest = Math.max(longest, now - last);
                last = now;
            }
            return GLib.SOURCE_REMOVE;
        };
        for (let ms = 5; ms <= 500; ms += 5)
            GLib.timeout_add(GLib.PRIORITY_DEFAULT, ms, mark);
        const d = await got.next('the 10 MiB message', 120000);
        delivered = true;
        assertEqual(d.text, text, 'the text exactly');
        assertEqual(d.message.length, items.length, 'parsed');
        assertEqual(d.message[items.length - 1].big, 9007199254740993n + BigInt(items.length - 1), 'integers past 2^53 kept');
        // What is checked is that the loop ran between the slices (timeouts that ran during the read), not a
        // time: the figure is the benchmark's (GJS/bench/stall.js), printed here for the log.
        assert(during >= 3, `the main loop ran while the message was read and parsed (${during} timeouts)`);
        print(`# 10 MiB read: ${during} of 100 timeouts (every 5 ms) ran before the delivery; longest gap between ` +
            `two ${longest / 1000} ms (informative: the machine is shared)`);
    }],
];

await runProgram(tests, bus, cleanups);

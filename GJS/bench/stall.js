// SPDX-License-Identifier: MIT
// The longest main-loop stall while a listener reads and delivers a large mailbox message: a
// 1 ms GLib timeout counts its ticks and the longest gap between two, from the post until the
// handler has the message, in rounds that alternate between two builds of the module (A/B),
// each round in its own process, on a private dbus-daemon.
//
//   gjs -m GJS/bench/stall.js [--rounds 5] [--mib 10] [--shape records|string] [--baseline URL]
//
// --baseline names another build of the module (a file:// URL of its wormhole.js, such as an
// older commit's `git show REV:GJS/wormhole.js` saved to a file): rounds then alternate.
// Each round also runs the floor: the same ticker while the main loop runs 4 ms slices of busy
// work for as long as the module's read took (what a shared machine adds by itself).
// Prints one JSON line per round and, per variant, the median of the longest stalls, the median
// count of late ticks (later than 16 ms) and the median read time.
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import System from 'system';
import {Child, PrivateBus, option, removeTree, tempDir} from '../tests/harness.js';

const GROUP = 'group.org.example.gjs.stall';
const SLICE_MS = 4;
const self = Gio.File.new_for_uri(import.meta.url).get_path();
const current = Gio.File.new_for_uri(import.meta.url).get_parent().get_parent().get_child('wormhole.js').get_uri();

// A JSON text of about `mib` MiB: an array of clip-like records, or one long string.
function message(mib, shape) {
    const target = mib * 1024 * 1024;
    if (shape === 'string')
        return JSON.stringify({text: 'ä-wormhole '.repeat(Math.ceil(target / 12)).slice(0, target)});
    const parts = [];
    let size = 2;
    for (let i = 0; size < target; i++) {
        const item = JSON.stringify({
            id: `clip-${i}`, text: `line ${i} of the clipboard, with some words`,
            n: i * 7919, big: 9007199254740993 + i, tags: ['a', 'b'], ok: i % 2 === 0,
        });
        parts.push(item);
        size += item.length + 1;
    }
    return `[${parts.join(',')}]`;
}

// The floor: the same ticker while the main loop runs slices of busy work (SLICE_MS each) for
// as long as the module's read took; what it measures is what the machine itself adds (another
// process holding the core), which no module can go below.
async function floor(ms) {
    print('ready');
    await goLine();
    let last = GLib.get_monotonic_time(), longest = 0, late = 0;
    const ticker = GLib.timeout_add(GLib.PRIORITY_DEFAULT, 1, () => {
        const now = GLib.get_monotonic_time();
        longest = Math.max(longest, now - last);
        if (now - last > 16000)
            late++;
        last = now;
        return GLib.SOURCE_CONTINUE;
    });
    const start = GLib.get_monotonic_time();
    while (GLib.get_monotonic_time() - start < ms * 1000) {
        const end = GLib.get_monotonic_time() + SLICE_MS * 1000;
        while (GLib.get_monotonic_time() < end) {
            // busy
        }
        await new Promise(resolve => GLib.idle_add(GLib.PRIORITY_DEFAULT_IDLE, () => {
            resolve();
            return GLib.SOURCE_REMOVE;
        }));
    }
    GLib.source_remove(ticker);
    print(JSON.stringify({stallMs: longest / 1000, lateTicks: late, readMs: ms, bytes: 0}));
}

// The driver's go: one line on standard input.
function goLine() {
    const stdin = new Gio.DataInputStream({base_stream: new Gio.UnixInputStream({fd: 0, close_fd: false})});
    return new Promise(resolve => stdin.read_line_async(GLib.PRIORITY_DEFAULT, null, () => resolve()));
}

async function reader() {
    if (option('--module', current) === 'floor') {
        await floor(Number(option('--floor-ms', '500')));
        return;
    }
    const W = await import(option('--module', current));
    const bus = new W.WormholeBus({address: option('--bus-address', null), root: option('--root', null)});
    let done;
    const delivered = new Promise(resolve => (done = resolve));
    let last = 0, longest = 0, late = 0, start = 0, measuring = false, result = null;
    const ticker = GLib.timeout_add(GLib.PRIORITY_DEFAULT, 1, () => {
        const now = GLib.get_monotonic_time();
        if (measuring) {
            longest = Math.max(longest, now - last);
            if (now - last > 16000)
                late++;
        }
        last = now;
        return GLib.SOURCE_CONTINUE;
    });
    const sub = bus.listen({group: GROUP, identifiers: ['big'], catchUnsignalled: false}, d => {
        const now = GLib.get_monotonic_time();
        longest = Math.max(longest, now - last);
        if (now - last > 16000)
            late++;
        measuring = false;
        result = {stallMs: longest / 1000, lateTicks: late, readMs: (now - start) / 1000, bytes: d.text.length};
        done();
    });
    await sub.ready;
    print('ready');
    await goLine();
    start = last = GLib.get_monotonic_time();
    measuring = true;
    bus.post(`${GROUP}/wormhole/big`);
    await delivered;
    print(JSON.stringify(result));
    GLib.source_remove(ticker);
    bus.close();
}

async function driver() {
    const rounds = Number(option('--rounds', '5'));
    const baseline = option('--baseline', null);
    const modules = [['module', current], ['floor', 'floor'], ...baseline ? [['baseline', baseline]] : []];
    const bus = await new PrivateBus().start();
    const root = tempDir('wormhole-gjs-stall');
    const dir = `${root}/${GROUP}/wormhole`;
    GLib.mkdir_with_parents(dir, 0o700);
    const text = message(Number(option('--mib', '10')), option('--shape', 'records'));
    Gio.File.new_for_path(`${dir}/big.json`).replace_contents(new TextEncoder().encode(text), null, false,
        Gio.FileCreateFlags.PRIVATE | Gio.FileCreateFlags.REPLACE_DESTINATION, null);
    const results = new Map(modules.map(([label]) => [label, []]));
    for (let r = 0; r < rounds; r++) {
        for (const [label, url] of r % 2 ? [...modules].reverse() : modules) {
            const took = results.get('module').map(x => x.readMs);
            const child = new Child(['gjs', '-m', self, '--role', 'reader', '--module', url, '--bus-address', bus.address,
                '--root', root, '--floor-ms', String(Math.round(took.length ? took[took.length - 1] : 500))], {stdin: true});
            const ready = await child.nextLine('the reader to be ready', 60000);
            if (ready !== 'ready')
                throw new Error(`the reader printed ${ready}: ${child.stderrText.join(' | ')}`);
            child.write('go\n');
            const line = await child.nextLine('the reader to deliver', 120000);
            await child.finished();
            const round = {round: r, module: label, ...JSON.parse(line)};
            print(JSON.stringify(round));
            results.get(label).push(round);
        }
    }
    const median = xs => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    for (const [label, rs] of results) {
        print(`${label}: longest stall median ${median(rs.map(x => x.stallMs)).toFixed(1)} ms ` +
            `(max ${Math.max(...rs.map(x => x.stallMs)).toFixed(1)}), late ticks median ${median(rs.map(x => x.lateTicks))}, ` +
            `read+deliver median ${median(rs.map(x => x.readMs)).toFixed(1)} ms, ${text.length} bytes, ${rounds} rounds`);
    }
    await bus.stop();
    removeTree(root);
    removeTree(bus.dir);
}

const role = option('--role', 'driver');
try {
    await (role === 'reader' ? reader() : driver());
} catch (e) {
    printerr(e.stack ?? e);
    System.exit(1);
}
System.exit(0);

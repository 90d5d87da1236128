// SPDX-License-Identifier: MIT
// The Lines top-bar extension without a Shell: its clip source under plain gjs against the Swift
// tools (wormholectl send, wormholectl defaults write, the real line-grabber-host), and extension.js
// itself loaded with stand-ins for the Shell's modules (St, Clutter, Main, PanelMenu, Extension).
// Run: gjs -m GJS/tests/test-lines.js   (WORMHOLE_SWIFT_BIN: the directory of the Swift tools)
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import * as W from '../wormhole.js';
import {ClipSource, DIRECTORY, IDENTIFIER, formatClip, toClip} from '../../Examples/Lines/shell-extension/clip-source.js';
import {
    Child, Inbox, PrivateBus, REPO, SWIFT_BIN, WORMHOLE, assert, assertEqual, removeTree, runProgram, tempDir
} from './harness.js';

const bus = await new PrivateBus().start();
const withRuntime = GLib.getenv('GJS_TEST_RUNTIME') !== 'unset';
const cleanups = [];
let counter = 0;

function world() {
    const root = tempDir('wormhole-gjs-lines-root');
    const runtime = tempDir('wormhole-gjs-lines-runtime');
    cleanups.push(() => removeTree(root), () => removeTree(runtime));
    const group = `group.com.example.lines-gjs${withRuntime ? 'r' : 'n'}-${++counter}`;
    const env = {
        WORMHOLE_CONTAINER_ROOT: root, XDG_RUNTIME_DIR: withRuntime ? runtime : null, LINES_GROUP: group,
        DBUS_SESSION_BUS_ADDRESS: bus.address,
    };
    const wb = new W.WormholeBus({address: bus.address, root});
    cleanups.push(() => wb.close());
    const tool = async (args, what) => {
        const c = new Child([WORMHOLE, ...args, '--bus-address', bus.address], {env});
        assertEqual(await c.finished(what), 0, `${what} status (stderr: ${c.stderrText.join(' | ')})`);
    };
    return {root, group, env, wb, tool};
}

const clipJSON = (id, text, url = 'https://example.com/menu') =>
    JSON.stringify({id, text, url, sentAt: 1764300000.25});

const tests = [
    ['formatClip and toClip: one line, shortened; a message that is not a clip is refused', async () => {
        assertEqual(formatClip(null), 'Lines: —', 'none');
        assertEqual(formatClip({text: ' a\n b '}), 'Lines: a b', 'one line');
        assertEqual([...formatClip({text: 'é'.repeat(100)})].length, 'Lines: '.length + 60, 'shortened');
        assertEqual(toClip({id: 'x', text: 't', url: ''}).url, null, 'empty url');
        let refused = false;
        try {
            toClip([1]);
        } catch (e) {
            refused = e.code === 'decodingFailed';
        }
        assert(refused, 'an array is not a clip');
    }],

    ['metadata.json: uuid, name, shell-version 45 to 47', async () => {
        const [, bytes] = GLib.file_get_contents(`${REPO}/Examples/Lines/shell-extension/metadata.json`);
        const meta = JSON.parse(new TextDecoder().decode(bytes));
        assertEqual(meta['shell-version'], ['45', '46', '47'], 'shell-version');
        assert(/^[a-z0-9-]+@[a-z0-9.-]+$/.test(meta.uuid) && meta.name, `uuid ${meta.uuid} and name`);
    }],

    ['clip source: the stored clip at start, then each clip sent with wormholectl send (mailbox channel)', async () => {
        const w = world();
        await w.tool(['send', '--group', w.group, '--directory', DIRECTORY, IDENTIFIER, clipJSON('1', 'before')], 'send');
        const clips = new Inbox();
        const source = new ClipSource({bus: w.wb, group: w.group, onClip: (c, how) => clips.push([c.text, how])});
        await source.start();
        assertEqual(await clips.next('the stored clip'), ['before', 'stored'], 'stored clip');
        await w.tool(['send', '--group', w.group, '--directory', DIRECTORY, IDENTIFIER,
            clipJSON('2', 'Le café coûte 3 €')], 'send');
        assertEqual(await clips.next('the new clip'), ['Le café coûte 3 €', 'posted'], 'new clip');
        source.stop();
    }],

    ['clip source: the defaults key toShell (written by both Lines channels), one delivery per clip id', async () => {
        const w = world();
        const clips = new Inbox();
        const errors = new Inbox();
        const source = new ClipSource({
            bus: w.wb, group: w.group, onClip: c => clips.push(c.text),
            onError: e => errors.push(e.message),
        });
        await source.start();
        await w.tool(['defaults', 'write', '--group', w.group, IDENTIFIER, clipJSON('3', 'from defaults')], 'write');
        assertEqual(await clips.next('the defaults clip'), 'from defaults', 'defaults clip');
        await w.tool(['send', '--group', w.group, '--directory', DIRECTORY, IDENTIFIER, clipJSON('3', 'from defaults')],
            'send');
        await w.tool(['send', '--group', w.group, '--directory', DIRECTORY, IDENTIFIER, '[1,2,3]'], 'send');
        assert((await errors.next('the error for [1,2,3]')).includes('not a Lines clip'), 'not a clip');
        await w.tool(['send', '--group', w.group, '--directory', DIRECTORY, IDENTIFIER, clipJSON('4', 'next')], 'send');
        assertEqual(await clips.next('the next clip'), 'next', 'the same id was not delivered twice');
        source.stop();
    }],

    ['clip source: lines from the real line-grabber-host (journal channel, the default, and mailbox)', async () => {
        for (const channel of ['journal', 'mailbox']) {
            const w = world();
            const clips = new Inbox();
            const source = new ClipSource({bus: w.wb, group: w.group, onClip: c => clips.push([c.text, c.url])});
            await source.start();
            const host = new Child([`${SWIFT_BIN}/line-grabber-host`, 'chrome-extension://abcdefghijklmnopabcdefghijklmnop/'],
                {
                    env: {
                        ...w.env, LINES_BUS_ADDRESS: bus.address, LINES_CHANNEL: channel === 'mailbox' ? 'mailbox' : null,
                        DBUS_SESSION_BUS_ADDRESS: 'unix:path=/nonexistent/wormhole-tests-use-explicit-buses',
                    }, stdin: true,
                });
            cleanups.push(() => host.kill(9));
            const body = new TextEncoder().encode(JSON.stringify({line: `clipped via ${channel}`, url: 'https://example.com/'}));
            const frame = new Uint8Array(4 + body.length);
            new DataView(frame.buffer).setUint32(0, body.length, true);
            frame.set(body, 4);
            host.proc.get_stdin_pipe().write_all(frame, null);
            assertEqual(await clips.next(`the clip from the host (${channel})`), [`clipped via ${channel}`,
                'https://example.com/'], channel);
            host.closeInput();
            await host.finished('line-grabber-host');
            source.stop();
        }
    }],

    ['extension.js with stand-ins for the Shell: enable shows the latest clip in the label, disable cleans up', async () => {
        const w = world();
        // The extension uses Gio.DBus.session: point this process's session bus at the private one.
        GLib.setenv('DBUS_SESSION_BUS_ADDRESS', bus.address, true);
        GLib.setenv('WORMHOLE_CONTAINER_ROOT', w.root, true);
        GLib.setenv('LINES_GROUP', w.group, true);
        const ext = loadExtensionWithStubs();
        const {default: LinesClipExtension} = await import(ext.uri);
        const extension = new LinesClipExtension({uuid: 'lines-clip@wormhole.example.org', name: 'Lines clip'});
        extension.enable();
        const label = globalThis.__linesStubs.labels[0];
        assertEqual(label.text, 'Lines: —', 'empty at start');
        await extension._source.ready; // the rules are active
        await w.tool(['send', '--group', w.group, '--directory', DIRECTORY, IDENTIFIER, clipJSON('9', 'in the top bar')],
            'send');
        await globalThis.__linesStubs.changes.until(t => t === 'Lines: in the top bar', 'the label to change');
        extension.disable();
        assert(globalThis.__linesStubs.destroyed, 'the button was destroyed');
        assert(!Gio.DBus.session.is_closed(), 'the Shell\'s connection stays open');
        // This stand-in for the Shell must outlive the private bus at teardown.
        Gio.DBus.session.set_exit_on_close(false);
    }],
];

/**
 * Copies extension.js into a temporary directory with its Shell imports pointing at stand-ins.
 * @returns {{uri: string}}
 */
function loadExtensionWithStubs() {
    const dir = tempDir('wormhole-gjs-ext');
    cleanups.push(() => removeTree(dir));
    const here = `${REPO}/Examples/Lines/shell-extension`;
    globalThis.__linesStubs = {labels: [], changes: new Inbox(), destroyed: false};
    const stubs = {
        'st.js': `export default {Label: class {
            constructor(p) { this._text = p.text; globalThis.__linesStubs.labels.push(this); }
            get text() { return this._text; }
            set text(t) { this._text = t; globalThis.__linesStubs.changes.push(t); } }};`,
        'clutter.js': 'export default {ActorAlign: {CENTER: 2}};',
        'extension.js': 'export class Extension { constructor(metadata) { this.metadata = metadata; this.uuid = metadata.uuid; } }',
        'main.js': 'export const panel = {addToStatusArea(uuid, button) { this.added = button; }};',
        'panelMenu.js': `export class Button { constructor() { this.children = []; }
            add_child(c) { this.children.push(c); } destroy() { globalThis.__linesStubs.destroyed = true; } }`,
    };
    for (const [name, text] of Object.entries(stubs))
        GLib.file_set_contents(`${dir}/${name}`, text);
    let [, source] = GLib.file_get_contents(`${here}/extension.js`);
    source = new TextDecoder().decode(source)
        .replace("'gi://St'", `'file://${dir}/st.js'`)
        .replace("'gi://Clutter'", `'file://${dir}/clutter.js'`)
        .replace("'resource:///org/gnome/shell/extensions/extension.js'", `'file://${dir}/extension.js'`)
        .replace("'resource:///org/gnome/shell/ui/main.js'", `'file://${dir}/main.js'`)
        .replace("'resource:///org/gnome/shell/ui/panelMenu.js'", `'file://${dir}/panelMenu.js'`)
        .replace("'./wormhole.js'", `'file://${REPO}/GJS/wormhole.js'`)
        .replace("'./clip-source.js'", `'file://${here}/clip-source.js'`);
    assert(!source.includes('resource:///') && !source.includes('gi://St'), 'every Shell import replaced');
    GLib.file_set_contents(`${dir}/lines-extension.js`, source);
    return {uri: `file://${dir}/lines-extension.js`};
}

await runProgram(tests, bus, cleanups);

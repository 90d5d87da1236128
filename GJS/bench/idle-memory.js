// SPDX-License-Identifier: MIT
// The resident memory of an idle listener: a `gjs -m` process with one WormholeBus and one
// mailbox listener on a private dbus-daemon, measured (VmRSS) after its rules are active, two
// seconds idle and a collection. Each build of the module runs in its own process, in turns.
//
//   gjs -m GJS/bench/idle-memory.js [--rounds 3] [--baseline URL]
//
// --baseline names another build of the module (a file:// URL of its wormhole.js).
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import System from 'system';
import {Child, PrivateBus, option, removeTree, tempDir} from '../tests/harness.js';

const self = Gio.File.new_for_uri(import.meta.url).get_path();
const current = Gio.File.new_for_uri(import.meta.url).get_parent().get_parent().get_child('wormhole.js').get_uri();

function after(ms) {
    return new Promise(resolve => GLib.timeout_add(GLib.PRIORITY_DEFAULT, ms, () => {
        resolve();
        return GLib.SOURCE_REMOVE;
    }));
}

async function listener() {
    const W = await import(option('--module', current));
    const bus = new W.WormholeBus({address: option('--bus-address', null), root: option('--root', null)});
    await bus.listen({group: 'group.org.example.gjs.memory', identifiers: ['idle']}, () => {}).ready;
    await after(2000);
    System.gc();
    await after(500);
    const status = new TextDecoder().decode(GLib.file_get_contents('/proc/self/status')[1]);
    print(status.match(/VmRSS:\s+(\d+)/)[1]);
}

async function driver() {
    const bus = await new PrivateBus().start();
    const root = tempDir('wormhole-gjs-memory');
    const baseline = option('--baseline', null);
    const modules = [['module', current], ...baseline ? [['baseline', baseline]] : []];
    const kb = new Map(modules.map(([label]) => [label, []]));
    for (let r = 0; r < Number(option('--rounds', '3')); r++) {
        for (const [label, url] of modules) {
            const child = new Child(['gjs', '-m', self, '--role', 'listener', '--module', url,
                '--bus-address', bus.address, '--root', root]);
            const line = await child.nextLine('the listener to measure itself', 60000);
            await child.finished();
            kb.get(label).push(Number(line));
        }
    }
    for (const [label, values] of kb)
        print(`${label}: idle listener VmRSS ${values.map(v => (v / 1000).toFixed(1)).join(', ')} MB`);
    await bus.stop();
    removeTree(root);
    removeTree(bus.dir);
}

try {
    await (option('--role', 'driver') === 'listener' ? listener() : driver());
} catch (e) {
    printerr(e.stack ?? e);
    System.exit(1);
}
System.exit(0);

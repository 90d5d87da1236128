// SPDX-License-Identifier: MIT
// One-way latency of a post: an observer through the GJS module vs a bare
// Gio.DBusConnection.signal_subscribe subscriber, each stamping at callback entry, in rounds
// that alternate, on a private dbus-daemon. The poster is a GJS program over Gio (one process
// per round; `wormholectl post` per post would cost a process start each) that emits Posted on the
// name's bucket interface every 2 ms with state = GLib.get_monotonic_time() * 1000
// (CLOCK_MONOTONIC, shared by every process), then makes one call the bus answers.
//
//   gjs -m GJS/bench/latency.js [--rounds 5] [--posts 5000] [--interval-ms 2]
//
// Prints one JSON line per round and a summary (p50 ratio module/bare, p99 of each).
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import System from 'system';
import * as W from '../wormhole.js';
import {Child, PrivateBus, option, removeTree, within} from '../tests/harness.js';

const NAME = 'org.example.gjs.bench.latency';
const role = option('--role', 'driver');
const address = option('--bus-address', null);
const posts = Number(option('--posts', '5000'));
const self = Gio.File.new_for_uri(import.meta.url).get_path();

function connect() {
    const conn = Gio.DBusConnection.new_for_address_sync(address,
        Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, null, null);
    conn.set_exit_on_close(false);
    return conn;
}

function percentile(sorted, p) {
    return sorted[Math.min(sorted.length - 1, Math.floor(p / 100 * sorted.length))];
}

async function receiver(kind) {
    const loop = new GLib.MainLoop(null, false);
    const latencies = new Float64Array(posts);
    let n = 0;
    const stamp = state => {
        const now = GLib.get_monotonic_time();
        if (n < posts && state !== null)
            latencies[n++] = now - Number(state) / 1000; // microseconds
        if (n === posts)
            loop.quit();
    };
    let keep;
    if (kind === 'module') {
        const bus = new W.WormholeBus({address});
        keep = bus;
        await bus.listenNotifications(NAME, note => stamp(note.state)).ready;
    } else {
        const conn = connect();
        keep = conn;
        conn.signal_subscribe(null, W.bucketInterface(NAME), 'Posted', W.OBJECT_PATH, NAME, Gio.DBusSignalFlags.NONE,
            (c, sender, path, iface, member, params) => stamp(params.get_child_value(1).get_uint64()));
        // The rule is active once a call made after it is answered (the bus handles them in order).
        conn.call_sync('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetId', null, null,
            Gio.DBusCallFlags.NONE, 5000, null);
    }
    printerr('ready');
    const bound = GLib.timeout_add_seconds(GLib.PRIORITY_LOW, 120, () => {
        loop.quit();
        return GLib.SOURCE_REMOVE;
    });
    loop.run();
    GLib.source_remove(bound);
    const sorted = Array.from(latencies.subarray(0, n)).sort((a, b) => a - b);
    print(JSON.stringify({
        kind, received: n, p50: percentile(sorted, 50), p90: percentile(sorted, 90),
        p99: percentile(sorted, 99), max: sorted[sorted.length - 1],
    }));
    void keep;
}

function poster() {
    const interval = Number(option('--interval-ms', '2'));
    const conn = connect();
    const iface = W.bucketInterface(NAME);
    const loop = new GLib.MainLoop(null, false);
    let sent = 0;
    GLib.timeout_add(GLib.PRIORITY_HIGH, interval, () => {
        const state = GLib.Variant.parse(new GLib.VariantType('t'), String(GLib.get_monotonic_time() * 1000), null, null);
        conn.emit_signal(null, W.OBJECT_PATH, iface, 'Posted', GLib.Variant.new_tuple([GLib.Variant.new_string(NAME), state]));
        if (++sent < posts)
            return GLib.SOURCE_CONTINUE;
        loop.quit();
        return GLib.SOURCE_REMOVE;
    });
    loop.run();
    conn.call_sync('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetNameOwner',
        new GLib.Variant('(s)', [conn.get_unique_name()]), null, Gio.DBusCallFlags.NONE, 5000, null);
}

async function driver() {
    const rounds = Number(option('--rounds', '5'));
    const bus = await new PrivateBus().start();
    const results = {module: [], bare: []};
    try {
        for (let r = 0; r < rounds; r++) {
            for (const kind of r % 2 ? ['bare', 'module'] : ['module', 'bare']) {
                const rx = new Child(['gjs', '-m', self, '--role', 'receiver', '--kind', kind, '--bus-address', bus.address,
                    '--posts', String(posts)]);
                await rx.waitStderr('ready', `${kind} receiver ready`);
                const tx = new Child(['gjs', '-m', self, '--role', 'poster', '--bus-address', bus.address,
                    '--posts', String(posts), '--interval-ms', option('--interval-ms', '2')]);
                await tx.finished('the poster', 120000);
                const line = await rx.nextLine(`${kind} result`, 120000);
                await rx.finished(`${kind} receiver`);
                const result = JSON.parse(line);
                result.round = r + 1;
                print(JSON.stringify(result));
                results[kind].push(result);
            }
        }
    } finally {
        await bus.stop();
        removeTree(bus.dir);
    }
    const med = xs => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const summary = {};
    for (const kind of ['module', 'bare']) {
        summary[kind] = {
            p50: med(results[kind].map(x => x.p50)), p99: med(results[kind].map(x => x.p99)),
            received: results[kind].reduce((a, x) => a + x.received, 0),
        };
    }
    summary.p50_ratio = summary.module.p50 / summary.bare.p50;
    summary.p50_ratio_per_round = results.module.map((m, i) => Number((m.p50 / results.bare[i].p50).toFixed(3)));
    summary.load = new TextDecoder().decode(GLib.file_get_contents('/proc/loadavg')[1]).trim();
    print(JSON.stringify(summary));
}

if (role === 'receiver')
    await receiver(option('--kind', 'module'));
else if (role === 'poster')
    poster();
else
    await within(driver(), 'the benchmark', 3600 * 1000);
System.exit(0);

#!/usr/bin/env python3
"""One-way notification latency: a wormhole_py observer against a bare
``Gio.DBusConnection.signal_subscribe`` subscriber, in alternating rounds.

A poster posts every 2 ms (a GLib timeout) with state = CLOCK_MONOTONIC ns;
the observer stamps CLOCK_MONOTONIC at callback entry; latency = stamp -
state.  Rounds alternate the two observers (one at a time, each in its own
process), so drift of the machine hits both alike.  Prints p50/p99 per kind.

    python3 Python/bench/latency.py [--rounds 6] [--posts 500]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _bench import PrivateBus, environment, read_line

NAME = "com.example.bench.latency"


def observer(kind: str, count: int) -> None:
    from gi.repository import Gio, GLib
    from wormhole_py import bucket_interface
    samples = []
    loop = GLib.MainLoop()

    def stamp(state: int) -> None:
        samples.append(time.monotonic_ns() - state)
        if len(samples) >= count:
            loop.quit()

    if kind == "wormhole_py":
        from wormhole_py.notify import NotificationCenter
        center = NotificationCenter()
        center.observe(NAME, lambda note: stamp(note.state))
    else:
        import os
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        connection = Gio.DBusConnection.new_for_address_sync(os.environ["DBUS_SESSION_BUS_ADDRESS"], flags, None,
                                                             None)
        connection.signal_subscribe(None, bucket_interface(NAME), "Posted", "/org/wormhole/Notify1", NAME,
                                    Gio.DBusSignalFlags.NONE,
                                    lambda c, s, p, i, m, params: stamp(params.unpack()[1]))
        # signal_subscribe adds its match rule asynchronously: one answered call makes it active.
        connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId",
                             None, None, Gio.DBusCallFlags.NONE, 5000, None)
    sys.stderr.write("ready\n")
    sys.stderr.flush()
    GLib.timeout_add_seconds(120, loop.quit)
    loop.run()
    print(json.dumps(samples))


def poster(count: int) -> None:
    from gi.repository import GLib
    from wormhole_py.bus import Bus
    bus = Bus.connect()
    loop = GLib.MainLoop()
    sent = [0]

    def tick() -> bool:
        bus.post(NAME, time.monotonic_ns())
        sent[0] += 1
        if sent[0] >= count:
            bus.confirm()
            loop.quit()
            return False
        return True

    GLib.timeout_add(2, tick)
    loop.run()


def percentile(values, fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--posts", type=int, default=500)
    parser.add_argument("--role", choices=["observer", "poster"], help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="wormhole_py", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "observer":
        observer(args.kind, args.posts)
        return 0
    if args.role == "poster":
        poster(args.posts)
        return 0
    bus = PrivateBus()
    env = environment(bus.address, bus.directory + "/root")
    results = {"wormhole_py": [], "bare Gio": []}
    kinds = ["wormhole_py", "bare Gio"]
    for round_index in range(args.rounds):
        order = kinds if round_index % 2 == 0 else kinds[::-1]
        for kind in order:
            watcher = subprocess.Popen([sys.executable, __file__, "--role", "observer", "--kind", kind,
                                        "--posts", str(args.posts)], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
            assert read_line(watcher.stderr) == "ready"
            subprocess.run([sys.executable, __file__, "--role", "poster", "--posts", str(args.posts)], env=env,
                           check=True)
            out, _ = watcher.communicate(timeout=120)
            samples = json.loads(out)
            results[kind].extend(samples)
    for kind, samples in results.items():
        print("%-12s n=%d p50=%.1f us p99=%.1f us" % (kind, len(samples), percentile(samples, 0.5) / 1000,
                                                      percentile(samples, 0.99) / 1000))
    bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

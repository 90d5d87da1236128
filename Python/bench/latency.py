#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One-way notification latency of four observers on the same posts: the
wormhole_py asyncio observer (``listen_async``, jeepney), a bare jeepney
asyncio subscriber (``DBusRouter.filter`` with its ``AddMatch``), the
wormhole_py GLib observer (``DarwinNotificationCenter.observe``, Gio) and a bare
``Gio.DBusConnection.signal_subscribe`` subscriber.

A poster posts every 2 ms (a GLib timeout) with state = CLOCK_MONOTONIC ns;
each observer (its own process) stamps CLOCK_MONOTONIC at callback entry;
latency = stamp - state.  Every round all four observe the same posts (the
start order rotates), so drift of the machine hits them alike.  Prints p50
and p99 per kind and the p50 ratios the package is held to.  Needs
PyGObject and jeepney (a venv with --system-site-packages).

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


def async_observer(kind: str, count: int) -> None:
    import asyncio
    import os

    async def run() -> list:
        samples: list = []
        done = asyncio.get_running_loop().create_future()

        def stamp(state: int) -> None:
            samples.append(time.monotonic_ns() - state)
            if len(samples) >= count and not done.done():
                done.set_result(None)

        if kind == "asyncio":
            from wormhole_py import listen_async
            subscription = await listen_async(NAME, callback=lambda note: stamp(note.state))  # noqa: F841 (kept to the end)
        else:
            from jeepney import MatchRule, message_bus
            from jeepney.io.asyncio import DBusRouter, Proxy, open_dbus_connection
            from wormhole_py import bucket_interface
            connection = await open_dbus_connection(os.environ["DBUS_SESSION_BUS_ADDRESS"])
            router = DBusRouter(connection)
            rule = MatchRule(type="signal", interface=bucket_interface(NAME), member="Posted",
                             path="/org/wormhole/Notify1")
            rule.add_arg_condition(0, NAME)

            class Stamping(asyncio.Queue):  # the router hands each match to put_nowait
                def put_nowait(self, message) -> None:
                    stamp(message.body[1])

            router.filter(rule, queue=Stamping())
            await Proxy(message_bus, router).AddMatch(rule)
        sys.stderr.write("ready\n")
        sys.stderr.flush()
        await asyncio.wait_for(done, 120)
        return samples

    print(json.dumps(asyncio.run(run())))


def observer(kind: str, count: int) -> None:
    if kind in ("asyncio", "bare jeepney"):
        async_observer(kind, count)
        return
    from gi.repository import Gio, GLib
    from wormhole_py import bucket_interface
    samples = []
    loop = GLib.MainLoop()

    def stamp(state: int) -> None:
        samples.append(time.monotonic_ns() - state)
        if len(samples) >= count:
            loop.quit()

    if kind == "GLib":
        from wormhole_py.notify import DarwinNotificationCenter
        center = DarwinNotificationCenter()
        center.listen(NAME, lambda note: stamp(note.state))
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
    parser.add_argument("--kind", default="GLib", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "observer":
        observer(args.kind, args.posts)
        return 0
    if args.role == "poster":
        poster(args.posts)
        return 0
    bus = PrivateBus()
    env = environment(bus.address, bus.directory + "/root")
    kinds = ["asyncio", "bare jeepney", "GLib", "bare Gio"]
    results: dict = {kind: [] for kind in kinds}
    for round_index in range(args.rounds):
        order = kinds[round_index % len(kinds):] + kinds[:round_index % len(kinds)]
        watchers = {}
        for kind in order:
            watchers[kind] = subprocess.Popen([sys.executable, __file__, "--role", "observer", "--kind", kind,
                                               "--posts", str(args.posts)], env=env, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE)
        for watcher in watchers.values():
            assert read_line(watcher.stderr) == "ready"
        subprocess.run([sys.executable, __file__, "--role", "poster", "--posts", str(args.posts)], env=env,
                       check=True)
        for kind, watcher in watchers.items():
            out, _ = watcher.communicate(timeout=120)
            results[kind].extend(json.loads(out))
    p50 = {}
    for kind, samples in results.items():
        p50[kind] = percentile(samples, 0.5)
        print("%-13s n=%d p50=%.1f us p99=%.1f us" % (kind, len(samples), p50[kind] / 1000,
                                                       percentile(samples, 0.99) / 1000))
    print("asyncio / bare jeepney p50: %.2fx" % (p50["asyncio"] / p50["bare jeepney"]))
    print("asyncio / GLib observer p50: %.2fx" % (p50["asyncio"] / p50["GLib"]))
    print("GLib observer / bare Gio p50: %.2fx" % (p50["GLib"] / p50["bare Gio"]))
    bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

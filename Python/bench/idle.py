#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What an idle asyncio listener costs: one process subscribed to every kind
(a mailbox, a notification name, a defaults suite, a journal) on its asyncio
loop, left alone for ``--seconds``; prints the CPU time it used meanwhile
(``/proc/PID/stat`` utime + stime, clock ticks) and its resident memory
(``VmRSS``), beside a bare ``python3 -c 'import asyncio'`` loop for scale.

    python3 Python/bench/idle.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from _bench import PrivateBus, environment, read_line

G = "group.com.example.idle"

CHILD = """
import asyncio, sys

async def main():
    if sys.argv[1] == "bare":
        sys.stderr.write("ready\\n"); sys.stderr.flush()
        await asyncio.Event().wait()
    from wormhole_py import Journal, GroupDefaults, MessageCenter, listen_async
    subscriptions = [
        await MessageCenter(%(group)r).listen_async(["clip"]),
        await listen_async("com.example.idle"),
        await GroupDefaults(%(group)r).listen_async(),
        await Journal(%(group)r, "events").listen_async(),
    ]
    assert all(subscription.connected for subscription in subscriptions)
    sys.stderr.write("ready\\n"); sys.stderr.flush()
    await asyncio.Event().wait()

asyncio.run(main())
""" % {"group": G}


def sample(pid: int) -> tuple:
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    with open("/proc/%d/status" % pid) as handle:
        rss = next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))
    return ticks, rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    bus = PrivateBus()
    root = tempfile.mkdtemp(prefix="wormhole-py-idle-")
    env = environment(bus.address, root)
    try:
        for kind in ("bare", "listener"):
            child = subprocess.Popen([sys.executable, "-c", CHILD, kind], env=env, stderr=subprocess.PIPE)
            try:
                assert read_line(child.stderr) == "ready"
                before, _ = sample(child.pid)
                time.sleep(args.seconds)  # the measured idle period itself, not a wait for an event
                after, rss = sample(child.pid)
            finally:
                child.terminate()
                child.wait()
            print("%-8s idle %g s: CPU %d ticks (%d Hz), RSS %.1f MiB"
                  % (kind, args.seconds, after - before, os.sysconf("SC_CLK_TCK"), rss / 1024))
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fault script: concurrent ``increment`` of one shared-defaults key loses nothing.

Runs against a private ``dbus-daemon`` (``<repo>/dbus/wormhole-session.conf``)
and a temporary container root, so it touches neither the user's bus nor
their files.  Phase 1: ``--processes`` Python processes each call
``GroupDefaults.increment`` ``--count`` times (each write posts and confirms
on the bus); the key must end at exactly processes x count.  Phase 2 (when
the Swift tool is found): the same Python load on another key with as many
shells beside it, each running ``wormholectl defaults increment`` ``--count``
times; that key must end at exactly 2 x processes x count.  All workers start
together (they wait on a line on standard input).  Exit 0 when both totals
are exact, 1 otherwise.

    python3 Python/bench/increment_fault.py [--processes 8] [--count 200] [--swift-bin DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON_DIR = HERE.parent
sys.path.insert(0, str(HERE))
from _bench import swift_cli  # noqa: E402
REPO = PYTHON_DIR.parent
GROUP = "group.com.example.fault"

WORKER = """
import sys
from wormhole_py.defaults import GroupDefaults
defaults = GroupDefaults(%r)
sys.stdin.readline()
for _ in range(%d):
    defaults.increment(%r)
    if defaults.last_post_error is not None:
        sys.exit("post failed: %%s" %% defaults.last_post_error)
"""


def start_bus(directory: str) -> "tuple[subprocess.Popen, str]":
    """Start a private dbus-daemon; return it and its address."""
    daemon = subprocess.Popen(["dbus-daemon", "--config-file=%s" % (REPO / "dbus" / "wormhole-session.conf"),
                               "--address=unix:path=%s/bus" % directory, "--print-address", "--nofork"],
                              stdout=subprocess.PIPE)
    address = daemon.stdout.readline().decode().strip()
    if not address:
        sys.exit("dbus-daemon did not start")
    return daemon, address


def run_phase(env: dict, processes: int, count: int, swift: "Path | None", key: str) -> float:
    """Start every worker, release them together, wait for all; return the seconds taken."""
    workers = [subprocess.Popen([sys.executable, "-c", WORKER % (GROUP, count, key)], env=env, stdin=subprocess.PIPE)
               for _ in range(processes)]
    if swift is not None:
        loop = ('read go; i=0; while [ $i -lt %d ]; do "%s" defaults increment %s --group %s >/dev/null || exit 1; '
                'i=$((i+1)); done' % (count, swift_cli(swift), key, GROUP))
        workers += [subprocess.Popen(["sh", "-c", loop], env=env, stdin=subprocess.PIPE) for _ in range(processes)]
    began = time.monotonic()
    for worker in workers:
        worker.stdin.write(b"go\n")
        worker.stdin.close()
    failures = sum(1 for worker in workers if worker.wait() != 0)
    if failures:
        sys.exit("%d workers failed" % failures)
    return time.monotonic() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--swift-bin", default=os.environ.get("WORMHOLE_SWIFT_BIN") or str(REPO / ".build" / "debug"))
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="wormhole-fault-")
    os.chmod(directory, 0o700)
    runtime = os.path.join(directory, "runtime")
    os.mkdir(runtime, 0o700)
    daemon, address = start_bus(directory)
    env = dict(os.environ, WORMHOLE_CONTAINER_ROOT=os.path.join(directory, "root"), XDG_RUNTIME_DIR=runtime,
               DBUS_SESSION_BUS_ADDRESS=address, PYTHONPATH=str(PYTHON_DIR))
    sys.path.insert(0, str(PYTHON_DIR))
    os.environ.update(env)
    from wormhole_py.defaults import GroupDefaults
    ok = True
    try:
        seconds = run_phase(env, args.processes, args.count, None, "python")
        total = GroupDefaults(GROUP, post=False).get("python")
        expected = args.processes * args.count
        print("python: %d processes x %d increments: %d (expected %d) in %.1f s"
              % (args.processes, args.count, total, expected, seconds))
        ok &= total == expected
        swift = Path(args.swift_bin)
        if os.path.exists(swift_cli(swift)):
            seconds = run_phase(env, args.processes, args.count, swift, "both")
            total = GroupDefaults(GROUP, post=False).get("both")
            expected = 2 * args.processes * args.count
            print("python + swift: %d + %d processes x %d increments of another key: %d (expected %d) in %.1f s"
                  % (args.processes, args.processes, args.count, total, expected, seconds))
            ok &= total == expected
        else:
            print("swift: no wormhole in %s (set WORMHOLE_SWIFT_BIN); phase 2 skipped" % swift)
        counted = GroupDefaults(GROUP, post=False).change_count()
        print("change counter: %s" % counted)
    finally:
        daemon.terminate()
        daemon.wait()
        shutil.rmtree(directory, ignore_errors=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

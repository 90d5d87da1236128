#!/usr/bin/env python3
"""How many posts of short-lived Python senders reach the bus.

N processes each send one mailbox message with ``Wormhole.send`` and exit at
once (the library's confirm, or with ``--no-confirm`` the atexit drain alone);
an observer on the real bus (Swift ``wormholectl observe --prefix`` from
``$WORMHOLE_SWIFT_BIN``, else ``wormhole-py observe``) counts the posts.
``--proxy`` puts the senders behind ``xdg-dbus-proxy --filter`` with Flatpak's
default rules for an app ID (the senders own ``<APPID>.Wormhole.c…``, §8).

    python3 Python/bench/exit_drain.py [--senders 1000] [--parallel 4] [--proxy] [--no-confirm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from _bench import PrivateBus, environment, read_line, swift_cli

G = "group.com.example.bench"
APP = "org.example.Bench"

SENDER = """
import sys
from wormhole_py.messages import MessageCenter
hole = MessageCenter(%r)
if sys.argv[2] == "confirm":
    hole.send_json(sys.argv[1], "1")
else:
    from wormhole_py.bus import Bus
    from wormhole_py.container import atomic_write
    atomic_write(hole._prepare(), sys.argv[1] + ".json", b"1", stem=sys.argv[1])
    Bus.connect().post(hole.name(sys.argv[1]), 1)   # no confirm: the exit drain must do it
""" % G


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--senders", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--proxy", action="store_true")
    parser.add_argument("--no-confirm", action="store_true")
    args = parser.parse_args()
    bus = PrivateBus()
    root = tempfile.mkdtemp(prefix="wormhole-py-bench-root-")
    env = environment(bus.address, root)
    swift = swift_cli()
    observer_cmd = ([swift] if os.path.exists(swift) else [sys.executable, "-m", "wormhole_py"]) + [
        "observe", "--prefix", G + "/wormhole/", "--count", str(args.senders), "--timeout", "600"]
    observer = subprocess.Popen(observer_cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert read_line(observer.stderr) == "ready"
    sender_env = dict(env)
    proxy = None
    if args.proxy:
        socket = os.path.join(bus.directory, "proxy")
        ready_r, ready_w = os.pipe()
        proxy = subprocess.Popen(["xdg-dbus-proxy", bus.address, socket, "--fd=%d" % ready_w, "--filter",
                                  "--own=%s" % APP, "--own=%s.*" % APP], pass_fds=[ready_w])
        os.close(ready_w)
        if not os.read(ready_r, 1):
            raise RuntimeError("xdg-dbus-proxy did not start")
        sender_env.update({"DBUS_SESSION_BUS_ADDRESS": "unix:path=" + socket, "WORMHOLE_APP_ID": APP})
    mode = "post-only" if args.no_confirm else "confirm"
    started = time.monotonic()
    failures = []

    def send(index: int) -> None:
        done = subprocess.run([sys.executable, "-c", SENDER, "m%d" % index, mode], env=sender_env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            failures.append(done.stderr.decode()[-300:])

    with ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(send, range(args.senders)))
    elapsed = time.monotonic() - started
    # Every sender has exited; give the observer a bounded wait for what is in flight.
    try:
        out, _ = observer.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        observer.terminate()
        out, _ = observer.communicate()
    received = {line.split('"name":"')[1].split('"')[0] for line in out.decode().splitlines() if '"name"' in line}
    print("senders=%d mode=%s proxy=%s: %d of %d posts reached the bus observer (%d sender failures; %.1f s)"
          % (args.senders, mode, "xdg-dbus-proxy --filter" if args.proxy else "none", len(received), args.senders,
             len(failures), elapsed))
    for failure in failures[:3]:
        print("  failure:", failure)
    if proxy is not None:
        proxy.terminate()
        proxy.wait()
    bus.close()
    shutil.rmtree(root, ignore_errors=True)
    return 0 if len(received) == args.senders else 1


if __name__ == "__main__":
    sys.exit(main())

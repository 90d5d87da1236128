"""Helpers of the bench scripts: a private dbus-daemon, and lines with a bound."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parent.parent
REPO = PYTHON_DIR.parent
CONFIG = REPO / "dbus" / "wormhole-session.conf"
sys.path.insert(0, str(PYTHON_DIR))
#: The Swift command-line tool's file name: the one place the benchmarks name it.
SWIFT_TOOL = "wormholectl"


def swift_cli(directory: "str | Path | None" = None) -> str:
    """The Swift command-line tool in ``directory`` (default ``$WORMHOLE_SWIFT_BIN``, else ``.build/debug``)."""
    base = directory or os.environ.get("WORMHOLE_SWIFT_BIN") or str(REPO / ".build" / "debug")
    return os.path.join(str(base), SWIFT_TOOL)


def read_line(stream, timeout: float = 60.0) -> str:
    """One line from a pipe within ``timeout`` s (else RuntimeError)."""
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    buffer = b""
    deadline = time.monotonic() + timeout
    try:
        while not buffer.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise RuntimeError("no line within %g s (got %r)" % (timeout, buffer))
            chunk = os.read(stream.fileno(), 1)
            if not chunk:
                raise RuntimeError("stream ended (got %r)" % buffer)
            buffer += chunk
    finally:
        selector.close()
    return buffer.decode().rstrip("\n")


class PrivateBus:
    """A dbus-daemon from dbus/wormhole-session.conf in a temporary directory."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="wormhole-py-bench-")
        self.address = "unix:path=%s/bus" % self.directory
        self.process = subprocess.Popen(["dbus-daemon", "--config-file=%s" % CONFIG, "--address=" + self.address,
                                         "--print-address", "--nofork"], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        read_line(self.process.stdout)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()


def environment(address: str, root: str) -> dict:
    """The environment of child processes."""
    env = dict(os.environ)
    env.update({"DBUS_SESSION_BUS_ADDRESS": address, "WORMHOLE_CONTAINER_ROOT": root,
                "PYTHONPATH": str(PYTHON_DIR)})
    return env

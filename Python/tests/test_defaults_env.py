"""Fixtures and helpers shared by the shared-defaults and journal tests
(``test_defaults*.py``, ``test_journal*.py``); no tests of its own.

* ``bus_address``: a private ``dbus-daemon`` started from
  ``<repo>/dbus/wormhole-session.conf`` on a socket in a temporary directory,
  one per test module, killed at the end; never the user's session bus.
* ``env``: per test, a temporary container root (``WORMHOLE_CONTAINER_ROOT``)
  and a temporary ``XDG_RUNTIME_DIR`` (mode 0700), set in ``os.environ`` for
  in-process calls and returned as a dict for child processes.
* ``swift``: the directory of the Swift ``wormhole`` tool
  (``$WORMHOLE_SWIFT_BIN``, default ``<repo>/.build/debug``); tests that need
  it are skipped, with the reason, when it is absent.

Waiting is event-driven with bounded timeouts that fail the test: a line on
a pipe is awaited with ``selectors``; nothing sleeps.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import pytest

TESTS = Path(__file__).resolve().parent
PYTHON_DIR = TESTS.parent
REPO = PYTHON_DIR.parent
CONFIG = REPO / "dbus" / "wormhole-session.conf"
PYTHON = sys.executable
#: Every wait of these tests gives up (failing the test) after this long.
BOUND = 30.0

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


from conftest import read_line  # noqa: E402,F401  (one reader of lines for both halves of the tests)


@pytest.fixture(scope="module")
def bus_address():
    """A private dbus-daemon for the module; its address."""
    if shutil.which("dbus-daemon") is None:
        pytest.skip("dbus-daemon is not installed (apt-get install dbus-daemon)")
    directory = tempfile.mkdtemp(prefix="wormhole-py-bus-")
    socket = os.path.join(directory, "bus")
    daemon = subprocess.Popen(
        ["dbus-daemon", "--config-file=%s" % CONFIG, "--address=unix:path=%s" % socket, "--print-address",
         "--nofork"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        address = read_line(daemon.stdout)
        yield address
    finally:
        daemon.terminate()
        try:
            daemon.wait(BOUND)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        daemon.stdout.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def env(bus_address, tmp_path, monkeypatch) -> Dict[str, str]:
    """A private container root and runtime directory on the private bus."""
    root = tmp_path / "root"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    os.chmod(runtime, 0o700)
    values = {
        "WORMHOLE_CONTAINER_ROOT": str(root),
        "XDG_RUNTIME_DIR": str(runtime),
        "DBUS_SESSION_BUS_ADDRESS": bus_address,
        "PYTHONPATH": str(PYTHON_DIR),
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("WORMHOLE_LOG", raising=False)
    monkeypatch.delenv("WORMHOLE_APP_ID", raising=False)
    environment = dict(os.environ)
    environment.update(values)
    return environment


@pytest.fixture(scope="session")
def swift() -> Path:
    """The directory holding the Swift ``wormhole`` (``$WORMHOLE_SWIFT_BIN``)."""
    directory = Path(os.environ.get("WORMHOLE_SWIFT_BIN") or (REPO / ".build" / "debug"))
    if not (directory / "wormhole").exists():
        pytest.skip("the Swift wormhole tool is not in %s (set WORMHOLE_SWIFT_BIN)" % directory)
    return directory


def run(command: List[str], env: Dict[str, str], input: Optional[bytes] = None,
        timeout: float = BOUND) -> subprocess.CompletedProcess:
    """Run a command to its end (bounded), capturing its output as text."""
    completed = subprocess.run(command, env=env, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=timeout)
    completed.out = completed.stdout.decode("utf-8")  # type: ignore[attr-defined]
    completed.err = completed.stderr.decode("utf-8")  # type: ignore[attr-defined]
    return completed


def py_defaults(*arguments: str) -> List[str]:
    """The Python ``defaults`` command line."""
    return [PYTHON, "-m", "wormhole_py._cli_defaults", *arguments]


def py_journal(*arguments: str) -> List[str]:
    """The Python ``journal`` command line (also ``send`` and ``listen``)."""
    return [PYTHON, "-m", "wormhole_py._cli_journal", *arguments]


class Background:
    """A command running beside the test; :meth:`ready` waits for its
    ``ready`` line on standard error (bounded)."""

    def __init__(self, command: List[str], env: Dict[str, str]) -> None:
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ready(self) -> None:
        line = read_line(self.process.stderr)
        assert line == "ready", line

    def line(self) -> str:
        return read_line(self.process.stdout)

    def finish(self, timeout: float = BOUND):
        """Wait for the end; returns (status, stdout, stderr)."""
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out.decode(), err.decode()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

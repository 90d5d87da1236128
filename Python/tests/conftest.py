"""Fixtures and helpers of every wormhole_py test.

* ``daemon`` / ``address``: a private ``dbus-daemon`` from
  ``<repo>/dbus/wormhole-session.conf`` on a socket in a temporary directory
  (one per test, so tests may stop and restart it), killed at the end.
* ``wenv``: a temporary container root and ``XDG_RUNTIME_DIR`` (0700), set
  in ``os.environ`` for in-process calls and returned for children.
* ``swift_bin``: ``$WORMHOLE_SWIFT_BIN`` (default ``<repo>/.build/debug``);
  tests needing it are skipped, saying why, when it is absent.
* ``env``, ``bus_address``, ``swift``: the names the defaults and journal
  tests use for ``wenv``, ``address`` and ``swift_bin``.
* ``py_cli``: the ``wormhole-py`` command (the installed console script
  beside the interpreter, else ``python -m wormhole_py``).

Every wait is event-driven and bounded by ``BOUND`` (the test fails then):
lines are awaited with ``selectors``, in-process events by iterating a GLib
main context with a timeout source.  Nothing sleeps.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest

TESTS = Path(__file__).resolve().parent
PYTHON_DIR = TESTS.parent
REPO = PYTHON_DIR.parent
CONFIG = REPO / "dbus" / "wormhole-session.conf"
BOUND = 30.0

#: Tests/python.sh sets this: import and run the installed package, not the source tree.
INSTALLED = bool(os.environ.get("WORMHOLE_PY_INSTALLED"))
if not INSTALLED and str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


def read_line(stream, timeout: float = BOUND) -> str:
    """One line from a pipe within ``timeout`` seconds, else the test fails."""
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    buffer = b""
    deadline = time.monotonic() + timeout
    try:
        while not buffer.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                pytest.fail("no line within %g s (got %r)" % (timeout, buffer))
            chunk = os.read(stream.fileno(), 1)
            if not chunk:
                pytest.fail("the stream ended before a line (got %r)" % buffer)
            buffer += chunk
    finally:
        selector.close()
    return buffer.decode("utf-8", "replace").rstrip("\n")


class Daemon:
    """A private dbus-daemon that can be stopped and started again on the same socket."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="wormhole-py-test-bus-")
        self.socket = os.path.join(self.directory, "bus")
        self.address = "unix:path=%s" % self.socket
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> str:
        """Start it; returns once it printed its address (it listens then)."""
        self.process = subprocess.Popen(
            ["dbus-daemon", "--config-file=%s" % CONFIG, "--address=%s" % self.address, "--print-address",
             "--nofork"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        read_line(self.process.stdout)
        return self.address

    def stop(self) -> None:
        """Stop it and wait for it to be gone (its socket removed)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(BOUND)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        self.process = None
        if os.path.exists(self.socket):
            os.unlink(self.socket)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def daemon():
    """A private bus for one test (restartable)."""
    if shutil.which("dbus-daemon") is None:
        pytest.skip("dbus-daemon is not installed (apt-get install dbus-daemon)")
    bus = Daemon()
    bus.start()
    try:
        yield bus
    finally:
        bus.close()


@pytest.fixture
def address(daemon) -> str:
    """The private bus's address."""
    return daemon.address


@pytest.fixture
def wenv(address, tmp_path, monkeypatch) -> Dict[str, str]:
    """A private container root and runtime directory on the private bus."""
    root = tmp_path / "root"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    os.chmod(runtime, 0o700)
    values = {
        "WORMHOLE_CONTAINER_ROOT": str(root),
        "XDG_RUNTIME_DIR": str(runtime),
        "DBUS_SESSION_BUS_ADDRESS": address,
        "PYTHONPATH": str(PYTHON_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    if INSTALLED:
        del values["PYTHONPATH"]
    if os.environ.get("WORMHOLE_TEST_NO_RUNTIME_DIR"):
        del values["XDG_RUNTIME_DIR"]
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    for key in ("WORMHOLE_LOG", "WORMHOLE_APP_ID", "FLATPAK_ID", "XDG_DATA_HOME"):
        monkeypatch.delenv(key, raising=False)
    environment = dict(os.environ)
    environment.update(values)
    environment.pop("XDG_RUNTIME_DIR", None) if "XDG_RUNTIME_DIR" not in values else None
    return environment


#: The Swift command-line tool's file name: the one place the tests name it.
SWIFT_TOOL = "wormholectl"


def swift_cli(directory: Path) -> str:
    """The path of the Swift command-line tool in ``directory`` (``swift_bin``)."""
    return str(directory / SWIFT_TOOL)


@pytest.fixture(scope="session")
def swift_bin() -> Path:
    """The directory of the Swift ``wormhole`` and ``wormhole-test-peer``."""
    directory = Path(os.environ.get("WORMHOLE_SWIFT_BIN") or (REPO / ".build" / "debug"))
    if not Path(swift_cli(directory)).exists():
        pytest.skip("the Swift %s tool is not in %s (set WORMHOLE_SWIFT_BIN)" % (SWIFT_TOOL, directory))
    return directory


def python_cli() -> List[str]:
    """The ``wormhole-py`` command line."""
    beside = Path(sys.executable).with_name("wormhole-py")
    if beside.exists() and not os.environ.get("WORMHOLE_PY_FROM_SOURCE"):
        return [str(beside)]
    return [sys.executable, "-m", "wormhole_py"]


@pytest.fixture
def py_cli() -> List[str]:
    """The ``wormhole-py`` command."""
    return python_cli()


def run(command: List[str], env: Dict[str, str], input: Optional[bytes] = None,
        timeout: float = BOUND) -> subprocess.CompletedProcess:
    """Run to the end (bounded); ``.out`` / ``.err`` are the decoded outputs."""
    completed = subprocess.run(command, env=env, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=timeout)
    completed.out = completed.stdout.decode("utf-8", "replace")  # type: ignore[attr-defined]
    completed.err = completed.stderr.decode("utf-8", "replace")  # type: ignore[attr-defined]
    return completed


class Background:
    """A command beside the test: :meth:`ready` waits for ``ready`` on
    standard error, :meth:`line` for a line of standard output."""

    def __init__(self, command: List[str], env: Dict[str, str], stdin=subprocess.DEVNULL) -> None:
        self.command = command
        self.process = subprocess.Popen(command, env=env, stdin=stdin, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)

    def ready(self) -> None:
        """Wait for the readiness line (earlier lines are returned by :meth:`err_line` later)."""
        lines = []
        while True:
            line = read_line(self.process.stderr)
            if line == "ready":
                return
            lines.append(line)
            if len(lines) > 5:
                pytest.fail("no ready line from %s: %r" % (self.command, lines))

    def line(self, timeout: float = BOUND) -> str:
        """The next line of standard output."""
        return read_line(self.process.stdout, timeout)

    def err_line(self, timeout: float = BOUND) -> str:
        """The next line of standard error."""
        return read_line(self.process.stderr, timeout)

    def wait(self, timeout: float = BOUND) -> int:
        """Its exit status (bounded wait)."""
        return self.process.wait(timeout)

    def finish(self, timeout: float = BOUND):
        """Wait for the end: (status, rest of stdout, rest of stderr)."""
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL it (a writer killed mid-way) and reap it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(BOUND)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()


@pytest.fixture
def background():
    """Start commands with ``background(command, env)``; all are stopped at the end."""
    started: List[Background] = []

    def start(command: List[str], env: Dict[str, str], **kwargs) -> Background:
        process = Background(command, env, **kwargs)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def wait_for(context, predicate: Callable[[], bool], timeout: float = BOUND, what: str = "the event") -> None:
    """Iterate a GLib main context until ``predicate()``; fail the test after ``timeout`` s."""
    from gi.repository import GLib
    expired = [False]
    source = GLib.timeout_source_new(int(timeout * 1000))
    source.set_callback(lambda *_: (expired.__setitem__(0, True), False)[1])
    source.attach(context)
    try:
        while not predicate() and not expired[0]:
            context.iteration(True)
    finally:
        source.destroy()
    if not predicate():
        pytest.fail("%s did not happen within %g s" % (what, timeout))


@pytest.fixture
def context():
    """A private GLib main context pushed as this thread's default for the test
    (skipped without PyGObject: the GLib callback API needs it)."""
    pytest.importorskip("gi", reason="PyGObject is not installed: the GLib callback API is not tested here")
    from gi.repository import GLib
    ctx = GLib.MainContext.new()
    ctx.push_thread_default()
    try:
        yield ctx
    finally:
        ctx.pop_thread_default()


# -- the names of the defaults and journal tests --------------------------------------------------

PYTHON = sys.executable


@pytest.fixture
def env(wenv: Dict[str, str]) -> Dict[str, str]:
    """The container root, runtime directory and private bus of ``wenv``."""
    return wenv


@pytest.fixture
def bus_address(address: str) -> str:
    """The private bus's address."""
    return address


@pytest.fixture
def swift(swift_bin: Path) -> Path:
    """The directory holding the Swift ``wormhole``."""
    return swift_bin


def py_defaults(*arguments: str) -> List[str]:
    """The Python ``defaults`` command line."""
    return [PYTHON, "-m", "wormhole_py._cli_defaults", *arguments]


def py_journal(*arguments: str) -> List[str]:
    """The Python ``journal`` command line (also ``send`` and ``listen``)."""
    return [PYTHON, "-m", "wormhole_py._cli_journal", *arguments]

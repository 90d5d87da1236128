# SPDX-License-Identifier: MIT
"""The Lines GTK 4 window against a private dbus-daemon and the Swift ``wormholectl`` tool.

Run under a display: ``xvfb-run -a /usr/bin/python3 -m pytest Examples/Lines/gtk`` with
``GSK_RENDERER=cairo GTK_A11Y=none`` (Tests/lines-gtk.sh does). ``WORMHOLE_SWIFT_BIN`` is the
directory of ``wormhole`` (default ``<repo>/.build/debug``); ``PYTHONPATH`` may hold the Python
package (``<repo>/Python``) for the ``wormhole_py`` backend, which is skipped without it.
Every wait is bounded; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
WINDOW = HERE / "lines_window.py"
SWIFT_BIN = Path(os.environ.get("WORMHOLE_SWIFT_BIN") or REPO / ".build" / "debug")
WORMHOLE = SWIFT_BIN / "wormholectl"
TIMEOUT = 20.0
DIRECTORY = "lines"
IDENTIFIER = "toShell"


class Lines:
    """A child process whose output lines are read by threads into queues."""

    def __init__(self, argv: List[str], env: Dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, encoding="utf-8")
        self.stdout: "queue.Queue[Optional[str]]" = queue.Queue()
        self.stderr: "queue.Queue[Optional[str]]" = queue.Queue()
        self.seen: List[str] = []
        for stream, q in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=self._pump, args=(stream, q), daemon=True).start()

    def _pump(self, stream, q: "queue.Queue[Optional[str]]") -> None:
        for line in stream:
            self.seen.append(line.rstrip("\n"))
            q.put(line.rstrip("\n"))
        q.put(None)

    def wait_line(self, q: "queue.Queue[Optional[str]]", want, what: str) -> str:
        """The first line for which ``want(line)`` holds, within the bound (fails otherwise)."""
        while True:
            try:
                line = q.get(timeout=TIMEOUT)
            except queue.Empty:
                pytest.fail("timed out waiting for %s; output so far: %s" % (what, self.seen))
            if line is None:
                pytest.fail("the process ended before %s; output: %s" % (what, self.seen))
            if want(line):
                return line

    def stop(self) -> int:
        """SIGTERM, then the exit status (bounded)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("the window did not exit on SIGTERM")


@pytest.fixture(scope="module")
def bus() -> Iterator[str]:
    """A private dbus-daemon from dbus/wormhole-session.conf; its address."""
    directory = tempfile.mkdtemp(prefix="lines-gtk-bus-")
    address = "unix:path=%s/bus" % directory
    daemon = subprocess.Popen(["dbus-daemon", "--config-file=%s" % (REPO / "dbus" / "wormhole-session.conf"),
                               "--address=%s" % address, "--print-address", "--nofork"],
                              stdout=subprocess.PIPE, text=True)
    got: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: got.put(daemon.stdout.readline()), daemon=True).start()
    try:
        printed = got.get(timeout=TIMEOUT)
    except queue.Empty:
        daemon.kill()
        pytest.fail("dbus-daemon did not print its address")
    assert printed.startswith("unix:path="), printed
    yield address
    daemon.terminate()
    daemon.wait(timeout=TIMEOUT)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def world(bus: str, tmp_path: Path, request) -> Dict[str, str]:
    """A container root, a 0700 runtime directory and a group of this test's own."""
    root = tmp_path / "root"
    runtime = tmp_path / "runtime"
    root.mkdir()
    runtime.mkdir(mode=0o700)
    env = dict(os.environ)
    env.update({"WORMHOLE_CONTAINER_ROOT": str(root), "XDG_RUNTIME_DIR": str(runtime),
                "DBUS_SESSION_BUS_ADDRESS": bus, "GSK_RENDERER": env.get("GSK_RENDERER", "cairo"),
                "GTK_A11Y": "none"})
    env.pop("WORMHOLE_LOG", None)
    group = "group.com.example.lines-gtk-%s" % request.node.name.replace("[", "-").replace("]", "")
    return {"bus": bus, "root": str(root), "group": group, "env": env}


def send(world: Dict[str, str], message: dict) -> None:
    """``wormholectl send`` of a clip, as the Lines mailbox channel stores it."""
    done = subprocess.run([str(WORMHOLE), "send", "--group", world["group"], "--directory", DIRECTORY, IDENTIFIER,
                           json.dumps(message, ensure_ascii=False), "--bus-address", world["bus"]],
                          env=world["env"], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr


def start(world: Dict[str, str], backend: str, *extra: str) -> Lines:
    """Starts the window and waits for ``ready``."""
    window = Lines([sys.executable, str(WINDOW), "--group", world["group"], "--bus-address", world["bus"],
                    "--report", "--backend", backend, *extra], world["env"])
    window.wait_line(window.stderr, lambda line: line == "ready", "ready from the window")
    return window


def backends() -> List[str]:
    """``gio`` always; ``wormhole_py`` when the package imports."""
    found = ["gio"]
    try:
        import wormhole_py.messages  # noqa: F401
        found.append("wormhole_py")
    except ImportError:
        pass
    return found


@pytest.fixture(params=["gio", "wormhole_py"])
def backend(request) -> str:
    if request.param not in backends():
        pytest.skip("wormhole_py is not importable (set PYTHONPATH to <repo>/Python)")
    return request.param


def test_a_clip_sent_from_swift_appears(world: Dict[str, str], backend: str) -> None:
    window = start(world, backend)
    send(world, {"id": "1", "text": "Le café coûte 3 €", "url": "https://example.com/menu", "sentAt": 1764300000.5})
    shown = json.loads(window.wait_line(window.stdout, lambda line: "café" in line, "the clip in the window"))
    assert shown == {"text": "Le café coûte 3 €", "url": "https://example.com/menu", "reason": "posted"}
    send(world, {"id": "2", "text": "second", "sentAt": 1764300001.0})
    shown = json.loads(window.wait_line(window.stdout, lambda line: "second" in line, "the second clip"))
    assert shown["url"] is None
    assert window.stop() == 0


def test_the_stored_clip_is_shown_at_start_and_a_bad_one_is_reported(world: Dict[str, str], backend: str) -> None:
    send(world, {"id": "0", "text": "while closed", "sentAt": 1764300000.0})
    window = start(world, backend)
    shown = json.loads(window.wait_line(window.stdout, lambda line: "while closed" in line, "the stored clip"))
    assert shown["reason"] == "stored"
    send(world, {"id": "x", "no": "text"})
    window.wait_line(window.stderr, lambda line: "not a Lines clip" in line, "the error line for a bad clip")
    send(world, {"id": "3", "text": "after the bad one", "sentAt": 1764300002.0})
    window.wait_line(window.stdout, lambda line: "after the bad one" in line, "the next clip")
    assert window.stop() == 0


def test_one_screenshot(world: Dict[str, str], tmp_path: Path) -> None:
    if shutil.which("import") is None:
        pytest.skip("ImageMagick's import is not installed (apt-get install imagemagick)")
    path = os.environ.get("LINES_GTK_SCREENSHOT") or str(tmp_path / "lines-gtk.png")
    window = start(world, backends()[-1], "--screenshot", path, "--screenshot-after", "3")
    for n, (text, url) in enumerate([("Wormhole brings app groups to Linux", "https://example.com/news"),
                                     ("A line clipped from the docs", ""),
                                     ("Le café coûte 3 €", "https://example.com/menu")]):
        send(world, {"id": str(n), "text": text, "url": url, "sentAt": 1764300000.5 + n})
        window.wait_line(window.stdout, lambda line, text=text: text in line, "clip %d in the window" % n)
    window.wait_line(window.stderr, lambda line: "screenshot" in line or "import" in line, "the screenshot")
    assert any("saved the screenshot" in line for line in window.seen), window.seen
    with open(path, "rb") as png:
        assert png.read(8) == b"\x89PNG\r\n\x1a\n"
    assert window.stop() == 0

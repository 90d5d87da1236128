#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Lines in a GTK 4 window: shows each clip the moment it is stored.

Lines (``Examples/Lines`` in the Swift package) receives clipped lines from its browser
extension's native host in the group ``group.com.example.lines`` (or ``LINES_GROUP``), wormhole
directory ``lines``, mailbox ``toShell``; each clip is a JSON object
``{"id": "<uuid>", "text": "…", "url": "…", "sentAt": <seconds since 1970>}``. This window
listens to that mailbox (the stored clip at start, then every new one) through the Python
package's mailbox listener (``wormhole_py.messages.MessageCenter.listen``) when it can be imported,
else through a small watch of its own written with Gio (a ``Posted`` subscription on the bus
plus reading ``toShell.json``; it does not reconnect).

    python3 lines_window.py [--group G] [--bus-address ADDRESS] [--report] [--screenshot PNG]

``--report`` prints one JSON line on standard output each time the shown clip changes
(``{"text":…,"url":…,"reason":…}``), and the window writes ``ready`` on standard error once it
listens (tests wait for both). ``--screenshot PNG`` saves the window, rendered by GTK itself,
after the first clip (or the N-th, ``--screenshot-after N``) is painted (ImageMagick's ``import`` of the X screen). Run it with ``/usr/bin/python3`` (Debian's ``python3-gi`` and
``gir1.2-gtk-4.0``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import gi

gi.require_version("Gtk", "4.0")
gi.require_version("Gdk", "4.0")
from gi.repository import Gdk, Gio, GLib, Gtk  # noqa: E402

DEFAULT_GROUP = "group.com.example.lines"
DIRECTORY = "lines"
IDENTIFIER = "toShell"
OBJECT_PATH = "/org/wormhole/Notify1"
PLAIN_INTERFACE = "org.wormhole.Notify1"
HISTORY = 8

#: Called with the decoded clip message and the delivery's reason.
ClipHandler = Callable[[Any, str], None]
#: Called with a sentence saying what went wrong with one delivery.
ErrorHandler = Callable[[str], None]


class Clip:
    """A clip, checked: ``text`` (str), ``url`` (str or None), ``id`` (str)."""

    def __init__(self, message: Any) -> None:
        if not isinstance(message, dict) or not isinstance(message.get("text"), str):
            raise ValueError("not a Lines clip (an object with a string \"text\"): %s" % json.dumps(message)[:80])
        self.text: str = message["text"]
        url = message.get("url")
        self.url: Optional[str] = url if isinstance(url, str) and url else None
        self.id: str = message["id"] if isinstance(message.get("id"), str) else ""


# -- the mailbox watch ------------------------------------------------------------------------


class PackageWatch:
    """The mailbox through ``wormhole_py`` (the Python package's listener)."""

    name = "wormhole_py"

    def __init__(self, group: str, address: Optional[str], root: Optional[str], on_clip: ClipHandler,
                 on_error: ErrorHandler) -> None:
        from wormhole_py.messages import MessageCenter  # the ImportError decides the backend

        self._wormhole = MessageCenter(group, DIRECTORY, address=address, container_root=root)
        self._on_clip = on_clip
        self._on_error = on_error
        self._listener = self._wormhole.listen(
            [IDENTIFIER], self._delivered, on_error=lambda failure: on_error(str(failure.error)), stored=True)

    def _delivered(self, delivery: Any) -> None:
        if delivery.text is None:  # cleared
            return
        try:
            message = json.loads(delivery.text)
        except ValueError as error:
            self._on_error("the clip is not JSON: %s" % error)
            return
        self._on_clip(message, delivery.reason)

    def close(self) -> None:
        """Stops listening."""
        self._listener.cancel()
        self._wormhole.close()


def _bucket_interface(name: str) -> str:
    """``org.wormhole.Notify1.B`` + the low 16 bits of FNV-1a of the name, in hex."""
    value = 0x811C9DC5
    for byte in name.encode("utf-8"):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "%s.B%04X" % (PLAIN_INTERFACE, value & 0xFFFF)


def _quote(value: str) -> str:
    return "'%s'" % value.replace("'", "'\\''")


def _container_root() -> Path:
    explicit = os.environ.get("WORMHOLE_CONTAINER_ROOT")
    if explicit:
        return Path(explicit)
    data = os.environ.get("XDG_DATA_HOME")
    if data and data.startswith("/"):
        return Path(data) / "group-containers"
    return Path.home() / ".local" / "share" / "group-containers"


class GioWatch:
    """The mailbox with Gio alone: two match rules for the mailbox's name (its bucket interface
    and the plain one), a local subscription, and a read of ``toShell.json`` on each post.
    It refuses a symlinked file, one over 64 MiB, a byte-order mark and invalid UTF-8. It does
    not reconnect after the bus goes away (the package's listener does)."""

    name = "gio"
    max_bytes = 64 * 1024 * 1024

    def __init__(self, group: str, address: Optional[str], root: Optional[str], on_clip: ClipHandler,
                 on_error: ErrorHandler) -> None:
        if not group or "/" in group or group.startswith("."):
            raise ValueError("group %r is invalid" % group)
        self._name = "%s/%s/%s" % (group, DIRECTORY, IDENTIFIER)
        self._path = (Path(root) if root else _container_root()) / group / DIRECTORY / ("%s.json" % IDENTIFIER)
        self._on_clip = on_clip
        self._on_error = on_error
        self._last: Optional[bytes] = None
        address = address or os.environ.get("DBUS_SESSION_BUS_ADDRESS")
        if not address:
            raise ValueError("no bus address: DBUS_SESSION_BUS_ADDRESS is not set and --bus-address was not given")
        self._bus = Gio.DBusConnection.new_for_address_sync(
            address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)
        self._bus.set_exit_on_close(False)
        self._rules = ["type='signal',interface=%s,member='Posted',arg0=%s" % (_quote(iface), _quote(self._name))
                       for iface in (_bucket_interface(self._name), PLAIN_INTERFACE)]
        self._id = self._bus.signal_subscribe(None, None, "Posted", OBJECT_PATH, self._name,
                                              Gio.DBusSignalFlags.NO_MATCH_RULE, self._posted)
        for rule in self._rules:  # AddMatch answered: the rule is active
            self._bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch",
                                GLib.Variant("(s)", (rule,)), None, Gio.DBusCallFlags.NONE, 5000, None)
        self._read("stored")

    def _posted(self, _conn: Gio.DBusConnection, _sender: str, _path: str, interface: str, _member: str,
                params: GLib.Variant) -> None:
        if interface not in (PLAIN_INTERFACE, _bucket_interface(self._name)):
            return
        if params.n_children() < 1 or params.get_child_value(0).get_type_string() != "s":
            return
        self._read("posted")

    def _read(self, reason: str) -> None:
        try:
            if self._path.is_symlink():
                raise OSError("%s is a symbolic link; it is not followed" % self._path)
            fd = os.open(self._path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as error:
            self._on_error(str(error))
            return
        try:
            with os.fdopen(fd, "rb") as stream:
                data = stream.read(self.max_bytes + 1)
        except OSError as error:
            self._on_error("cannot read %s: %s" % (self._path, error))
            return
        if len(data) > self.max_bytes:
            self._on_error("%s is larger than %d bytes" % (self._path, self.max_bytes))
            return
        if data == self._last:
            return
        if data.startswith(b"\xef\xbb\xbf"):
            self._on_error("%s starts with a byte-order mark" % self._path)
            return
        try:
            message = json.loads(data.decode("utf-8", errors="strict"))
        except (UnicodeDecodeError, ValueError) as error:
            self._on_error("%s is not one JSON document: %s" % (self._path, error))
            return
        self._last = data
        self._on_clip(message, reason)

    def close(self) -> None:
        """Removes the rules and closes the connection."""
        self._bus.signal_unsubscribe(self._id)
        if not self._bus.is_closed():
            try:
                self._bus.close_sync(None)
            except GLib.Error:
                pass  # the bus went away meanwhile


# -- the window -------------------------------------------------------------------------------


class LinesWindow(Gtk.Window):
    """The latest clip, large, with its page; the earlier ones below."""

    def __init__(self, report: bool) -> None:
        super().__init__(title="Lines")
        self.set_default_size(560, 320)
        self._report = report
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
        for side in ("top", "bottom", "start", "end"):
            getattr(box, "set_margin_%s" % side)(18)
        heading = Gtk.Label(label="Latest clip", xalign=0.0)
        heading.add_css_class("heading")
        self.clip_label = Gtk.Label(label="No clip yet", xalign=0.0, wrap=True)
        self.clip_label.add_css_class("title-2")
        self.url_label = Gtk.Label(label="", xalign=0.0, wrap=True)
        self.url_label.add_css_class("dim-label")
        self.history = Gtk.ListBox()
        self.history.set_selection_mode(Gtk.SelectionMode.NONE)
        earlier = Gtk.Label(label="Earlier", xalign=0.0)
        earlier.add_css_class("heading")
        for child in (heading, self.clip_label, self.url_label, earlier, self.history):
            box.append(child)
        self.set_child(box)
        self._current: Optional[Clip] = None

    def show_clip(self, clip: Clip, reason: str) -> None:
        """Shows ``clip`` as the latest; the previous one moves to the history."""
        if self._current is not None:
            self.history.prepend(Gtk.Label(label=self._current.text, xalign=0.0, ellipsize=3))
            row = self.history.get_row_at_index(HISTORY)
            if row is not None:
                self.history.remove(row)
        self._current = clip
        self.clip_label.set_label(clip.text)
        self.url_label.set_label(clip.url or "")
        if self._report:
            print(json.dumps({"text": self.clip_label.get_label(), "url": clip.url, "reason": reason},
                             ensure_ascii=False), flush=True)


def save_screenshot(path: str, done: Callable[[Optional[str]], None]) -> None:
    """Saves the X screen (the window under Xvfb) as PNG with ImageMagick's ``import``, then calls
    ``done(None)``, or ``done(reason)`` when it failed. (PyGObject cannot carry GTK's render
    nodes, so GTK's own snapshot of the widget cannot be written from Python.)"""
    try:
        proc = Gio.Subprocess.new(["import", "-window", "root", path], Gio.SubprocessFlags.STDERR_PIPE)
    except GLib.Error as error:
        done("cannot run import (ImageMagick): %s" % error.message)
        return

    def finished(p: Gio.Subprocess, result: Gio.AsyncResult) -> None:
        try:
            p.wait_check_finish(result)
            done(None)
        except GLib.Error as error:
            done("import failed: %s" % error.message)

    proc.wait_check_async(None, finished)


def main(argv: Optional[list] = None) -> int:
    """Runs the window until it is closed (or SIGTERM/SIGINT)."""
    parser = argparse.ArgumentParser(description="Lines clips in a GTK 4 window.")
    parser.add_argument("--group", default=os.environ.get("LINES_GROUP") or DEFAULT_GROUP)
    parser.add_argument("--bus-address", default=None, help="default: DBUS_SESSION_BUS_ADDRESS")
    parser.add_argument("--root", default=None, help="the container root (default: as Wormhole finds it)")
    parser.add_argument("--report", action="store_true", help="print a JSON line whenever the shown clip changes")
    parser.add_argument("--screenshot", default=None, help="save the screen as PNG after a clip is painted")
    parser.add_argument("--screenshot-after", type=int, default=1, metavar="N",
                        help="the clip after which to save it (default 1, the first)")
    parser.add_argument("--backend", choices=("auto", "wormhole_py", "gio"), default="auto")
    args = parser.parse_args(argv)

    if not Gtk.init_check():
        print("lines_window: cannot open a display (DISPLAY/WAYLAND_DISPLAY)", file=sys.stderr)
        return 1
    loop = GLib.MainLoop()
    window = LinesWindow(args.report)
    window.connect("close-request", lambda _w: loop.quit() or False)
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signum, lambda: loop.quit() or GLib.SOURCE_REMOVE)
    window.present()

    screenshot = {"path": args.screenshot}

    def shot_after_paint(clock: Gdk.FrameClock) -> None:
        clock.disconnect(screenshot.pop("handler"))

        def done(failure: Optional[str]) -> None:
            print("lines_window: %s" % (failure or "saved the screenshot"), file=sys.stderr, flush=True)

        save_screenshot(screenshot.pop("path"), done)

    def on_clip(message: Any, reason: str) -> None:
        try:
            clip = Clip(message)
        except ValueError as error:
            on_error(str(error))
            return
        window.show_clip(clip, reason)
        screenshot["shown"] = screenshot.get("shown", 0) + 1
        if screenshot.get("path") and "handler" not in screenshot and screenshot["shown"] >= args.screenshot_after:
            clock = window.get_frame_clock()
            screenshot["handler"] = clock.connect("after-paint", shot_after_paint)
            window.queue_draw()

    def on_error(text: str) -> None:
        print("lines_window: %s" % text, file=sys.stderr, flush=True)

    watch = None
    backends = {"wormhole_py": [PackageWatch], "gio": [GioWatch], "auto": [PackageWatch, GioWatch]}[args.backend]
    for backend in backends:
        try:
            watch = backend(args.group, args.bus_address, args.root, on_clip, on_error)
            break
        except ImportError as error:
            if args.backend != "auto":
                print("lines_window: wormhole_py cannot be imported: %s" % error, file=sys.stderr)
                return 1
        except (GLib.Error, ValueError, OSError) as error:
            print("lines_window: cannot listen: %s" % error, file=sys.stderr)
            return 1
        except Exception as error:  # the package's own errors (WormholeError) name the bad value
            print("lines_window: cannot listen: %s" % error, file=sys.stderr)
            return 1
    print("ready", file=sys.stderr, flush=True)
    print("lines_window: listening through %s" % watch.name, file=sys.stderr, flush=True)
    loop.run()
    watch.close()
    window.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The event loops a subscription runs on (internal).

A :class:`Reactor` is what the one subscription core needs from an event
loop: timers, a readable-descriptor watch, directory watches (inotify, see
:mod:`wormhole_py._inotify`) and the bus connection kind that fits the loop.

* :class:`GLibReactor`: a GLib main context (a GTK application's, or one of
  your own); its bus connections are ``Gio.DBusConnection`` objects.
* :class:`AsyncioReactor`: an asyncio event loop; its bus connections are
  jeepney's asyncio connections.

Callbacks always run in the reactor's loop, never in a thread of ours.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, List, Optional, Protocol, Tuple

from ._inotify import DirectoryWatch
from .errors import StorageError

__all__ = ["AsyncioReactor", "GLibReactor", "Handle", "Reactor", "guarded"]

log = logging.getLogger("wormhole_py")

DirectoryCallback = Callable[[List[Tuple[str, str]]], None]


class Handle(Protocol):
    """Something that can be cancelled (a timer, a watch)."""

    def cancel(self) -> None: ...


def guarded(what: str, callback: Callable[..., Any], *args: Any) -> None:
    """Run ``callback(*args)``; an exception is logged, never propagated into
    the loop (a subscriber's bug never stops the others)."""
    try:
        callback(*args)
    except Exception:
        log.exception("wormhole_py: %s raised", what)


class Reactor:
    """An event loop as the subscription core sees it."""

    #: ``"gio"`` or ``"jeepney"``: the bus connections this loop uses.
    wire: str = ""

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Handle:
        """Run ``callback`` once after ``seconds``."""
        raise NotImplementedError

    def add_reader(self, fd: int, callback: Callable[[], None]) -> Handle:
        """Run ``callback`` whenever ``fd`` is readable, until cancelled."""
        raise NotImplementedError

    def watch_directory(self, path: str, callback: DirectoryCallback) -> Handle:
        """Watch ``path`` with inotify; ``callback(events)`` with the
        :meth:`DirectoryWatch.read` events each time some are queued.

        :raises StorageError: (``io``) the directory cannot be watched.
        """
        try:
            watch = DirectoryWatch(path)
        except OSError as error:
            raise StorageError("io", "cannot watch %s: %s" % (path, error.strerror), path) from None

        def readable() -> None:
            events = watch.read()
            if events:
                guarded("a directory watch", callback, events)

        reader = self.add_reader(watch.fd, readable)
        return _WatchHandle(watch, reader)


class _WatchHandle:
    def __init__(self, watch: DirectoryWatch, reader: Handle) -> None:
        self.watch = watch
        self.reader = reader

    def cancel(self) -> None:
        self.reader.cancel()
        self.watch.close()


class _GLibSource:
    def __init__(self, source: Any) -> None:
        self.source: Optional[Any] = source

    def cancel(self) -> None:
        if self.source is not None:
            self.source.destroy()
            self.source = None


class GLibReactor(Reactor):
    """A GLib main context (default: the calling thread's thread-default)."""

    wire = "gio"

    def __init__(self, context: Optional[Any] = None) -> None:
        from gi.repository import GLib
        self.GLib = GLib
        self.context: Any = context if context is not None else GLib.MainContext.ref_thread_default()

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Handle:
        source = self.GLib.timeout_source_new(max(0, int(seconds * 1000)))
        handle = _GLibSource(source)

        def fire(*_: Any) -> bool:
            handle.source = None
            guarded("a timer", callback)
            return False

        source.set_callback(fire)
        source.attach(self.context)
        return handle

    def add_reader(self, fd: int, callback: Callable[[], None]) -> Handle:
        channel = self.GLib.IOChannel.unix_new(fd)
        source = self.GLib.io_create_watch(channel, self.GLib.IOCondition.IN)

        def fire(*_: Any) -> bool:
            callback()
            return True

        source.set_callback(fire)
        source.attach(self.context)
        return _GLibSource(source)


class _ReaderHandle:
    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.loop = loop
        self.fd = fd

    def cancel(self) -> None:
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            self.fd = -1


class AsyncioReactor(Reactor):
    """An asyncio event loop (default: the running one)."""

    wire = "jeepney"

    def __init__(self, loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        self.loop = loop if loop is not None else asyncio.get_running_loop()

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Handle:
        return self.loop.call_later(max(0.0, seconds), guarded, "a timer", callback)

    def add_reader(self, fd: int, callback: Callable[[], None]) -> Handle:
        self.loop.add_reader(fd, callback)
        return _ReaderHandle(self.loop, fd)

# SPDX-License-Identifier: Apache-2.0
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
import threading
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

from ._inotify import Inotify
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

    def _loop_key(self) -> Any:
        """What identifies the loop (its directory watches share one instance)."""
        raise NotImplementedError

    def watch_directory(self, path: str, callback: DirectoryCallback) -> Handle:
        """Watch ``path`` with inotify; ``callback(events)`` with the
        ``(ARRIVED | CREATED | LEFT | RESCAN, name)`` events each time some are
        queued.  Every watch of one loop shares one inotify instance.

        :raises StorageError: (``io``) the directory cannot be watched.
        """
        key = self._loop_key()
        with _hubs_lock:
            hub = _hubs.get(key)
            if hub is None:
                try:
                    hub = _Hub(self, key)
                except OSError as error:
                    raise StorageError("io", "cannot watch %s: %s" % (path, error.strerror), path) from None
                _hubs[key] = hub
            try:
                return hub.add(path, callback)
            except OSError as error:
                hub.release_if_idle()
                raise StorageError("io", "cannot watch %s: %s" % (path, error.strerror), path) from None


_hubs: Dict[Any, "_Hub"] = {}
_hubs_lock = threading.Lock()


class _Hub:
    """The one inotify instance of a loop and who watches what through it."""

    def __init__(self, reactor: Reactor, key: Any) -> None:
        self.inotify = Inotify()
        self.key = key
        self.watchers: Dict[int, List[DirectoryCallback]] = {}
        self.reader = reactor.add_reader(self.inotify.fd, self._readable)

    def add(self, path: str, callback: DirectoryCallback) -> Handle:
        wd = self.inotify.add(path)
        self.watchers.setdefault(wd, []).append(callback)
        return _WatchHandle(self, wd, callback)

    def remove(self, wd: int, callback: DirectoryCallback) -> None:
        with _hubs_lock:
            callbacks = self.watchers.get(wd)
            if callbacks is None or callback not in callbacks:
                return
            callbacks.remove(callback)
            if not callbacks:
                del self.watchers[wd]
                self.inotify.remove(wd)
            self.release_if_idle()

    def release_if_idle(self) -> None:
        """No watch left: close the instance (called with the lock held)."""
        if not self.watchers and _hubs.get(self.key) is self:
            del _hubs[self.key]
            self.reader.cancel()
            self.inotify.close()

    def _readable(self) -> None:
        events = self.inotify.read()
        by_watch: Dict[int, List[Tuple[str, str]]] = {}
        for wd, kind, name in events:
            for target in (list(self.watchers) if wd == -1 else [wd]):
                by_watch.setdefault(target, []).append((kind, name))
        for wd, batch in by_watch.items():
            for callback in list(self.watchers.get(wd, ())):
                guarded("a directory watch", callback, batch)


class _WatchHandle:
    def __init__(self, hub: _Hub, wd: int, callback: DirectoryCallback) -> None:
        self.hub: Optional[_Hub] = hub
        self.wd = wd
        self.callback = callback

    def cancel(self) -> None:
        if self.hub is not None:
            self.hub.remove(self.wd, self.callback)
            self.hub = None


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

    def _loop_key(self) -> Any:
        return ("glib", self.context)

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

    def _loop_key(self) -> Any:
        return ("asyncio", self.loop)

    def call_later(self, seconds: float, callback: Callable[[], None]) -> Handle:
        return self.loop.call_later(max(0.0, seconds), guarded, "a timer", callback)

    def add_reader(self, fd: int, callback: Callable[[], None]) -> Handle:
        self.loop.add_reader(fd, callback)
        return _ReaderHandle(self.loop, fd)

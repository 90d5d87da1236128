# SPDX-License-Identifier: Apache-2.0
"""An observing connection that survives the bus going away (internal).

A :class:`Link` owns one private bus connection on a reactor (a GLib main
context with Gio, or an asyncio loop with jeepney; see
:mod:`wormhole_py._reactor`).  Subscribers register a :class:`Route`: match
rules and callbacks; the rules are added with ``AddMatch`` calls the bus
answers before the route counts as active.  When the connection closes the
link tells each route ``lost``, then waits for the bus **without polling**:
a ``unix:path=`` socket's directory is watched (inotify) and a connection is
tried when the socket appears; for other addresses (abstract sockets) tries
are spaced 10 ms doubling to 2 s.  Once reconnected it re-adds every rule,
then tells each route ``back`` once (the subscriber catches up).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, List, Optional, Tuple

from ._contract import CONNECT_TIMEOUT_SECONDS
from ._reactor import AsyncioReactor, GLibReactor, Handle, Reactor, guarded
from ._wire import CallFailed
from .bus import resolve_address, socket_path
from .errors import BusError, ContextBusyError

__all__ = ["Link", "Route"]

Done = Callable[[Optional[BusError]], None]


class Route:
    """One subscriber of a :class:`Link`: its match rules, and callbacks."""

    def __init__(self, rules: List[str], on_signal: Callable[[str, str, str, Tuple[Any, ...]], None],
                 on_lost: Optional[Callable[[str], None]] = None,
                 on_back: Optional[Callable[[], None]] = None) -> None:
        self.rules = list(rules)
        self.on_signal = on_signal
        self.on_lost = on_lost
        self.on_back = on_back
        self.active = True


class Link:
    """A reconnecting observing connection (see the module docstring).

    Made with :meth:`start` (GLib: connected, or lost and waiting, when it
    returns) or :meth:`start_async` (asyncio).
    """

    def __init__(self, reactor: Reactor, address: Optional[str] = None,
                 connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        self.reactor = reactor
        self.address: str = resolve_address(address)
        self.connect_timeout = connect_timeout
        self.wire: Any = None
        self.routes: List[Route] = []
        self.last_error: Optional[str] = None
        #: Why the first connection failed (when the bus was not required), else None.
        self.start_error: Optional[BusError] = None
        self._socket = socket_path(self.address)
        self._watch: Optional[Handle] = None
        self._retry: Optional[Handle] = None
        self._retry_delay = 0.01
        self._connecting: Optional[Callable[[], None]] = None
        self._cancelled = False

    # -- starting ------------------------------------------------------------------

    def start(self, require_bus: bool) -> None:
        """Connect now (GLib reactor: a blocking, bounded connect).

        :raises BusError: the bus cannot be reached and ``require_bus``.
        """
        from . import _wire_gio
        assert isinstance(self.reactor, GLibReactor)
        self._watch_socket()
        context = self.reactor.context
        pushed = context != self.reactor.GLib.MainContext.ref_thread_default()
        if pushed:
            if not context.acquire():
                raise ContextBusyError("contextBusy", "the main context given is owned (iterated) by another "
                                       "thread; subscribe from that thread or pass a context of your own")
            context.release()
            context.push_thread_default()
        try:
            wire = _wire_gio.connect_blocking(self.address, self.connect_timeout)
        except BusError as error:
            self._start_failed(error, require_bus)
            return
        finally:
            if pushed:
                context.pop_thread_default()
        self._attach(wire)

    async def start_async(self, require_bus: bool) -> None:
        """Connect now (asyncio reactor).

        :raises BusError: the bus cannot be reached and ``require_bus``.
        """
        from . import _wire_jeepney
        self._watch_socket()
        try:
            wire = await _wire_jeepney.connect_async(self.address, self.connect_timeout)
        except BusError as error:
            self._start_failed(error, require_bus)
            return
        if self._cancelled:
            wire.close()
            return
        self._attach(wire)

    def _start_failed(self, error: BusError, require_bus: bool) -> None:
        if require_bus:
            self._stop_watch()
            raise error
        self.last_error = str(error)
        self.start_error = error
        self._schedule_retry()

    @property
    def connected(self) -> bool:
        """Whether the link is on the bus now."""
        return self.wire is not None and not self.wire.closed

    # -- routes --------------------------------------------------------------------

    def add(self, route: Route, done: Done, first: bool = False) -> None:
        """Register ``route``; ``done(None)`` once its rules are active (GLib:
        before this returns), ``done(error)`` if the bus refused one (the route
        is removed then).  While lost, the rules are added on reconnection."""
        if first:
            self.routes.insert(0, route)
        else:
            self.routes.append(route)
        wire = self.wire
        if wire is None or wire.closed or not route.rules:
            done(None)
            return

        def answered(reason: Optional[str]) -> None:
            if reason is None:
                done(None)
                return
            if route in self.routes:
                self.routes.remove(route)
            done(BusError("requestFailed", "the bus refused a match rule: %s" % reason))

        self._add_matches(wire, route.rules, answered)

    def remove(self, route: Route) -> None:
        """Unregister ``route`` and remove its rules (without waiting)."""
        route.active = False
        if route in self.routes:
            self.routes.remove(route)
        wire = self.wire
        if wire is not None and not wire.closed:
            for rule in route.rules:
                if isinstance(self.reactor, GLibReactor):
                    wire.remove_match(rule)
                else:
                    wire.call_unanswered("RemoveMatch", "s", (rule,))

    def _add_matches(self, wire: Any, rules: List[str], done: Callable[[Optional[str]], None]) -> None:
        if isinstance(self.reactor, GLibReactor):
            wire.add_matches(rules, done, blocking=wire is self.wire and not self._reattaching)
            return

        async def add() -> None:
            try:
                for future in [wire.call("AddMatch", "s", (rule,)) for rule in rules]:
                    reply = await asyncio.wait_for(future, CONNECT_TIMEOUT_SECONDS)
                    if reply.header.message_type.name == "error":
                        done(str(reply.body[0]) if reply.body else "refused")
                        return
            except (CallFailed, asyncio.TimeoutError) as error:
                done(str(error) or "no answer")
                return
            done(None)

        assert isinstance(self.reactor, AsyncioReactor)
        self.reactor.loop.create_task(add())

    _reattaching = False

    def close(self) -> None:
        """Stop: remove the watch and timers and close the connection."""
        self._cancelled = True
        self._stop_watch()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._connecting is not None:
            self._connecting()
            self._connecting = None
        wire = self.wire
        self.wire = None
        if wire is not None:
            wire.close()

    # -- the connection ------------------------------------------------------------

    def _attach(self, wire: Any) -> None:
        self.wire = wire
        wire.on_signal = self._on_signal
        wire.on_closed = lambda reason: self._on_closed(wire, reason)

    def _on_signal(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        for route in list(self.routes):
            if route.active:
                guarded("a subscriber", route.on_signal, interface, member, signature, body)

    def _on_closed(self, wire: Any, reason: str) -> None:
        if self.wire is not wire:
            return
        self.wire = None
        self.last_error = reason
        for route in list(self.routes):
            if route.active and route.on_lost is not None:
                guarded("a subscriber", route.on_lost, reason)
        if not self._cancelled:
            self._try_connect()

    # -- waiting for the bus without polling -----------------------------------------

    def _watch_socket(self) -> None:
        if self._socket is None or self._watch is not None:
            return
        base = os.path.basename(self._socket)

        def changed(events: List[Tuple[str, str]]) -> None:
            if self.wire is None and not self._cancelled and any(name in (base, "") for _, name in events):
                self._retry_delay = 0.01
                self._try_connect()

        try:
            self._watch = self.reactor.watch_directory(os.path.dirname(self._socket) or "/", changed)
        except BusError:
            self._watch = None
        except Exception:
            self._watch = None

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _schedule_retry(self) -> None:
        """A connection attempt failed: with a socket path that does not
        exist, its creation tries again; otherwise back off 10 ms .. 2 s."""
        if self._cancelled or self._retry is not None:
            return
        if self._socket is not None and self._watch is not None and not os.path.exists(self._socket):
            return  # the socket's creation wakes us
        delay = self._retry_delay
        self._retry_delay = min(self._retry_delay * 2, 2.0)

        def fire() -> None:
            self._retry = None
            self._try_connect()

        self._retry = self.reactor.call_later(delay, fire)

    def _try_connect(self) -> None:
        """Connect without blocking the loop, bounded."""
        if self._connecting is not None or self.wire is not None or self._cancelled:
            return

        def done(wire: Any, reason: Optional[str]) -> None:
            self._connecting = None
            if wire is None:
                self.last_error = reason
                self._schedule_retry()
                return
            if self._cancelled:
                wire.close()
                return
            self._retry_delay = 0.01
            self._reattach(wire)

        if isinstance(self.reactor, GLibReactor):
            from . import _wire_gio
            self._connecting = lambda: None
            self._connecting = _wire_gio.connect_async(self.reactor.context, self.address, self.connect_timeout,
                                                       done)
            return
        from . import _wire_jeepney
        assert isinstance(self.reactor, AsyncioReactor)

        async def connect() -> None:
            try:
                wire = await _wire_jeepney.connect_async(self.address, self.connect_timeout)
            except BusError as error:
                done(None, str(error))
                return
            done(wire, None)

        task = self.reactor.loop.create_task(connect())

        def abandon() -> None:
            task.cancel()

        self._connecting = abandon

    def _reattach(self, wire: Any) -> None:
        """Re-add every route's rules (answered calls), then say ``back``."""
        self._attach(wire)
        rules: List[str] = []
        for route in self.routes:
            rules.extend(route.rules)

        def finished(_reason: Optional[str]) -> None:
            if self.wire is not wire:
                return  # closed meanwhile: the next reconnection re-adds
            for route in list(self.routes):
                if route.active and route.on_back is not None:
                    guarded("a subscriber", route.on_back)

        self._reattaching = True
        try:
            if rules:
                self._add_matches(wire, rules, finished)
            else:
                finished(None)
        finally:
            self._reattaching = False


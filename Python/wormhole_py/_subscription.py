# SPDX-License-Identifier: Apache-2.0
"""The one subscription design for every kind (mailboxes, notifications,
defaults, journals).

A :class:`Subscription` joins three things, once for all kinds:

* a :class:`~wormhole_py._link.Link` route: the kind's match rules on a
  reconnecting bus connection;
* a directory watch (inotify) on the kind's directory, while the bus is away
  (and, for kinds that ask, while it is there: writers that do not post);
* a :class:`Feed`, the kind's own part: what a signal, a file event or a
  catch-up delivers.

It delivers to a callback, or (asyncio) to ``async for``.  Lost and back are
said once each (``on_connection_change(connected, reason, changed)``); after
a reconnection the feed catches up and ``changed`` says how many deliveries
that made.  Everything runs in the reactor's loop; nothing is printed (errors
go to ``on_error``, or the ``wormhole_py`` logger).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Callable, Dict, Generic, List, Optional, Tuple, TypeVar

from ._closing import Closing
from ._contract import CONNECT_TIMEOUT_SECONDS
from ._inotify import ARRIVED, LEFT, RESCAN
from ._link import Link, Route
from ._reactor import AsyncioReactor, GLibReactor, Handle, Reactor, guarded
from .errors import BusError, WormholeError

__all__ = ["Failure", "Feed", "Subscription"]

log = logging.getLogger("wormhole_py")

T = TypeVar("T")

ConnectionCallback = Callable[[bool, Optional[str], int], None]


class Failure:
    """A delivery that failed (the suite, file or record could not be read,
    a transient message was malformed); the subscription goes on.

    :ivar key: what it was for (identifier, key, or ``""``).
    :ivar error: why.
    """

    def __init__(self, key: str, error: WormholeError) -> None:
        self.key = key
        self.error = error

    @property
    def identifier(self) -> str:
        """The same as :attr:`key` (a mailbox's identifier)."""
        return self.key

    def __repr__(self) -> str:
        return "Failure(%r, %r)" % (self.key, self.error)


class Feed(Generic[T]):
    """The part of a subscription that is its kind's own."""

    #: The match rules.
    rules: List[str]
    #: The directory watched while the bus is away (``None``: none).
    directory: Optional[Path] = None
    #: Watch the directory while on the bus too (writers that do not post).
    watch_always = False
    #: With :attr:`watch_always`: a file that arrives is caught up only when
    #: no signal settles it within this many seconds (``None``: at once).
    grace: Optional[float] = None

    sub: "Subscription[T]"

    def on_signal(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        """A signal matched the rules."""

    def file_key(self, name: str) -> Optional[str]:
        """What file ``name`` in :attr:`directory` is for (``None``: nothing)."""
        return None

    def wake(self, key: str, reason: str) -> bool:
        """Deliver what changed for ``key``; True when something was delivered."""
        return False

    def catch_up(self) -> int:
        """Deliver everything that changed unseen; returns how many deliveries."""
        return 0

    def started(self) -> None:
        """The subscription is active (rules added, watch on)."""

    def taken(self, item: T) -> None:
        """``async for`` took ``item`` (the one before it was handled)."""

    def close(self) -> None:
        """The subscription ended."""


_END = object()


class Subscription(Closing, Generic[T]):
    """The handle of every subscription: :meth:`cancel` (idempotent), a
    context manager (``with`` / ``async with``), and on asyncio an async
    iterator of its deliveries (when made without a callback).

    Made by the facades (:meth:`Wormhole.listen`, :meth:`Wormhole.listen_async`,
    :meth:`NotificationCenter.observe`, :func:`observe_async`,
    :meth:`GroupDefaults.listen`, :meth:`Journal.listen`, ...).
    """

    def __init__(self, reactor: Reactor, feed: Feed[T], callback: Optional[Callable[[T], None]],
                 on_error: Optional[Callable[[Failure], None]] = None,
                 on_connection_change: Optional[ConnectionCallback] = None) -> None:
        self.reactor = reactor
        self.feed = feed
        feed.sub = self
        self.callback = callback
        self.on_error = on_error
        self.on_connection_change = on_connection_change
        self.link: Optional[Link] = None
        self._own_link = True
        #: Why the bus could not be reached at start (the subscription then
        #: listens through its directory and waits for the bus), else ``None``.
        self.bus_error: Optional[BusError] = None
        self._route = Route(feed.rules, self._on_signal, self._on_lost, self._on_back)
        self._watch: Optional[Handle] = None
        self._pending: Dict[str, Handle] = {}
        self._cancelled = False
        self._queue: Optional["asyncio.Queue[Any]"] = None
        self._previous: Any = _END
        if callback is None:
            if not isinstance(reactor, AsyncioReactor):
                raise TypeError("a subscription on a GLib main context needs a callback")
            self._queue = asyncio.Queue()

    # -- starting -------------------------------------------------------------------

    def start(self, address: Optional[str], require_bus: bool, connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
              link: Optional[Link] = None) -> "Subscription[T]":
        """GLib: connect (bounded), add the rules, watch; active on return."""
        assert isinstance(self.reactor, GLibReactor)
        if self.feed.rules or link is not None:
            if link is None:
                link = self._new_link(address, connect_timeout, require_bus)
                if link is None:
                    return self
                link.start(require_bus)
            else:
                self._own_link = False
            self.link = link
            self._note_start_error()
            failure: List[BusError] = []
            link.add(self._route, lambda error: failure.append(error) if error is not None else None)
            if failure:
                self._close_link()
                raise failure[0]
        self._begin()
        return self

    async def start_async(self, address: Optional[str], require_bus: bool,
                          connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> "Subscription[T]":
        """asyncio: connect (bounded), add the rules, watch; active on return."""
        assert isinstance(self.reactor, AsyncioReactor)
        if self.feed.rules:
            link = self._new_link(address, connect_timeout, require_bus)
            if link is None:
                return self
            self.link = link
            await link.start_async(require_bus)
            self._note_start_error()
            added: "asyncio.Future[Optional[BusError]]" = self.reactor.loop.create_future()

            def answered(refusal: Optional[BusError]) -> None:
                if not added.done():
                    added.set_result(refusal)

            link.add(self._route, answered)
            refusal = await added
            if refusal is not None:
                self._close_link()
                raise refusal
        self._begin()
        return self

    def _new_link(self, address: Optional[str], connect_timeout: float, require_bus: bool) -> Optional[Link]:
        """A link on ``address``; without any address (and the bus not
        required) ``None``, and the subscription starts on its directory alone."""
        try:
            return Link(self.reactor, address, connect_timeout)
        except BusError as error:
            if require_bus:
                raise
            self.bus_error = error
            self._begin()
            return None

    def _note_start_error(self) -> None:
        link = self.link
        if link is not None and not link.connected:
            self.bus_error = link.start_error or BusError("connectionFailed",
                                                          link.last_error or "cannot connect to the bus")

    def _begin(self) -> None:
        self._update_watch()
        self.feed.started()

    # -- state ------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether it still delivers."""
        return not self._cancelled

    @property
    def connected(self) -> bool:
        """Whether it is on the bus (else it listens through its directory)."""
        return self.link is not None and self.link.connected

    # -- delivering (called by the feed) ------------------------------------------------

    def emit(self, item: T) -> None:
        """Deliver ``item``."""
        if self._cancelled:
            return
        if self._queue is not None:
            self._queue.put_nowait(item)
        elif self.callback is not None:
            guarded("a subscription's callback", self.callback, item)

    def error(self, key: str, error: WormholeError) -> None:
        """Report a delivery that failed (``on_error``, else a log warning)."""
        if self._cancelled:
            return
        failure = Failure(key, error)
        if self.on_error is not None:
            guarded("a subscription's error callback", self.on_error, failure)
        elif self._queue is not None:
            self._queue.put_nowait(failure)
        else:
            log.warning("wormhole_py: %s", error)

    def settle(self, key: str) -> None:
        """A signal came for ``key``: its unsignalled catch-up is not needed."""
        pending = self._pending.pop(key, None)
        if pending is not None:
            pending.cancel()

    # -- the bus going and coming ---------------------------------------------------------

    def _on_signal(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        if not self._cancelled:
            self.feed.on_signal(interface, member, signature, body)

    def _on_lost(self, reason: str) -> None:
        self.bus_error = BusError("disconnected", reason)
        self._update_watch()
        if self.on_connection_change is not None:
            guarded("on_connection_change", self.on_connection_change, False, reason, 0)

    def _on_back(self) -> None:
        self.bus_error = None
        self._update_watch()
        changed = self.feed.catch_up()
        if self.on_connection_change is not None:
            guarded("on_connection_change", self.on_connection_change, True, None, changed)

    # -- the directory ----------------------------------------------------------------------

    def _update_watch(self) -> None:
        directory = self.feed.directory
        wanted = directory is not None and not self._cancelled and (self.feed.watch_always or not self.connected)
        if wanted and self._watch is None and directory is not None:
            try:
                self._watch = self.reactor.watch_directory(str(directory), self._on_files)
            except WormholeError as error:
                if not self.connected:
                    self.error("", error)
        elif not wanted and self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _on_files(self, events: List[Tuple[str, str]]) -> None:
        if self._cancelled:
            return
        if any(kind == RESCAN for kind, _ in events):
            self.feed.catch_up()
            return
        connected = self.connected
        seen: List[str] = []
        for kind, name in events:
            key = self.feed.file_key(name)
            if key is None:
                continue
            if connected:
                if kind != ARRIVED:
                    continue
                grace = self.feed.grace
                if grace is None:
                    if key not in seen:
                        seen.append(key)
                elif key not in self._pending:
                    self._arm(key, grace)
            elif kind in (ARRIVED, LEFT) and key not in seen:
                seen.append(key)
        for key in seen:
            self.feed.wake(key, "catchUp" if connected else "posted")

    def _arm(self, key: str, grace: float) -> None:
        def fire() -> None:
            if self._pending.pop(key, None) is not None and not self._cancelled:
                self.feed.wake(key, "catchUp")

        self._pending[key] = self.reactor.call_later(grace, fire)

    # -- ending ---------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop delivering: remove the rules, the watch and the timers
        (idempotent); ``async for`` ends."""
        if self._cancelled:
            return
        self._cancelled = True
        for handle in self._pending.values():
            handle.cancel()
        self._pending.clear()
        self._update_watch()
        self._close_link()
        self.feed.close()
        if self._queue is not None:
            self._queue.put_nowait(_END)

    def _close_link(self) -> None:
        if self.link is not None:
            self.link.remove(self._route)
            if self._own_link:
                self.link.close()

    def close(self) -> None:
        """The same as :meth:`cancel` (what ``with`` and ``async with`` call)."""
        self.cancel()

    def __aiter__(self) -> "Subscription[T]":
        if self._queue is None:
            raise TypeError("this subscription delivers to its callback; make one without a callback to iterate it")
        return self

    async def __anext__(self) -> T:
        queue = self._queue
        if queue is None:
            raise TypeError("this subscription delivers to its callback")
        if self._previous is not _END:
            previous, self._previous = self._previous, _END
            self.feed.taken(previous)
        if self._cancelled and queue.empty():
            raise StopAsyncIteration
        item = await queue.get()
        if item is _END:
            raise StopAsyncIteration
        self._previous = item
        return item  # type: ignore[no-any-return]

    async def next(self, timeout: Optional[float] = None) -> T:
        """The next delivery, waiting at most ``timeout`` seconds.

        :raises asyncio.TimeoutError: none came in time.
        :raises StopAsyncIteration: the subscription was cancelled.
        """
        return await asyncio.wait_for(self.__anext__(), timeout)

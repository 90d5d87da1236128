# SPDX-License-Identifier: Apache-2.0
"""Darwin-style notifications on the session bus (contract section 1).

::

    center = DarwinNotificationCenter()
    observer = center.listen("com.example.app.refresh", lambda note: print(note))
    center.post("com.example.app.refresh", state=42)
    GLib.MainLoop().run()

Callbacks run in the main context that was the thread-default of the thread
that created the :class:`DarwinNotificationCenter` (or the ``context`` passed); the
caller iterates it (``GLib.MainLoop().run()``, or a GTK application's loop).
For scripts, :func:`notifications` returns a blocking iterator that runs a
private main context.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple

from ._closing import Closing
from ._contract import (
    CONNECT_TIMEOUT_SECONDS,
    PLAIN_INTERFACE,
    POSTED,
    all_rule,
    bucket_interface,
    exact_rule,
    prefix_rule,
    received_state,
    validate_name,
    validate_prefix,
)
from ._deprecated import renamed
from ._link import Link
from ._reactor import AsyncioReactor, GLibReactor
from ._subscription import Feed, Subscription
from ._wire import require
from .bus import CONFIRM_TIMEOUT_SECONDS, Bus
from .errors import ContextBusyError, NotSentError

__all__ = [
    "BlockingQueue",
    "DarwinNotificationCenter",
    "Notification",
    "NotificationCenter",
    "Observer",
    "listen_async",
    "notifications",
    "observe_async",
    "parse_posted",
    "post_async",
]

_INTEGER_TYPES = frozenset("ynqiuxt")


@dataclass(frozen=True)
class Notification:
    """One delivery to an observer.

    :ivar name: the notification name (for a catch-up of a prefix or
        ``all`` observer: the prefix, or ``""``).
    :ivar state: the carried state (a non-negative integer), or ``None``.
    :ivar reason: ``"posted"``, or ``"catchUp"`` once after a reconnect.
    """

    name: str
    state: Optional[int]
    reason: str = "posted"


def parse_posted(signature: str, body: Tuple[Any, ...]) -> Optional[Tuple[str, Optional[int]]]:
    """Read a ``Posted`` signal's body: ``(name, state)``, or ``None`` when the
    first argument is missing or not a string (dropped, never a crash).  A
    state of any integer type that is not negative is kept; anything else
    is no state."""
    if not signature or signature[0] != "s" or not body or not isinstance(body[0], str):
        return None
    state: Optional[int] = None
    if len(signature) >= 2 and signature[1] in _INTEGER_TYPES and len(body) >= 2:
        state = received_state(body[1])
    return body[0], state


class NotificationFeed(Feed[Notification]):
    """Notifications of some names, of the names under prefixes, or of all."""

    def __init__(self, names: Sequence[str], prefix: bool = False, everything: bool = False) -> None:
        self.names = list(dict.fromkeys(names))
        self.prefix = prefix
        self.everything = everything
        rules: List[str] = []
        self.exact: Dict[str, Tuple[str, str]] = {}
        if everything:
            rules.append(all_rule())
        elif prefix:
            for name in self.names:
                validate_prefix(name)
                rules.append(prefix_rule(name))
        else:
            for name in self.names:
                validate_name(name)
                bucket = bucket_interface(name)
                self.exact[name] = (bucket, PLAIN_INTERFACE)
                rules += [exact_rule(name, bucket), exact_rule(name, PLAIN_INTERFACE)]
        self.rules = rules

    def _matches(self, interface: str, posted: str) -> bool:
        if self.everything:
            return True
        if self.prefix:
            return any(posted.startswith(name) for name in self.names)
        interfaces = self.exact.get(posted)
        return interfaces is not None and interface in interfaces

    def on_signal(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        if member != POSTED:
            return
        parsed = parse_posted(signature, body)
        if parsed is not None and self._matches(interface, parsed[0]):
            self.sub.emit(Notification(parsed[0], parsed[1], "posted"))

    def catch_up(self) -> int:
        names = [""] if self.everything else self.names
        for name in names:
            self.sub.emit(Notification(name, None, "catchUp"))
        return len(names)


#: The handle :meth:`DarwinNotificationCenter.listen` returns.
Observer = Subscription[Notification]


class DarwinNotificationCenter(Closing):
    """Post and listen to notifications on one bus, with callbacks in a GLib
    main context (PyGObject); Swift's ``DarwinNotificationCenter``
    (``NotificationCenter`` before 2.0, still accepted with a
    :class:`DeprecationWarning`).  For asyncio see :func:`listen_async` and
    :func:`post_async`.

    :param address: the bus address (default ``DBUS_SESSION_BUS_ADDRESS``).
    :param context: where callbacks run (default: the calling thread's
        thread-default main context).
    :param require_bus: when false, a bus that cannot be reached is waited for
        instead of raising.
    :raises BusError: the bus cannot be reached (``require_bus``), or
        ``transportMissing`` without PyGObject.
    """

    def __init__(self, address: Optional[str] = None, context: Any = None,
                 require_bus: bool = True, connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        require("gio", "DarwinNotificationCenter (callbacks in a GLib main context)")
        self.reactor = GLibReactor(context)
        self.context = self.reactor.context
        self.link = Link(self.reactor, address, connect_timeout)
        self.link.start(require_bus)
        self._sender: Optional[Bus] = None
        self._subscriptions: List[Subscription[Notification]] = []
        #: The last state this center received per name it listens to (a post without a state sends it).
        self._received: Dict[str, int] = {}

    @property
    def connected(self) -> bool:
        """Whether the observing connection is on the bus."""
        return self.link.connected

    # -- posting -----------------------------------------------------------

    def post(self, name: str, state: Optional[int] = None, confirm: bool = True,
             timeout: float = CONFIRM_TIMEOUT_SECONDS) -> int:
        """Post ``name`` (``notify_post``), with ``state`` if given (any
        non-negative integer up to 2**64-1).  Without one the name's state as
        this center knows it is carried: the last one it posted or received
        for the name, else 0 (docs/contract.md, *Proposed for the next
        contract version*).  With ``confirm`` (default) the bus has taken the
        signal when this returns; otherwise the exit drain confirms it.

        :returns: the state sent.
        :raises InvalidInputError: bad name or state (nothing is sent).
        :raises NotSentError: the bus did not take it within ``timeout``.
        """
        validate_name(name)
        sender = self._sender_bus(timeout)
        received = self._received.pop(name, None)  # newer than what the sender posted, if any
        value = sender.post(name, received if state is None else state)
        if confirm:
            sender.confirm(timeout)
        return value

    def _sender_bus(self, timeout: float) -> Bus:
        if self._sender is None or self._sender.closed:
            try:
                self._sender = Bus.connect(self.link.address, timeout=min(timeout, CONNECT_TIMEOUT_SECONDS))
            except Exception as error:
                raise NotSentError(getattr(error, "code", "connectionFailed"), str(error)) from None
        return self._sender

    # -- observing ---------------------------------------------------------

    def listen(self, name: str, callback: Callable[[Notification], None], prefix: bool = False) -> Observer:
        """Call ``callback(Notification)`` for every post of ``name`` (or, with
        ``prefix``, of every name starting with ``name``, which ends in
        ``/``), and once with reason ``catchUp`` after each reconnect.  Active
        when this returns."""
        return self._observe(NotificationFeed([name], prefix=prefix), callback)

    def listen_all(self, callback: Callable[[Notification], None]) -> Observer:
        """Call ``callback`` for every ``Posted`` on the bus, whatever its name."""
        return self._observe(NotificationFeed([], everything=True), callback)

    def observe(self, name: str, callback: Callable[[Notification], None], prefix: bool = False) -> Observer:
        """Deprecated: :meth:`listen` (Swift's and GJS's verb); goes in the next release."""
        renamed("DarwinNotificationCenter.observe", "DarwinNotificationCenter.listen")
        return self.listen(name, callback, prefix)

    def observe_all(self, callback: Callable[[Notification], None]) -> Observer:
        """Deprecated: :meth:`listen_all`; goes in the next release."""
        renamed("DarwinNotificationCenter.observe_all", "DarwinNotificationCenter.listen_all")
        return self.listen_all(callback)

    def _observe(self, feed: NotificationFeed, callback: Callable[[Notification], None]) -> Observer:
        def deliver(note: Notification) -> None:
            if note.state is not None:
                self._received[note.name] = note.state
            callback(note)
        subscription = Subscription(self.reactor, feed, deliver)
        subscription.start(None, False, link=self.link)
        self._subscriptions.append(subscription)
        return subscription

    def on_connection_change(self, callback: Callable[[bool, Optional[str]], None], first: bool = False) -> None:
        """Call ``callback(False, reason)`` once when the bus is lost and
        ``callback(True, None)`` once when it is back (after the rules are
        re-added; before the observers' catch-ups when ``first``, else
        after those registered earlier)."""
        from ._link import Route
        route = Route([], lambda *_: None, lambda reason: callback(False, reason), lambda: callback(True, None))
        self.link.add(route, lambda _error: None, first=first)

    def close(self) -> None:
        """Drain pending posts and close both connections."""
        for subscription in self._subscriptions:
            subscription.cancel()
        if self._sender is not None:
            self._sender.close()
        self.link.close()


async def listen_async(*names: str, prefix: bool = False, everything: bool = False,
                       address: Optional[str] = None, require_bus: bool = True,
                       callback: Optional[Callable[[Notification], None]] = None,
                       on_connection_change: Optional[Callable[[bool, Optional[str], int], None]] = None,
                       connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> Subscription[Notification]:
    """Listen to ``names`` (or the names under the prefixes ``names``, or
    ``everything``) on the running asyncio loop; active when the await
    returns.  Without ``callback``, iterate it::

        async with await listen_async("com.example.app.refresh") as notes:
            async for note in notes:
                print(note.name, note.state)

    :raises BusError: the bus cannot be reached (``require_bus``), or
        ``transportMissing`` without jeepney.
    """
    require("jeepney", "listen_async (asyncio)")
    if not names and not everything:
        raise ValueError("give names, or everything=True")
    feed = NotificationFeed(names, prefix=prefix, everything=everything)
    subscription = Subscription(AsyncioReactor(), feed, callback, on_connection_change=on_connection_change)
    return await subscription.start_async(address, require_bus, connect_timeout)


async def observe_async(*names: str, **kwargs: Any) -> Subscription[Notification]:
    """Deprecated: :func:`listen_async` (Swift's and GJS's verb); goes in the next release."""
    renamed("wormhole_py.observe_async", "listen_async")
    return await listen_async(*names, **kwargs)


async def post_async(name: str, state: Optional[int] = None, address: Optional[str] = None,
                     timeout: float = CONFIRM_TIMEOUT_SECONDS) -> int:
    """Post ``name`` and wait (without blocking the loop) until the bus took
    it.  See :class:`wormhole_py.AsyncSender` to post many.

    :returns: the state sent.
    """
    from ._async_send import AsyncSender
    async with AsyncSender(address) as sender:
        return await sender.post(name, state, timeout=timeout)


class BlockingQueue:
    """Items produced by callbacks in a private main context, read by a
    blocking :meth:`get` that iterates that context.

    Refuses (:class:`ContextBusyError`) to iterate from inside a running
    main-loop callback of this thread or when another thread owns the
    context: a script's blocking iterator must not run on a context a main
    loop is already iterating.
    """

    def __init__(self, context: Any = None) -> None:
        from gi.repository import GLib
        self.GLib = GLib
        self.context: Any = context if context is not None else GLib.MainContext.new()
        self.items: Deque[Any] = collections.deque()

    def put(self, item: Any) -> None:
        """Queue ``item`` (called from callbacks in :attr:`context`)."""
        self.items.append(item)

    def get(self, timeout: Optional[float] = None) -> Any:
        """The next item, iterating the context; raises :class:`TimeoutError`
        when ``timeout`` seconds pass first."""
        if self.items:
            return self.items.popleft()
        GLib = self.GLib
        if GLib.main_depth() > 0:
            raise ContextBusyError("contextBusy", "a blocking iterator cannot run inside a main-loop callback "
                                   "(the loop would stall); observe with a callback instead")
        if not self.context.acquire():
            raise ContextBusyError("contextBusy", "the main context is already being iterated by another thread")
        try:
            expired = [False]
            source = None
            if timeout is not None:
                source = GLib.timeout_source_new(max(0, int(timeout * 1000)))
                source.set_callback(lambda *_: (expired.__setitem__(0, True), False)[1])
                source.attach(self.context)
            try:
                while not self.items and not expired[0]:
                    self.context.iteration(True)
            finally:
                if source is not None:
                    source.destroy()
        finally:
            self.context.release()
        if self.items:
            return self.items.popleft()
        raise TimeoutError("no event within %g s" % (timeout or 0))


class _BlockingNotifications:
    """Iterator returned by :func:`notifications`."""

    def __init__(self, names: Sequence[str], prefix: bool, address: Optional[str],
                 timeout: Optional[float]) -> None:
        self.queue = BlockingQueue()
        self.timeout = timeout
        self.center = DarwinNotificationCenter(address, self.queue.context)
        for name in names:
            self.center.listen(name, self.queue.put, prefix=prefix)

    def __iter__(self) -> Iterator[Notification]:
        return self

    def __next__(self) -> Notification:
        try:
            note: Notification = self.queue.get(self.timeout)
            return note
        except TimeoutError:
            raise StopIteration from None

    def close(self) -> None:
        """Remove the rules and close the connections."""
        self.center.close()

    def __enter__(self) -> "_BlockingNotifications":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def notifications(*names: str, prefix: bool = False, address: Optional[str] = None,
                  timeout: Optional[float] = None) -> _BlockingNotifications:
    """A blocking iterator of :class:`Notification` for scripts (its own
    private main context; active when this returns).  Iteration stops when
    ``timeout`` seconds pass without a notification.

    >>> for note in notifications("com.example.app.refresh", timeout=10):  # doctest: +SKIP
    ...     print(note.name, note.state)
    """
    return _BlockingNotifications(names, prefix, address, timeout)


class NotificationCenter(DarwinNotificationCenter):
    """Deprecated: :class:`DarwinNotificationCenter`, the name Swift uses
    (2.0).  Works as before and warns; it goes in the next release."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        renamed("wormhole_py.NotificationCenter", "DarwinNotificationCenter")
        super().__init__(*args, **kwargs)

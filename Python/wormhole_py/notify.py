"""Darwin-style notifications on the session bus (contract section 1).

::

    center = NotificationCenter()
    observer = center.observe("com.example.app.refresh", lambda note: print(note))
    center.post("com.example.app.refresh", state=42)
    GLib.MainLoop().run()

Callbacks run in the main context that was the thread-default of the thread
that created the :class:`NotificationCenter` (or the ``context`` passed); the
caller iterates it (``GLib.MainLoop().run()``, or a GTK application's loop).
For scripts, :func:`notifications` returns a blocking iterator that runs a
private main context.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Callable, Deque, Iterator, List, Optional, Sequence, Tuple

from gi.repository import GLib

from ._contract import (
    CONNECT_TIMEOUT_SECONDS, PLAIN_INTERFACE, POSTED, all_rule, bucket_interface, exact_rule, prefix_rule,
    received_state, validate_name, validate_prefix,
)
from ._link import Link, Route, pushed
from .bus import CONFIRM_TIMEOUT_SECONDS, Bus
from .errors import ContextBusyError, NotSentError

__all__ = ["Notification", "NotificationCenter", "Observer", "notifications", "parse_posted", "BlockingQueue"]

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


def parse_posted(parameters: GLib.Variant) -> Optional[Tuple[str, Optional[int]]]:
    """Read a ``Posted`` signal's body: ``(name, state)``, or ``None`` when the
    first argument is missing or not a string (dropped, never a crash).  A
    state of any integer type that is not negative is kept; anything else
    is no state."""
    if parameters is None or not parameters.get_type_string().startswith("(") or parameters.n_children() < 1:
        return None
    first = parameters.get_child_value(0)
    if first.get_type_string() != "s":
        return None
    name = first.get_string()
    state: Optional[int] = None
    if parameters.n_children() >= 2:
        second = parameters.get_child_value(1)
        if second.get_type_string() in _INTEGER_TYPES:
            state = received_state(second.unpack())
    return name, state


class Observer:
    """A registered observer; :meth:`cancel` removes its bus rules."""

    def __init__(self, center: "NotificationCenter", route: Route) -> None:
        self._center = center
        self._route = route

    @property
    def active(self) -> bool:
        """Whether the observer still delivers."""
        return self._route.active

    def cancel(self) -> None:
        """Stop delivering and remove the match rules (idempotent)."""
        if self._route.active:
            self._center.link.remove(self._route)


class NotificationCenter:
    """Post and observe notifications on one bus.

    :param address: the bus address (default ``DBUS_SESSION_BUS_ADDRESS``).
    :param context: where callbacks run (default: the calling thread's
        thread-default main context).
    :param require_bus: when false, a bus that cannot be reached is waited for
        instead of raising.
    :raises BusError: the bus cannot be reached (``require_bus``).
    """

    def __init__(self, address: Optional[str] = None, context: Optional[GLib.MainContext] = None,
                 require_bus: bool = True, connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        self.link = Link(address, context, require_bus=require_bus, connect_timeout=connect_timeout)
        self.context = self.link.context
        self._sender: Optional[Bus] = None

    @property
    def connected(self) -> bool:
        """Whether the observing connection is on the bus."""
        return self.link.connected

    # -- posting -----------------------------------------------------------

    def post(self, name: str, state: Optional[int] = None, confirm: bool = True,
             timeout: float = CONFIRM_TIMEOUT_SECONDS) -> int:
        """Post ``name`` (``notify_post``), with ``state`` if given (any
        non-negative integer up to 2**64-1; without one the name's last posted
        state is carried).  With ``confirm`` (default) the bus has taken the
        signal when this returns; otherwise the exit drain confirms it.

        :returns: the state sent.
        :raises InvalidInputError: bad name or state (nothing is sent).
        :raises NotSentError: the bus did not take it within ``timeout``.
        """
        validate_name(name)
        sender = self._sender_bus(timeout)
        value = sender.post(name, state)
        if confirm:
            sender.confirm(timeout)
        return value

    def _sender_bus(self, timeout: float) -> Bus:
        if self._sender is None or self._sender.closed:
            try:
                with pushed(self.context):
                    self._sender = Bus.connect(self.link.address, timeout=min(timeout, CONNECT_TIMEOUT_SECONDS))
            except Exception as error:
                raise NotSentError(getattr(error, "code", "connectionFailed"), str(error)) from None
        return self._sender

    # -- observing ---------------------------------------------------------

    def observe(self, name: str, callback: Callable[[Notification], None], prefix: bool = False) -> Observer:
        """Call ``callback(Notification)`` for every post of ``name`` (or, with
        ``prefix``, of every name starting with ``name``, which ends in
        ``/``), and once with reason ``catchUp`` after each reconnect.  Active
        when this returns."""
        if prefix:
            validate_prefix(name)
            rules = [prefix_rule(name)]

            def matches(interface: str, posted: str) -> bool:
                return posted.startswith(name)
        else:
            validate_name(name)
            bucket = bucket_interface(name)
            rules = [exact_rule(name, bucket), exact_rule(name, PLAIN_INTERFACE)]

            def matches(interface: str, posted: str) -> bool:
                return posted == name and interface in (bucket, PLAIN_INTERFACE)
        return self._observe(rules, matches, callback, name)

    def observe_all(self, callback: Callable[[Notification], None]) -> Observer:
        """Call ``callback`` for every ``Posted`` on the bus, whatever its name."""
        return self._observe([all_rule()], lambda interface, posted: True, callback, "")

    def _observe(self, rules: List[str], matches: Callable[[str, str], bool],
                 callback: Callable[[Notification], None], catch_up_name: str) -> Observer:
        def on_signal(interface: str, member: str, parameters: GLib.Variant) -> None:
            if member != POSTED:
                return
            parsed = parse_posted(parameters)
            if parsed is None or not matches(interface, parsed[0]):
                return
            callback(Notification(parsed[0], parsed[1], "posted"))

        def on_back() -> None:
            callback(Notification(catch_up_name, None, "catchUp"))

        route = Route(rules, on_signal, None, on_back)
        self.link.add(route)
        return Observer(self, route)

    def on_connection_change(self, callback: Callable[[bool, Optional[str]], None], first: bool = False) -> None:
        """Call ``callback(False, reason)`` once when the bus is lost and
        ``callback(True, None)`` once when it is back (after the rules are
        re-added; before the observers' catch-ups when ``first``, else
        after those registered earlier)."""
        route = Route([], lambda *_: None, lambda reason: callback(False, reason), lambda: callback(True, None))
        if first:
            self.link.routes.insert(0, route)
        else:
            self.link.routes.append(route)

    def close(self) -> None:
        """Drain pending posts and close both connections."""
        if self._sender is not None:
            self._sender.close()
        self.link.close()

    def __enter__(self) -> "NotificationCenter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class BlockingQueue:
    """Items produced by callbacks in a private main context, read by a
    blocking :meth:`get` that iterates that context.

    Refuses (:class:`ContextBusyError`) to iterate from inside a running
    main-loop callback of this thread or when another thread owns the
    context: a script's blocking iterator must not run on a context a main
    loop is already iterating.
    """

    def __init__(self, context: Optional[GLib.MainContext] = None) -> None:
        self.context = context if context is not None else GLib.MainContext.new()
        self.items: Deque[Any] = collections.deque()

    def put(self, item: Any) -> None:
        """Queue ``item`` (called from callbacks in :attr:`context`)."""
        self.items.append(item)

    def get(self, timeout: Optional[float] = None) -> Any:
        """The next item, iterating the context; raises :class:`TimeoutError`
        when ``timeout`` seconds pass first."""
        if self.items:
            return self.items.popleft()
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
        raise TimeoutError("no event within %g s" % timeout)


class _BlockingNotifications:
    """Iterator returned by :func:`notifications`."""

    def __init__(self, names: Sequence[str], prefix: bool, address: Optional[str],
                 timeout: Optional[float]) -> None:
        self.queue = BlockingQueue()
        self.timeout = timeout
        with pushed(self.queue.context):
            self.center = NotificationCenter(address, self.queue.context)
            for name in names:
                self.center.observe(name, self.queue.put, prefix=prefix)

    def __iter__(self) -> Iterator[Notification]:
        return self

    def __next__(self) -> Notification:
        try:
            return self.queue.get(self.timeout)
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

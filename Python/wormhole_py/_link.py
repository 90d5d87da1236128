"""An observing connection that survives the bus going away (internal).

A :class:`Link` owns one private :class:`~wormhole_py.bus.Bus` and lives in
one GLib main context (the thread-default context of the thread that made
it).  Every callback it makes (signals, lost/back events) is dispatched in
that context, so the caller iterates it (a GTK application's main loop does).

Subscribers register match rules and a route; the link adds the rules with
``AddMatch`` calls the bus answers before :meth:`Link.add` returns (the
observer is active then).  When the connection closes the link says so,
then waits for the bus **without polling**: a ``unix:path=`` socket's
directory is watched with ``Gio.File.monitor_directory`` and a connection is
tried when the socket appears; for other addresses (abstract sockets, tcp)
tries are spaced 10 ms doubling to 2 s (documented limitation).  Once
reconnected it re-adds every rule, then tells each subscriber ``back`` once
(the subscriber delivers its one catch-up).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, List, Optional

from gi.repository import Gio, GLib

from ._contract import CONNECT_TIMEOUT_SECONDS, OBJECT_PATH
from .bus import DBUS_INTERFACE, DBUS_NAME, DBUS_PATH, Bus, resolve_address, socket_path
from .errors import BusError, ContextBusyError

__all__ = ["Link", "Route", "pushed"]

SignalHandler = Callable[[str, str, GLib.Variant], None]
"""(interface, member, parameters) -> None"""


class pushed:
    """Context manager: make ``context`` the thread-default while creating
    GLib objects, so their callbacks dispatch there."""

    def __init__(self, context: GLib.MainContext) -> None:
        self.context = context
        self.did_push = False

    def __enter__(self) -> "pushed":
        if self.context == GLib.MainContext.ref_thread_default():
            return self
        if not self.context.acquire():
            raise ContextBusyError("contextBusy", "the main context given is owned (iterated) by another thread; "
                                   "subscribe from that thread or pass a context of your own")
        self.context.release()
        self.context.push_thread_default()
        self.did_push = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.did_push:
            self.context.pop_thread_default()


class Route:
    """One subscriber of a :class:`Link`: its match rules, and callbacks."""

    def __init__(self, rules: List[str], on_signal: SignalHandler,
                 on_lost: Optional[Callable[[str], None]] = None,
                 on_back: Optional[Callable[[], None]] = None) -> None:
        self.rules = list(rules)
        self.on_signal = on_signal
        self.on_lost = on_lost
        self.on_back = on_back
        self.active = True


class Link:
    """A reconnecting observing connection (see the module docstring).

    :param address: bus address (default ``DBUS_SESSION_BUS_ADDRESS``).
    :param context: the main context callbacks run in (default: the
        calling thread's thread-default context).
    :param require_bus: when false, a bus that cannot be reached at start is
        not an error: the link starts lost and waits for it.
    """

    def __init__(self, address: Optional[str] = None, context: Optional[GLib.MainContext] = None,
                 require_bus: bool = True, connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        self.context: GLib.MainContext = context if context is not None else GLib.MainContext.ref_thread_default()
        self.address: str = resolve_address(address)
        self.connect_timeout = connect_timeout
        self.bus: Optional[Bus] = None
        self.routes: List[Route] = []
        self.last_error: Optional[str] = None
        #: Why the first connection failed (``require_bus=False``), else None.
        self.start_error: Optional[BusError] = None
        self._subscription: Optional[int] = None
        self._closed_handler: Optional[int] = None
        self._monitor: Optional[Gio.FileMonitor] = None
        self._connecting = False
        self._retry_source: Optional[GLib.Source] = None
        self._retry_delay_ms = 10
        self._cancelled = False
        self._lock = threading.RLock()
        self._socket = socket_path(self.address)
        with pushed(self.context):
            self._watch_socket()
            try:
                bus = Bus.connect(self.address, timeout=connect_timeout)
            except BusError as error:
                if require_bus:
                    self._stop_watch()
                    raise
                self.last_error = str(error)
                self.start_error = error
                self._schedule_retry_if_needed()
            else:
                self._attach(bus)

    # -- state -----------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether the link is on the bus now."""
        return self.bus is not None and not self.bus.closed

    def add(self, route: Route) -> None:
        """Register ``route``; its rules are active when this returns (when
        connected; while lost they are added on reconnection)."""
        with self._lock:
            self.routes.append(route)
            bus = self.bus
        if bus is not None and not bus.closed:
            try:
                for rule in route.rules:
                    bus.add_match(rule)
            except GLib.Error as error:
                with self._lock:
                    self.routes.remove(route)
                raise BusError("requestFailed", "the bus refused a match rule: %s" % error.message) from None

    def remove(self, route: Route) -> None:
        """Unregister ``route`` and remove its rules (without waiting)."""
        route.active = False
        with self._lock:
            if route in self.routes:
                self.routes.remove(route)
            bus = self.bus
        if bus is not None and not bus.closed:
            for rule in route.rules:
                bus.connection.call(DBUS_NAME, DBUS_PATH, DBUS_INTERFACE, "RemoveMatch",
                                    GLib.Variant("(s)", (rule,)), None, Gio.DBusCallFlags.NONE, -1, None,
                                    None, None)

    def close(self) -> None:
        """Stop: remove the watch and close the connection."""
        self._cancelled = True
        self._stop_watch()
        if self._retry_source is not None:
            self._retry_source.destroy()
            self._retry_source = None
        bus = self.bus
        self.bus = None
        if bus is not None:
            self._detach(bus)
            bus.close()

    # -- connection ------------------------------------------------------------

    def _attach(self, bus: Bus) -> None:
        connection = bus.connection
        self.bus = bus
        self._subscription = connection.signal_subscribe(
            None, None, None, OBJECT_PATH, None, Gio.DBusSignalFlags.NO_MATCH_RULE, self._on_signal)
        self._closed_handler = connection.connect("closed", self._on_closed)

    def _detach(self, bus: Bus) -> None:
        if self._subscription is not None:
            bus.connection.signal_unsubscribe(self._subscription)
            self._subscription = None
        if self._closed_handler is not None:
            bus.connection.disconnect(self._closed_handler)
            self._closed_handler = None

    def _on_signal(self, _connection: Gio.DBusConnection, _sender: Optional[str], _path: str, interface: str,
                   member: str, parameters: GLib.Variant) -> None:
        for route in list(self.routes):
            if route.active:
                try:
                    route.on_signal(interface, member, parameters)
                except Exception:  # a subscriber's bug never breaks the others
                    import traceback
                    traceback.print_exc()

    def _on_closed(self, connection: Gio.DBusConnection, _remote: bool, error: Optional[GLib.Error]) -> None:
        bus = self.bus
        if bus is None or bus.connection is not connection:
            return
        self._detach(bus)
        self.bus = None
        reason = error.message if error is not None else "the connection was closed"
        self.last_error = reason
        for route in list(self.routes):
            if route.active and route.on_lost is not None:
                route.on_lost(reason)
        if self._cancelled:
            return
        self._try_connect()

    # -- waiting for the bus without polling --------------------------------------

    def _watch_socket(self) -> None:
        if self._socket is None:
            return
        directory = Gio.File.new_for_path(os.path.dirname(self._socket) or "/")
        try:
            self._monitor = directory.monitor_directory(Gio.FileMonitorFlags.WATCH_MOVES, None)
        except GLib.Error:
            self._monitor = None
            return
        self._monitor.connect("changed", self._on_socket_event)

    def _stop_watch(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            self._monitor = None

    def _on_socket_event(self, _monitor: Gio.FileMonitor, file: Gio.File, other: Optional[Gio.File],
                         event: Gio.FileMonitorEvent) -> None:
        if self.bus is not None or self._cancelled:
            return
        names = {file.get_path()}
        if other is not None:
            names.add(other.get_path())
        if self._socket in names and event in (Gio.FileMonitorEvent.CREATED, Gio.FileMonitorEvent.CHANGES_DONE_HINT,
                                               Gio.FileMonitorEvent.ATTRIBUTE_CHANGED,
                                               Gio.FileMonitorEvent.RENAMED, Gio.FileMonitorEvent.MOVED_IN):
            self._retry_delay_ms = 10
            self._try_connect()

    def _schedule_retry_if_needed(self) -> None:
        """A connection attempt failed: with a socket path that does not
        exist, its creation tries again; otherwise back off 10 ms .. 2 s."""
        if self._cancelled or self._retry_source is not None:
            return
        if self._socket is not None and self._monitor is not None and not os.path.exists(self._socket):
            return  # the socket's CREATED event will come
        # The socket is there but refused or did not answer (a daemon starting, stopped, or
        # hung): try again, 10 ms doubling to 2 s, until it answers or is re-created.
        delay = self._retry_delay_ms
        self._retry_delay_ms = min(self._retry_delay_ms * 2, 2000)
        source = GLib.timeout_source_new(delay)

        def fire(*_: Any) -> bool:
            self._retry_source = None
            self._try_connect()
            return False

        source.set_callback(fire)
        source.attach(self.context)
        self._retry_source = source

    def _try_connect(self) -> None:
        """Connect asynchronously (the context is never blocked), bounded."""
        if self._connecting or self.bus is not None or self._cancelled:
            return
        self._connecting = True
        cancellable = Gio.Cancellable()
        timer = GLib.timeout_source_new(int(self.connect_timeout * 1000))
        timer.set_callback(lambda *_: (cancellable.cancel(), False)[1])
        timer.attach(self.context)
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION

        def done(_source: Any, result: Gio.AsyncResult) -> None:
            timer.destroy()
            self._connecting = False
            try:
                connection = Gio.DBusConnection.new_for_address_finish(result)
            except GLib.Error as error:
                self.last_error = error.message
                self._schedule_retry_if_needed()
                return
            connection.set_exit_on_close(False)
            if self._cancelled:
                connection.close(None, None, None)
                return
            self._retry_delay_ms = 10
            self._reattach(Bus(connection, self.address))

        with pushed(self.context):
            Gio.DBusConnection.new_for_address(self.address, flags, None, cancellable, done)

    def _reattach(self, bus: Bus) -> None:
        """Re-add every route's rules (answered calls), then say ``back``."""
        self._attach(bus)
        rules: List[str] = []
        for route in self.routes:
            rules.extend(route.rules)
        pending = [len(rules)]

        def finished() -> None:
            for route in list(self.routes):
                if route.active and route.on_back is not None:
                    route.on_back()

        if not rules:
            finished()
            return

        def answered(connection: Gio.DBusConnection, result: Gio.AsyncResult) -> None:
            try:
                connection.call_finish(result)
            except GLib.Error:
                pass  # the connection closed meanwhile: the next reconnection re-adds
            pending[0] -= 1
            if pending[0] == 0 and self.bus is bus:
                finished()

        with pushed(self.context):
            for rule in rules:
                bus.connection.call(DBUS_NAME, DBUS_PATH, DBUS_INTERFACE, "AddMatch", GLib.Variant("(s)", (rule,)),
                                    None, Gio.DBusCallFlags.NONE, -1, None, answered)

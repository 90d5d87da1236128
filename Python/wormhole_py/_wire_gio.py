# SPDX-License-Identifier: Apache-2.0
"""Bus connections through PyGObject's Gio (internal).

Each connection is private (``Gio.DBusConnection.new_for_address``, flags
``AUTHENTICATION_CLIENT | MESSAGE_BUS_CONNECTION``, ``exit_on_close`` off):
the package never uses ``Gio.bus_get_sync``'s shared singleton, so closing
or losing one never ends the program nor disturbs the application's own
session-bus connection.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple

import gi

gi.require_version("GLib", "2.0")
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

from ._contract import OBJECT_PATH, shown  # noqa: E402
from ._wire import CallFailed, SignalHandler  # noqa: E402
from .errors import BusError  # noqa: E402

__all__ = ["ObservingWire", "SyncWire", "connect_async", "is_address"]

_NAME = "org.freedesktop.DBus"
_PATH = "/org/freedesktop/DBus"
_FLAGS = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION


def is_address(value: str) -> bool:
    """Whether GLib accepts ``value`` as a D-Bus address."""
    return bool(Gio.dbus_is_supported_address(value))


def _connect(address: str, timeout: Optional[float]) -> Any:
    """A blocking connect bounded by a timer thread that cancels it."""
    cancellable = Gio.Cancellable()
    timer = threading.Timer(timeout, cancellable.cancel) if timeout is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        connection = Gio.DBusConnection.new_for_address_sync(address, _FLAGS, None, cancellable)
    except GLib.Error as error:
        if cancellable.is_cancelled():
            raise BusError("timedOut", "the bus at %s did not answer within %g s" % (shown(address), timeout or 0),
                           address) from None
        raise BusError("connectionFailed", "cannot connect to the bus at %s: %s"
                       % (shown(address), error.message), address) from None
    finally:
        if timer is not None:
            timer.cancel()
    connection.set_exit_on_close(False)
    return connection


def _variant(signature: str, body: Tuple[Any, ...]) -> Any:
    return GLib.Variant("(%s)" % signature, body)


class SyncWire:
    """A blocking connection (GDBus serialises writes: thread-safe)."""

    def __init__(self, address: str, timeout: float, connection: Any = None) -> None:
        self.connection: Any = connection if connection is not None else _connect(address, timeout)

    @property
    def unique_name(self) -> str:
        return str(self.connection.get_unique_name() or "")

    @property
    def closed(self) -> bool:
        return bool(self.connection.is_closed())

    def emit(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        if self.connection.is_closed():
            raise CallFailed(False, "the connection is closed")
        try:
            self.connection.emit_signal(None, OBJECT_PATH, interface, member, _variant(signature, body))
        except GLib.Error as error:
            raise CallFailed(False, error.message) from None

    def call(self, method: str, signature: str, body: Tuple[Any, ...], timeout: float) -> Tuple[Any, ...]:
        if self.connection.is_closed():
            raise CallFailed(False, "the connection is closed")
        try:
            reply = self.connection.call_sync(_NAME, _PATH, _NAME, method, _variant(signature, body) if signature
                                              else None, None, Gio.DBusCallFlags.NONE, max(1, int(timeout * 1000)),
                                              None)
        except GLib.Error as error:
            timed_out = error.matches(Gio.io_error_quark(), Gio.IOErrorEnum.TIMED_OUT)
            raise CallFailed(bool(timed_out), error.message) from None
        return tuple(reply.unpack()) if reply is not None else ()

    def close(self) -> None:
        if not self.connection.is_closed():
            try:
                self.connection.close_sync(None)
            except GLib.Error:
                pass


class ObservingWire(SyncWire):
    """A connection whose signals and closing are dispatched in the GLib
    main context that was the thread-default where it was made."""

    def __init__(self, connection: Any) -> None:
        super().__init__("", 0.0, connection)
        self.on_signal: Optional[SignalHandler] = None
        self.on_closed: Optional[Callable[[str], None]] = None
        self._subscription = connection.signal_subscribe(None, None, None, OBJECT_PATH, None,
                                                         Gio.DBusSignalFlags.NO_MATCH_RULE, self._signal)
        self._closed_handler = connection.connect("closed", self._closed)

    def _signal(self, _connection: Any, _sender: Optional[str], _path: str, interface: str, member: str,
                parameters: Any) -> None:
        handler = self.on_signal
        if handler is None or parameters is None:
            return
        signature = parameters.get_type_string()
        handler(interface, member, signature[1:-1], tuple(parameters.unpack()))

    def _closed(self, _connection: Any, _remote: bool, error: Optional[Any]) -> None:
        self._detach()
        handler = self.on_closed
        if handler is not None:
            handler(error.message if error is not None else "the connection was closed")

    def _detach(self) -> None:
        if self._subscription is not None:
            self.connection.signal_unsubscribe(self._subscription)
            self._subscription = None
        if self._closed_handler is not None:
            self.connection.disconnect(self._closed_handler)
            self._closed_handler = None

    def add_matches(self, rules: List[str], done: Callable[[Optional[str]], None], blocking: bool) -> None:
        """``AddMatch`` each rule; ``done(None)`` once the bus answered all
        (before returning when ``blocking``), ``done(reason)`` on a refusal."""
        if blocking:
            for rule in rules:
                try:
                    self.call("AddMatch", "s", (rule,), 5.0)
                except CallFailed as error:
                    done(str(error))
                    return
            done(None)
            return
        pending = [len(rules), False]
        if not rules:
            done(None)
            return

        def answered(connection: Any, result: Any) -> None:
            try:
                connection.call_finish(result)
            except GLib.Error as error:
                if not pending[1]:
                    pending[1] = True
                    done(error.message)
                return
            pending[0] -= 1
            if pending[0] == 0 and not pending[1]:
                done(None)

        for rule in rules:
            self.connection.call(_NAME, _PATH, _NAME, "AddMatch", GLib.Variant("(s)", (rule,)), None,
                                 Gio.DBusCallFlags.NONE, -1, None, answered)

    def remove_match(self, rule: str) -> None:
        """``RemoveMatch`` without waiting."""
        if not self.connection.is_closed():
            self.connection.call(_NAME, _PATH, _NAME, "RemoveMatch", GLib.Variant("(s)", (rule,)), None,
                                 Gio.DBusCallFlags.NONE, -1, None, None, None)

    def close(self) -> None:
        self.on_closed = None
        self._detach()
        super().close()


def connect_blocking(address: str, timeout: float) -> ObservingWire:
    """An observing connection, connected before this returns."""
    return ObservingWire(_connect(address, timeout))


def connect_async(context: Any, address: str, timeout: float,
                  done: Callable[[Optional[ObservingWire], Optional[str]], None]) -> Callable[[], None]:
    """Connect without blocking ``context``; ``done(wire, None)`` or
    ``done(None, reason)`` there.  Returns a function that abandons it."""
    cancellable = Gio.Cancellable()
    timer = GLib.timeout_source_new(max(1, int(timeout * 1000)))
    timer.set_callback(lambda *_: (cancellable.cancel(), False)[1])
    timer.attach(context)

    def finished(_source: Any, result: Any) -> None:
        timer.destroy()
        try:
            connection = Gio.DBusConnection.new_for_address_finish(result)
        except GLib.Error as error:
            done(None, error.message)
            return
        connection.set_exit_on_close(False)
        if cancellable.is_cancelled():
            connection.close(None, None, None)
            return
        # Its signals are dispatched where it subscribes: in ``context``.
        push = context != GLib.MainContext.ref_thread_default()
        if push:
            context.push_thread_default()
        try:
            wire = ObservingWire(connection)
        finally:
            if push:
                context.pop_thread_default()
        done(wire, None)

    pushed = context != GLib.MainContext.ref_thread_default()
    if pushed:
        context.push_thread_default()
    try:
        Gio.DBusConnection.new_for_address(address, _FLAGS, None, cancellable, finished)
    finally:
        if pushed:
            context.pop_thread_default()
    def abandon() -> None:
        timer.destroy()
        cancellable.cancel()

    return abandon

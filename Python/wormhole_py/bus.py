"""The package's own D-Bus connection (contract sections 1, 7 and 8).

:class:`Bus` wraps a private :class:`Gio.DBusConnection` made with
``Gio.DBusConnection.new_for_address`` (flags
``AUTHENTICATION_CLIENT | MESSAGE_BUS_CONNECTION``, ``exit_on_close`` off);
the package never uses ``Gio.bus_get_sync``'s shared singleton, so closing or
losing it never ends the program and never disturbs the application's own
session-bus connection.

Sending: :meth:`Bus.post` emits ``Posted`` on the name's bucket interface
with both arguments; :meth:`Bus.confirm` makes one call the bus answers
(``GetNameOwner`` of the connection's own unique name), which proves every
earlier signal left this process *and* was taken by the daemon (or proxy).
Every :class:`Bus` with unconfirmed signals is confirmed by an ``atexit``
drain (bounded), so a post accepted by the library is on the bus before a
normally-exiting interpreter is gone.

Inside a sandbox (an app ID, section 8) the connection owns
``<APPID>.Wormhole.c<unique>`` before its first signal.
"""

from __future__ import annotations

import atexit
import configparser
import os
import re
import sys
import threading
import weakref
from typing import Any, Callable, Optional

import gi

gi.require_version("GLib", "2.0")
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

from ._contract import (  # noqa: E402
    CONNECT_TIMEOUT_SECONDS, MESSAGE, OBJECT_PATH, POSTED, TRANSIENT_LIMIT, bucket_interface, shown,
    validate_name, validate_state,
)
from .errors import BusError, InvalidInputError, NotSentError, TooLargeError  # noqa: E402

__all__ = ["Bus", "resolve_address", "app_id", "set_app_id", "socket_path", "drain_all"]

DBUS_NAME = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"
DBUS_INTERFACE = "org.freedesktop.DBus"
#: How long the atexit drain waits for each connection's confirmation.
EXIT_DRAIN_SECONDS = 5.0
CONFIRM_TIMEOUT_SECONDS = 5.0

_program_app_id: Optional[str] = None
_APP_ID_RE = re.compile(r"^[A-Za-z_-][A-Za-z0-9_-]*(\.[A-Za-z_-][A-Za-z0-9_-]*)+$")


def set_app_id(value: Optional[str]) -> None:
    """Set the app ID this program uses in a sandbox (contract section 8: used
    when ``/.flatpak-info`` is absent; wins over ``WORMHOLE_APP_ID`` and
    ``FLATPAK_ID``).  ``None`` clears it."""
    global _program_app_id
    if value is not None:
        _validate_app_id(value, "set_app_id")
    _program_app_id = value


def _validate_app_id(value: str, source: str) -> str:
    if len(value.encode("utf-8")) > 255 or not _APP_ID_RE.match(value):
        raise InvalidInputError(
            "invalidAppID", "app ID %s (from %s) is not a D-Bus well-known name of two or more elements of "
            "A-Z a-z 0-9 _ -, none starting with a digit, at most 255 bytes" % (shown(value), source), value)
    return value


def app_id(environ: Optional[dict] = None, flatpak_info: str = "/.flatpak-info") -> Optional[str]:
    """The app ID by contract section 8's order: ``/.flatpak-info``'s
    ``[Application] name`` (nothing overrides it), else :func:`set_app_id`'s,
    else ``WORMHOLE_APP_ID``, else ``FLATPAK_ID``; ``None`` outside a sandbox."""
    env = os.environ if environ is None else environ
    if os.path.exists(flatpak_info):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            with open(flatpak_info, encoding="utf-8") as handle:
                parser.read_file(handle)
            name = parser.get("Application", "name", fallback=None)
        except (OSError, configparser.Error, UnicodeDecodeError):
            name = None
        if name:
            return _validate_app_id(name.strip(), flatpak_info)
    if _program_app_id:
        return _program_app_id
    for variable in ("WORMHOLE_APP_ID", "FLATPAK_ID"):
        value = env.get(variable)
        if value:
            return _validate_app_id(value, variable)
    return None


def resolve_address(address: Optional[str] = None) -> str:
    """The bus address to use: ``address``, else ``DBUS_SESSION_BUS_ADDRESS``.

    :raises BusError: (``noSessionBus``) when neither is set.
    :raises InvalidInputError: (``invalidAddress``) when it is not a D-Bus address.
    """
    value = address if address else os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    if not value:
        raise BusError("noSessionBus", "no bus address: DBUS_SESSION_BUS_ADDRESS is not set and no "
                       "--bus-address was given")
    if not Gio.dbus_is_supported_address(value):
        raise InvalidInputError("invalidAddress", "bus address %s is not a D-Bus address" % shown(value), value)
    return value


def socket_path(address: str) -> Optional[str]:
    """The filesystem socket path of a ``unix:path=...`` address (the first
    entry that has one), or ``None`` (abstract sockets, tcp, ...)."""
    for entry in address.split(";"):
        transport, _, params = entry.partition(":")
        if transport != "unix":
            continue
        for pair in params.split(","):
            key, _, value = pair.partition("=")
            if key == "path" and value:
                return GLib.Uri.unescape_string(value, None) or value
    return None


def run_until(context: GLib.MainContext, done: Callable[[], bool], timeout: Optional[float]) -> bool:
    """Iterate ``context`` (which the caller owns) until ``done()`` or the
    timeout passes; returns ``done()``.  The wait is event-driven: a GLib
    timeout source ends it, never a polling loop."""
    expired = [False]
    source = None
    if timeout is not None:
        source = GLib.timeout_source_new(max(0, int(timeout * 1000)))

        def on_timeout() -> bool:
            expired[0] = True
            return False

        source.set_callback(lambda *_: on_timeout())
        source.attach(context)
    try:
        while not done() and not expired[0]:
            context.iteration(True)
    finally:
        if source is not None:
            source.destroy()
    return done()


_live: "weakref.WeakSet[Bus]" = weakref.WeakSet()
_live_lock = threading.Lock()


class Bus:
    """One private connection to a message bus.

    Create with :meth:`Bus.connect`.  Thread-safe for sending (GDBus
    serialises writes); signal subscriptions deliver in the thread-default
    main context of the subscribing thread.
    """

    def __init__(self, connection: Gio.DBusConnection, address: str) -> None:
        self.connection: Gio.DBusConnection = connection
        self.address: str = address
        self._lock = threading.Lock()
        self._unconfirmed = False
        self._claimed: Optional[str] = None
        self._last_states: dict = {}
        connection.set_exit_on_close(False)
        with _live_lock:
            _live.add(self)

    @classmethod
    def connect(cls, address: Optional[str] = None, timeout: Optional[float] = CONNECT_TIMEOUT_SECONDS) -> "Bus":
        """Connect to ``address`` (default ``DBUS_SESSION_BUS_ADDRESS``),
        giving up after ``timeout`` seconds (a bus that accepts and never
        answers cannot hold the caller).

        :raises BusError: ``connectionFailed`` or ``timedOut``.
        """
        resolved = resolve_address(address)
        connection = open_connection(resolved, timeout)
        return cls(connection, resolved)

    @property
    def unique_name(self) -> str:
        """The connection's unique bus name (``:1.42``)."""
        return self.connection.get_unique_name() or ""

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (the bus went away or :meth:`close`)."""
        return self.connection.is_closed()

    # -- sending -----------------------------------------------------------

    def claim_app_name(self, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> Optional[str]:
        """Own ``<APPID>.Wormhole.c<unique>`` when the process has an app ID
        (contract section 8); once per connection.  Returns the name owned,
        or ``None`` outside a sandbox.

        :raises NotSentError: (``nameRefused``) the bus or proxy refused it.
        """
        identity = app_id()
        if identity is None:
            return None
        with self._lock:
            if self._claimed:
                return self._claimed
        name = "%s.Wormhole.c%s" % (identity, self.unique_name.lstrip(":").replace(".", "_"))
        if len(name.encode("utf-8")) > 255:
            raise NotSentError("nameRefused", "the sender name %s is longer than 255 bytes; the notification is "
                               "not sent" % shown(name), name)
        try:
            reply = self.connection.call_sync(
                DBUS_NAME, DBUS_PATH, DBUS_INTERFACE, "RequestName", GLib.Variant("(su)", (name, 4)),
                GLib.VariantType.new("(u)"), Gio.DBusCallFlags.NONE, int(timeout * 1000), None)
        except GLib.Error as error:
            raise NotSentError("nameRefused", "the bus refused the sender name %s (%s); the notification is not "
                               "sent" % (shown(name), error.message), name) from None
        code = reply.unpack()[0]
        if code not in (1, 4):
            raise NotSentError("nameRefused", "the bus refused the sender name %s (RequestName answered %d)"
                               % (shown(name), code), name)
        with self._lock:
            self._claimed = name
        return name

    def _emit(self, interface: str, member: str, body: GLib.Variant) -> None:
        if self.connection.is_closed():
            raise NotSentError("disconnected", "the bus connection is closed")
        self.claim_app_name()
        try:
            self.connection.emit_signal(None, OBJECT_PATH, interface, member, body)
        except GLib.Error as error:
            raise NotSentError("disconnected", "the signal was not sent: %s" % error.message) from None
        with self._lock:
            self._unconfirmed = True

    def post(self, name: str, state: Optional[int] = None) -> int:
        """Emit ``Posted(name, state)`` on the name's bucket interface.

        Without ``state`` the name's last state posted through this
        connection is carried (0 if none).  Returns the state sent.  The
        signal is queued, not yet confirmed: call :meth:`confirm` (or rely on
        the exit drain).

        :raises InvalidInputError: bad name or state.
        :raises NotSentError: the connection is closed.
        """
        validate_name(name)
        value = validate_state(state)
        with self._lock:
            if value is None:
                value = self._last_states.get(name, 0)
            else:
                self._last_states[name] = value
        self._emit(bucket_interface(name), POSTED, GLib.Variant("(st)", (name, value)))
        return value

    def send_message(self, name: str, text: str) -> None:
        """Emit the transient ``Message(name, text)`` (section 7); ``text`` is
        compact JSON of at most 64 KiB."""
        validate_name(name)
        size = len(text.encode("utf-8"))
        if size > TRANSIENT_LIMIT:
            raise TooLargeError("transientTooLarge", "transient message for %s is %d bytes, over the limit of %d"
                                % (shown(name), size, TRANSIENT_LIMIT), name)
        self._emit(bucket_interface(name), MESSAGE, GLib.Variant("(ss)", (name, text)))

    def confirm(self, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        """Make one call the bus answers (``GetNameOwner`` of the own unique
        name): every signal sent before it has then been taken by the bus.

        :raises NotSentError: (``timedOut`` / ``disconnected``) not confirmed
            within ``timeout``.
        """
        if self.connection.is_closed():
            raise NotSentError("disconnected", "the bus connection is closed; not confirmed")
        try:
            self.connection.call_sync(
                DBUS_NAME, DBUS_PATH, DBUS_INTERFACE, "GetNameOwner", GLib.Variant("(s)", (self.unique_name,)),
                GLib.VariantType.new("(s)"), Gio.DBusCallFlags.NONE, max(1, int(timeout * 1000)), None)
        except GLib.Error as error:
            code = "timedOut" if error.matches(Gio.io_error_quark(), Gio.IOErrorEnum.TIMED_OUT) else "disconnected"
            raise NotSentError(code, "the bus did not confirm the signal: %s" % error.message) from None
        with self._lock:
            self._unconfirmed = False

    def drain(self, timeout: float = EXIT_DRAIN_SECONDS) -> bool:
        """Confirm pending signals if any; False (and a line on standard
        error) when the bus did not take them in time."""
        with self._lock:
            pending = self._unconfirmed
        if not pending or self.connection.is_closed():
            return not pending
        try:
            self.confirm(timeout)
            return True
        except NotSentError as error:
            sys.stderr.write("wormhole_py: signals may be lost at exit: %s\n" % error)
            return False

    def close(self) -> None:
        """Drain, then close the connection (idempotent)."""
        self.drain()
        if not self.connection.is_closed():
            try:
                self.connection.close_sync(None)
            except GLib.Error:
                pass

    # -- calls ---------------------------------------------------------------

    def add_match(self, rule: str, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        """``AddMatch(rule)`` and wait for the bus's answer (the rule is active
        when this returns)."""
        self.connection.call_sync(DBUS_NAME, DBUS_PATH, DBUS_INTERFACE, "AddMatch", GLib.Variant("(s)", (rule,)),
                                  None, Gio.DBusCallFlags.NONE, int(timeout * 1000), None)

    def __del__(self) -> None:
        # The last reference going away never drops a signal a send accepted (contract v1.2).
        try:
            if self._unconfirmed and not self.connection.is_closed():
                self.drain()
        except Exception:
            pass

    def __enter__(self) -> "Bus":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_connection(address: str, timeout: Optional[float]) -> Gio.DBusConnection:
    """Open a new private message-bus connection within ``timeout`` seconds.

    The connection is made in the calling thread's thread-default main
    context (its ``closed`` signal is dispatched there).  The bound is a
    timer thread that cancels the blocking connect, never a polling loop.
    """
    cancellable = Gio.Cancellable()
    timer = threading.Timer(timeout, cancellable.cancel) if timeout is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    try:
        connection = Gio.DBusConnection.new_for_address_sync(address, flags, None, cancellable)
    except GLib.Error as error:
        if cancellable.is_cancelled():
            raise BusError("timedOut", "the bus at %s did not answer within %g s" % (shown(address), timeout),
                           address) from None
        raise BusError("connectionFailed", "cannot connect to the bus at %s: %s"
                       % (shown(address), error.message), address) from None
    finally:
        if timer is not None:
            timer.cancel()
    connection.set_exit_on_close(False)
    return connection


def drain_all(timeout: float = EXIT_DRAIN_SECONDS) -> None:
    """Confirm the pending signals of every live :class:`Bus` (the atexit drain)."""
    with _live_lock:
        buses = list(_live)
    for bus in buses:
        try:
            bus.drain(timeout)
        except Exception:  # never let the exit drain raise
            pass


atexit.register(drain_all)

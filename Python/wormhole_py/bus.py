# SPDX-License-Identifier: Apache-2.0
"""The package's own blocking D-Bus connection (contract sections 1, 7 and 8).

:class:`Bus` is one private connection through the transport
:func:`wormhole_py._wire.transport` picks (Gio when PyGObject imports, else
jeepney): never a shared singleton, so closing or losing it never ends the
program and never disturbs the application's own session-bus connection.

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
import logging
import os
import re
import threading
import weakref
from typing import Any, Dict, Mapping, Optional, Tuple
from urllib.parse import unquote

from ._contract import (
    CONNECT_TIMEOUT_SECONDS,
    MESSAGE,
    POSTED,
    TRANSIENT_LIMIT,
    bucket_interface,
    shown,
    validate_name,
    validate_state,
)
from ._wire import CallFailed, transport
from .errors import BusError, InvalidInputError, NotSentError, TooLargeError

__all__ = ["Bus", "app_id", "drain_all", "resolve_address", "set_app_id", "socket_path"]

log = logging.getLogger("wormhole_py")

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


def app_id(environ: Optional[Mapping[str, str]] = None, flatpak_info: str = "/.flatpak-info") -> Optional[str]:
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


_ADDRESS_ENTRY = re.compile(r"^(unix|tcp|nonce-tcp|unixexec|launchd|autolaunch|systemd|vsock):"
                            r"([A-Za-z0-9_-]+=[^,;]*(,[A-Za-z0-9_-]+=[^,;]*)*)?$")


def _is_address(value: str) -> bool:
    """Whether ``value`` is a D-Bus address (the specification's grammar:
    ``transport:key=value,...`` entries separated by ``;``)."""
    return all(_ADDRESS_ENTRY.match(entry) for entry in value.split(";") if entry) and bool(value.strip(";"))


def resolve_address(address: Optional[str] = None) -> str:
    """The bus address to use: ``address``, else ``DBUS_SESSION_BUS_ADDRESS``.

    :raises BusError: (``noSessionBus``) when neither is set.
    :raises InvalidInputError: (``invalidAddress``) when it is not a D-Bus address.
    """
    value = address if address else os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    if not value:
        raise BusError("noSessionBus", "no bus address: DBUS_SESSION_BUS_ADDRESS is not set and no "
                       "--bus-address was given")
    if not _is_address(value):
        raise InvalidInputError("invalidAddress", "bus address %s is not a D-Bus address" % shown(value), value)
    return value


def socket_path(address: str) -> Optional[str]:
    """The filesystem socket path of a ``unix:path=...`` address (the first
    entry that has one), or ``None`` (abstract sockets, tcp, ...)."""
    for entry in address.split(";"):
        transport_name, _, params = entry.partition(":")
        if transport_name != "unix":
            continue
        for pair in params.split(","):
            key, _, value = pair.partition("=")
            if key == "path" and value:
                return unquote(value)
    return None


def connect_wire(address: str, timeout: float) -> Any:
    """A blocking connection through :func:`~wormhole_py._wire.transport`'s library."""
    if transport() == "gio":
        from ._wire_gio import SyncWire
        return SyncWire(address, timeout)
    from ._wire_jeepney import SyncWire as JeepneyWire
    return JeepneyWire(address, timeout)


_live: "weakref.WeakSet[Bus]" = weakref.WeakSet()
_live_lock = threading.Lock()


class Bus:
    """One private, blocking connection to a message bus.

    Create with :meth:`Bus.connect`.  Thread-safe for sending.
    """

    def __init__(self, wire: Any, address: str) -> None:
        self.wire: Any = wire
        self.address: str = address
        self._lock = threading.Lock()
        self._unconfirmed = False
        self._claimed: Optional[str] = None
        self._last_states: Dict[str, int] = {}
        with _live_lock:
            _live.add(self)

    @classmethod
    def connect(cls, address: Optional[str] = None, timeout: Optional[float] = CONNECT_TIMEOUT_SECONDS) -> "Bus":
        """Connect to ``address`` (default ``DBUS_SESSION_BUS_ADDRESS``),
        giving up after ``timeout`` seconds (a bus that accepts and never
        answers cannot hold the caller).

        :raises BusError: ``connectionFailed``, ``timedOut``, or
            ``transportMissing`` (neither PyGObject nor jeepney installed).
        """
        resolved = resolve_address(address)
        return cls(connect_wire(resolved, CONNECT_TIMEOUT_SECONDS if timeout is None else timeout), resolved)

    @property
    def connection(self) -> Any:
        """The ``Gio.DBusConnection`` (the ``gio`` transport only)."""
        return self.wire.connection

    @property
    def transport(self) -> str:
        """``"gio"`` or ``"jeepney"``."""
        return "jeepney" if type(self.wire).__module__.endswith("jeepney") else "gio"

    @property
    def unique_name(self) -> str:
        """The connection's unique bus name (``:1.42``)."""
        return str(self.wire.unique_name)

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (the bus went away or :meth:`close`)."""
        return bool(self.wire.closed)

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
            reply = self.wire.call("RequestName", "su", (name, 4), timeout)
        except CallFailed as error:
            raise NotSentError("nameRefused", "the bus refused the sender name %s (%s); the notification is not "
                               "sent" % (shown(name), error), name) from None
        code = reply[0]
        if code not in (1, 4):
            raise NotSentError("nameRefused", "the bus refused the sender name %s (RequestName answered %d)"
                               % (shown(name), code), name)
        with self._lock:
            self._claimed = name
        return name

    def emit(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        """Emit any signal on the contract's object path (tests send
        malformed bodies with it; use :meth:`post` and :meth:`send_message`).

        :raises NotSentError: (``disconnected``) the connection is closed.
        """
        if self.wire.closed:
            raise NotSentError("disconnected", "the bus connection is closed")
        self.claim_app_name()
        try:
            self.wire.emit(interface, member, signature, body)
        except CallFailed as error:
            raise NotSentError("disconnected", "the signal was not sent: %s" % error) from None
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
        self.emit(bucket_interface(name), POSTED, "st", (name, value))
        return value

    def send_message(self, name: str, text: str) -> None:
        """Emit the transient ``Message(name, text)`` (section 7); ``text`` is
        compact JSON of at most 64 KiB."""
        validate_name(name)
        size = len(text.encode("utf-8"))
        if size > TRANSIENT_LIMIT:
            raise TooLargeError("transientTooLarge", "transient message for %s is %d bytes, over the limit of %d"
                                % (shown(name), size, TRANSIENT_LIMIT), name)
        self.emit(bucket_interface(name), MESSAGE, "ss", (name, text))

    def confirm(self, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        """Make one call the bus answers (``GetNameOwner`` of the own unique
        name): every signal sent before it has then been taken by the bus.

        :raises NotSentError: (``timedOut`` / ``disconnected``) not confirmed
            within ``timeout``.
        """
        if self.wire.closed:
            raise NotSentError("disconnected", "the bus connection is closed; not confirmed")
        try:
            self.wire.call("GetNameOwner", "s", (self.unique_name,), timeout)
        except CallFailed as error:
            raise NotSentError("timedOut" if error.timed_out else "disconnected",
                               "the bus did not confirm the signal: %s" % error) from None
        with self._lock:
            self._unconfirmed = False

    def drain(self, timeout: float = EXIT_DRAIN_SECONDS) -> bool:
        """Confirm pending signals if any; False (and a warning logged on the
        ``wormhole_py`` logger) when the bus did not take them in time."""
        with self._lock:
            pending = self._unconfirmed
        if not pending or self.wire.closed:
            return not pending
        try:
            self.confirm(timeout)
            return True
        except NotSentError as error:
            log.warning("wormhole_py: signals may be lost at exit: %s", error)
            return False

    def close(self) -> None:
        """Drain, then close the connection (idempotent)."""
        self.drain()
        self.wire.close()

    def __del__(self) -> None:
        # The last reference going away never drops a signal a send accepted (contract v1.2).
        try:
            if self._unconfirmed and not self.wire.closed:
                self.drain()
        except Exception:
            pass

    def __enter__(self) -> "Bus":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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

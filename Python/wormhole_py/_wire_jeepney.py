# SPDX-License-Identifier: Apache-2.0
"""Bus connections through jeepney, the pure-Python D-Bus library (internal).

:class:`SyncWire` is a blocking connection for sending (every wait bounded);
:class:`AsyncWire` an asyncio connection for observing and for awaitable
sends: it reads in one task of the caller's loop and dispatches signals and
replies itself (no queue between the socket and the subscriber).  Only
``unix:`` addresses exist for jeepney; another is refused with
``connectionFailed``.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from jeepney import DBusAddress, HeaderFields, Message, MessageType, Parser, new_method_call, new_signal
from jeepney.bus import get_bus
from jeepney.io.blocking import prep_socket

from ._contract import OBJECT_PATH, shown
from ._wire import CallFailed, SignalHandler
from .errors import BusError

__all__ = ["AsyncWire", "SyncWire", "connect_async"]

_BUS = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus", interface="org.freedesktop.DBus")


def _target(address: str) -> str:
    try:
        return str(get_bus(address))
    except Exception as error:  # jeepney raises RuntimeError/ValueError/KeyError for what it cannot use
        raise BusError("connectionFailed", "cannot connect to the bus at %s: jeepney cannot use this address (%s)"
                       % (shown(address), error), address) from None


def _body(message: Message) -> Tuple[str, Tuple[Any, ...]]:
    signature = message.header.fields.get(HeaderFields.signature, "")
    return str(signature), tuple(message.body)


def _error_text(message: Message) -> str:
    name = message.header.fields.get(HeaderFields.error_name, "error")
    detail = message.body[0] if message.body and isinstance(message.body[0], str) else ""
    return "%s: %s" % (name, detail) if detail else str(name)


class SyncWire:
    """A blocking connection (sending, and calls the bus answers)."""

    def __init__(self, address: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        try:
            self.sock = prep_socket(_target(address), False, timeout=timeout)
        except (TimeoutError, socket.timeout):
            raise BusError("timedOut", "the bus at %s did not answer within %g s" % (shown(address), timeout),
                           address) from None
        except OSError as error:
            raise BusError("connectionFailed", "cannot connect to the bus at %s: %s"
                           % (shown(address), error.strerror or error), address) from None
        self.parser = Parser()
        self.serials = itertools.count(1)
        self.lock = threading.Lock()
        self.closed = False
        self.unique_name = ""
        try:
            reply = self.call("Hello", "", (), max(0.001, deadline - time.monotonic()))
        except CallFailed as error:
            self.close()
            raise BusError("timedOut" if error.timed_out else "connectionFailed", "the bus at %s did not accept "
                           "the connection: %s" % (shown(address), error), address) from None
        self.unique_name = str(reply[0])

    def emit(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        message = new_signal(DBusAddress(OBJECT_PATH, interface=interface), member, signature, body)
        with self.lock:
            self._send(message, next(self.serials))

    def _send(self, message: Message, serial: int) -> None:
        if self.closed:
            raise CallFailed(False, "the connection is closed")
        try:
            self.sock.sendall(message.serialise(serial=serial))
        except OSError as error:
            self.closed = True
            raise CallFailed(False, error.strerror or str(error)) from None

    def call(self, method: str, signature: str, body: Tuple[Any, ...], timeout: float) -> Tuple[Any, ...]:
        """Call ``org.freedesktop.DBus.<method>`` and wait (bounded) for its answer."""
        message = new_method_call(_BUS, method, signature or None, body)
        deadline = time.monotonic() + timeout
        with self.lock:
            serial = next(self.serials)
            self._send(message, serial)
            while True:
                reply = self.parser.get_next_message()
                if reply is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise CallFailed(True, "no answer within %g s" % timeout)
                    self.sock.settimeout(left)
                    try:
                        data = self.sock.recv(65536)
                    except socket.timeout:
                        raise CallFailed(True, "no answer within %g s" % timeout) from None
                    except OSError as error:
                        self.closed = True
                        raise CallFailed(False, error.strerror or str(error)) from None
                    if not data:
                        self.closed = True
                        raise CallFailed(False, "the bus closed the connection")
                    self.parser.add_data(data)
                    continue
                if reply.header.fields.get(HeaderFields.reply_serial) != serial:
                    continue
                if reply.header.message_type == MessageType.error:
                    raise CallFailed(False, _error_text(reply))
                return tuple(reply.body)

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


class AsyncWire:
    """An asyncio connection: signals to one handler, replies to futures."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, unique_name: str,
                 parser: Parser, serials: "itertools.count[int]") -> None:
        self.reader = reader
        self.writer = writer
        self.unique_name = unique_name
        self.parser = parser
        self.serials = serials
        self.closed = False
        self.replies: Dict[int, "asyncio.Future[Message]"] = {}
        self.on_signal: Optional[SignalHandler] = None
        self.on_closed: Optional[Callable[[str], None]] = None
        self.task: Optional["asyncio.Task[None]"] = None
        self.loop = asyncio.get_running_loop()

    def start(self) -> None:
        """Begin reading (in the running loop)."""
        self.task = self.loop.create_task(self._receive())

    async def _receive(self) -> None:
        reason = "the bus closed the connection"
        try:
            while True:
                message = self.parser.get_next_message()
                if message is None:
                    data = await self.reader.read(65536)
                    if not data:
                        break
                    self.parser.add_data(data)
                    continue
                kind = message.header.message_type
                if kind == MessageType.signal:
                    handler = self.on_signal
                    if handler is not None:
                        signature, body = _body(message)
                        handler(str(message.header.fields.get(HeaderFields.interface, "")),
                                str(message.header.fields.get(HeaderFields.member, "")), signature, body)
                elif kind in (MessageType.method_return, MessageType.error):
                    future = self.replies.pop(message.header.fields.get(HeaderFields.reply_serial, -1), None)
                    if future is not None and not future.done():
                        future.set_result(message)
        except asyncio.CancelledError:
            # Cancelled (closed by us, or the loop ending): not a lost bus, nobody reconnects.
            self.on_closed = None
            reason = "the connection was closed"
        except (OSError, EOFError) as error:
            reason = str(error) or reason
        self._closed(reason)

    def _closed(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        for future in self.replies.values():
            if not future.done():
                future.set_exception(CallFailed(False, reason))
        self.replies.clear()
        try:
            self.writer.close()
        except (OSError, RuntimeError):
            pass
        if self.on_closed is not None:
            self.on_closed(reason)

    def emit(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        """Queue a signal (written by the loop's transport in order)."""
        if self.closed:
            raise CallFailed(False, "the connection is closed")
        message = new_signal(DBusAddress(OBJECT_PATH, interface=interface), member, signature, body)
        self.writer.write(message.serialise(serial=next(self.serials)))

    def call(self, method: str, signature: str, body: Tuple[Any, ...]) -> "asyncio.Future[Message]":
        """Send a call to the bus; the future has its reply message."""
        future: "asyncio.Future[Message]" = self.loop.create_future()
        if self.closed:
            future.set_exception(CallFailed(False, "the connection is closed"))
            return future
        serial = next(self.serials)
        self.replies[serial] = future
        self.writer.write(new_method_call(_BUS, method, signature or None, body).serialise(serial=serial))
        return future

    def call_unanswered(self, method: str, signature: str, body: Tuple[Any, ...]) -> None:
        """Send a call to the bus whose answer nobody waits for."""
        if not self.closed:
            message = new_method_call(_BUS, method, signature or None, body)
            self.writer.write(message.serialise(serial=next(self.serials)))

    async def call_checked(self, method: str, signature: str, body: Tuple[Any, ...],
                           timeout: float) -> Tuple[Any, ...]:
        """:meth:`call` and wait (bounded); an error reply raises :class:`CallFailed`."""
        try:
            reply = await asyncio.wait_for(self.call(method, signature, body), timeout)
        except asyncio.TimeoutError:
            raise CallFailed(True, "no answer within %g s" % timeout) from None
        if reply.header.message_type == MessageType.error:
            raise CallFailed(False, _error_text(reply))
        return tuple(reply.body)

    def close(self) -> None:
        """Close (the reading task ends; ``on_closed`` is not called)."""
        self.on_closed = None
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self._closed("the connection was closed")


async def connect_async(address: str, timeout: float) -> AsyncWire:
    """Connect, authenticate and say Hello within ``timeout`` seconds.

    :raises BusError: ``connectionFailed`` or ``timedOut``.
    """
    target = _target(address)
    try:
        return await asyncio.wait_for(_open(target), timeout)
    except asyncio.TimeoutError:
        raise BusError("timedOut", "the bus at %s did not answer within %g s" % (shown(address), timeout),
                       address) from None
    except (OSError, EOFError, CallFailed) as error:
        raise BusError("connectionFailed", "cannot connect to the bus at %s: %s" % (shown(address), error),
                       address) from None


async def _open(target: str) -> AsyncWire:
    from jeepney.auth import BEGIN, Authenticator
    reader, writer = await asyncio.open_unix_connection(target, limit=1 << 20)
    wire: Optional[AsyncWire] = None
    try:
        authenticator = Authenticator()  # its first request starts with the NUL byte
        for request in authenticator:
            writer.write(request)
            await writer.drain()
            data = await reader.read(1024)
            if not data:
                raise EOFError("the bus closed the connection while authenticating")
            authenticator.feed(data)
        writer.write(BEGIN)
        parser = Parser()
        serials = itertools.count(1)
        wire = AsyncWire(reader, writer, "", parser, serials)
        wire.start()
        reply = await wire.call_checked("Hello", "", (), 3600.0)
        wire.unique_name = str(reply[0])
        return wire
    except BaseException:
        if wire is not None:
            wire.close()
        writer.close()
        raise

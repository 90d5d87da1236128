# SPDX-License-Identifier: Apache-2.0
"""Wormhole messages: last-value mailboxes and transient messages
(contract sections 3 and 7).

::

    hole = MessageCenter("group.com.example.lines")
    hole.send("clip", {"text": "hello"})          # stored, posted, confirmed
    hole.read("clip")                              # {'text': 'hello'}
    listener = hole.listen(["clip"], lambda d: print(d.identifier, d.message))
    GLib.MainLoop().run()

Documents are validated and stored byte for byte (numbers stay as written);
:meth:`MessageCenter.send` serialises a Python value, :meth:`MessageCenter.send_json`
stores a JSON text exactly.  Listener callbacks run in the main context that
was the thread-default where the listener was made.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from . import _json
from ._closing import Closing
from ._contract import (
    CONNECT_TIMEOUT_SECONDS,
    DEFAULT_DIRECTORY,
    DEFAULT_MAX_MESSAGE_BYTES,
    MESSAGE,
    OBJECT_PATH,
    PLAIN_INTERFACE,
    POSTED,
    TRANSIENT_LIMIT,
    UNSIGNALLED_GRACE_SECONDS,
    bucket_interface,
    exact_rule,
    mailbox_name,
    quote_rule_value,
    shown,
    validate_directory,
    validate_group,
    validate_identifier,
    write_state,
)
from ._deprecated import container_root_keyword, renamed
from ._reactor import AsyncioReactor, GLibReactor
from ._subscription import Failure, Feed, Subscription
from ._wire import require, transport
from .bus import CONFIRM_TIMEOUT_SECONDS, Bus
from .container import atomic_write, ensure_directory, read_file, remove_stale_temps
from .container import container_root as default_container_root
from .errors import (
    BusError,
    MessageFormatError,
    NoMessageError,
    NotSentError,
    StorageError,
    TooLargeError,
    WormholeError,
)
from .notify import BlockingQueue, parse_posted

__all__ = ["Delivery", "DeliveryError", "Listener", "MessageCenter", "SendResult", "Wormhole", "deliveries"]

_CLEARED = object()


@dataclass(frozen=True)
class Delivery:
    """One message delivered to a listener.

    :ivar identifier: the mailbox identifier.
    :ivar text: the JSON document exactly as stored or sent (``None`` when
        the mailbox is empty, reason ``cleared``).
    :ivar reason: ``posted``, ``stored``, ``catchUp``, ``transient`` or ``cleared``.
    :ivar sent_at: the sender's write time in ns since 1970 (the ``Posted``
        state), ``None`` for stored, catch-up, directory and hand-typed wakes.
    """

    identifier: str
    text: Optional[str]
    reason: str
    sent_at: Optional[int] = None

    @property
    def message(self) -> Any:
        """The decoded message (``None`` when cleared).  Floats may round:
        use :attr:`text` to keep numbers exact."""
        return None if self.text is None else _json.loads(self.text)

    def line(self) -> str:
        """The ``wormholectl listen`` output line (compact JSON, no newline)."""
        message = "null" if self.text is None else _json.compact(self.text)
        sent = "null" if self.sent_at is None else str(self.sent_at)
        return '{"identifier":%s,"message":%s,"reason":"%s","sentAt":%s}' % (
            _json.dumps(self.identifier), message, self.reason, sent)


#: A delivery that failed (missing, unreadable, undecodable, too large, or a
#: malformed transient message): ``identifier`` and ``error``; listening goes on.
DeliveryError = Failure


@dataclass
class SendResult:
    """What a send or clear did.

    :ivar path: the file written or removed.
    :ivar notified: whether the bus confirmed the notification.
    :ivar error: why it was not, else ``None``.
    """

    path: Optional[Path]
    notified: bool
    error: Optional[WormholeError] = None
    names: List[str] = field(default_factory=list)


class MessageCenter(Closing):
    """A wormhole: an app group plus a directory (default ``wormhole``);
    Swift's ``MessageCenter`` (``Wormhole`` before 2.0, still accepted with a
    :class:`DeprecationWarning`).

    :param group: the group identifier (validated here, before anything else).
    :param directory: the wormhole directory name (not ``Preferences``).
    :param address: the bus address (default ``DBUS_SESSION_BUS_ADDRESS``).
    :param container_root: the container root (default: contract section 2 / 8);
        ``root=`` is its deprecated spelling.
    :param max_bytes: the largest stored message read (default 64 MiB).
    """

    def __init__(self, group: str, directory: str = DEFAULT_DIRECTORY, address: Optional[str] = None,
                 container_root: Optional[Union[str, Path]] = None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 *, root: Optional[Union[str, Path]] = None) -> None:
        container = container_root_keyword(container_root, root, "MessageCenter")
        self.group = validate_group(group)
        self.directory = validate_directory(directory)
        self.address = address
        self.root = Path(container) if container is not None else default_container_root()
        self.max_bytes = max_bytes
        self._sender: Optional[Bus] = None
        self._transient: Optional[Bus] = None
        self._async: Any = None

    @property
    def path(self) -> Path:
        """``<root>/<group>/<directory>``."""
        return self.root / self.group / self.directory

    def name(self, identifier: str) -> str:
        """The notification name of ``identifier``."""
        return mailbox_name(self.group, self.directory, validate_identifier(identifier))

    def _prepare(self) -> Path:
        ensure_directory(self.root / self.group)
        ensure_directory(self.path)
        return self.path

    # -- storing -----------------------------------------------------------------

    def send(self, identifier: str, value: Any, notify: bool = True,
             timeout: float = CONFIRM_TIMEOUT_SECONDS) -> SendResult:
        """Store ``value`` (serialised as compact JSON) and post.  See :meth:`send_json`."""
        validate_identifier(identifier)
        return self.send_json(identifier, _json.dumps(value), notify, timeout)

    def send_json(self, identifier: str, document: Union[str, bytes], notify: bool = True,
                  timeout: float = CONFIRM_TIMEOUT_SECONDS) -> SendResult:
        """Store the JSON text ``document`` exactly as given (validated: UTF-8,
        no BOM, one JSON text), atomically, then post ``<group>/<dir>/<id>``
        with a state that differs per write and wait (bounded) for the bus to
        confirm it.  Sending never fails because the bus is down: the result
        says whether listeners were notified.

        :raises InvalidInputError: a bad identifier.
        :raises MessageFormatError: not a JSON text (nothing stored).
        :raises StorageError, UnsafePathError: the file could not be written.
        """
        validate_identifier(identifier)
        text = _json.validate_document(document, "message for %s" % shown(identifier), "invalidJSON")
        if notify:
            transport()  # a missing D-Bus library is refused before anything is stored
        directory = self._prepare()
        # Connected before the rename, so that the post follows it at once: a listener that sees
        # the rename and no Posted within 0.5 s delivers a catch-up (contract v1.3), and a
        # connection made after the rename (a new process's first send) can take that long on
        # a loaded machine. A bus that cannot be reached still leaves the message stored.
        bus: Optional[Bus] = None
        unreachable: Optional[WormholeError] = None
        if notify:
            try:
                bus = self._sender_bus(timeout)
            except WormholeError as error:
                unreachable = error
        path = atomic_write(directory, identifier + ".json", text.encode("utf-8"), stem=identifier)
        result = SendResult(path, False, names=[self.name(identifier)])
        if unreachable is not None:
            result.error = unreachable
        elif bus is not None:
            self._notify(result, timeout, bus)
        return result

    def _notify(self, result: SendResult, timeout: float, bus: Optional[Bus] = None) -> None:
        try:
            if bus is None:
                bus = self._sender_bus(timeout)
            for name in result.names:
                bus.post(name, write_state())
            bus.confirm(timeout)
            result.notified = True
        except WormholeError as error:
            result.error = error

    def _sender_bus(self, timeout: float) -> Bus:
        if self._sender is None or self._sender.closed:
            self._sender = Bus.connect(self.address, timeout=min(timeout, CONNECT_TIMEOUT_SECONDS))
        return self._sender

    def read_json(self, identifier: str) -> str:
        """The stored document of ``identifier``, exactly as stored.

        :raises NoMessageError: nothing is stored.
        :raises MessageFormatError: the file is not one UTF-8 JSON text.
        :raises TooLargeError: over :attr:`max_bytes`.
        """
        validate_identifier(identifier)
        path = self.path / (identifier + ".json")
        container = self.root / self.group
        for directory in (container, self.path):
            if not ensure_directory(directory, create=False):
                raise NoMessageError("noMessage", "no message is stored for %s in %s: %s does not exist"
                                     % (shown(identifier), self.path, directory), identifier)
        data = read_file(path, self.max_bytes)
        if data is None:
            raise NoMessageError("noMessage", "no message is stored for %s in %s" % (shown(identifier), self.path),
                                 identifier)
        return _json.validate_document(data, "the file stored for %s (%s)" % (shown(identifier), path),
                                      "decodingFailed")

    def read(self, identifier: str) -> Any:
        """The stored message of ``identifier``, decoded (see :meth:`read_json`)."""
        return _json.loads(self.read_json(identifier))

    def identifiers(self) -> List[str]:
        """The identifiers with a stored message, sorted."""
        if not ensure_directory(self.path, create=False):
            return []
        found = []
        for entry in os.scandir(self.path):
            if entry.name.endswith(".json") and not entry.name.startswith("."):
                ident = entry.name[:-5]
                try:
                    validate_identifier(ident)
                except WormholeError:
                    continue
                found.append(ident)
        return sorted(found)

    def clear(self, identifier: str, notify: bool = True, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> SendResult:
        """Remove the stored message of ``identifier`` (if any) and post its
        name.  Also removes killed writers' temporary files."""
        validate_identifier(identifier)
        return self._clear([identifier], notify, timeout)

    def clear_all(self, notify: bool = True, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> SendResult:
        """Remove every stored message and post each removed name."""
        return self._clear(self.identifiers(), notify, timeout)

    def _clear(self, identifiers: List[str], notify: bool, timeout: float) -> SendResult:
        if notify:
            transport()  # a missing D-Bus library is refused before anything is removed
        names = []
        if ensure_directory(self.root / self.group, create=False) and ensure_directory(self.path, create=False):
            for identifier in identifiers:
                path = self.path / (identifier + ".json")
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as error:
                    raise StorageError("io", "cannot remove %s: %s" % (shown(str(path)), error.strerror),
                                       str(path)) from None
                names.append(self.name(identifier))
            remove_stale_temps(self.path)
        result = SendResult(self.path, True, names=names)
        if notify and names:
            result.notified = False
            self._notify(result, timeout)
        return result

    # -- transient -------------------------------------------------------------------

    def send_transient(self, identifier: str, value: Any, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        """Send ``value`` to running listeners only (section 7): never stored."""
        validate_identifier(identifier)
        self.send_transient_json(identifier, _json.dumps(value), timeout)

    def send_transient_json(self, identifier: str, document: Union[str, bytes],
                            timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        """Send a JSON text as a transient ``Message`` (compacted; at most
        64 KiB) on a connection of its own, confirmed by the bus.

        :raises TooLargeError: (``transientTooLarge``) over 64 KiB.
        :raises NotSentError: the bus did not take it.
        """
        text = self._transient_text(identifier, document)
        try:
            if self._transient is None or self._transient.closed:
                self._transient = Bus.connect(self.address, timeout=min(timeout, CONNECT_TIMEOUT_SECONDS))
            self._transient.send_message(self.name(identifier), text)
            self._transient.confirm(timeout)
        except NotSentError:
            raise
        except BusError as error:
            raise NotSentError(error.code, str(error), error.value) from None

    def _transient_text(self, identifier: str, document: Union[str, bytes]) -> str:
        validate_identifier(identifier)
        text = _json.compact(_json.validate_document(document, "message for %s" % shown(identifier),
                                                     "invalidJSON"))
        size = len(text.encode("utf-8"))
        if size > TRANSIENT_LIMIT:
            raise TooLargeError("transientTooLarge", "transient message for %s is %d bytes of compact JSON, over "
                                "the limit of %d" % (shown(identifier), size, TRANSIENT_LIMIT), identifier)
        return text

    # -- listening -----------------------------------------------------------------------

    def listen(self, identifiers: Optional[Iterable[str]], callback: Callable[[Delivery], None],
               on_error: Optional[Callable[[DeliveryError], None]] = None, stored: bool = False,
               catch_unsignalled: bool = True, every_post: bool = False,
               context: Any = None, require_bus: bool = False,
               on_connection_change: Optional[Callable[[bool, Optional[str], int], None]] = None,
               connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> "Listener":
        """Listen for messages of ``identifiers`` (``None``: every mailbox of
        the wormhole), with ``callback`` in a GLib main context (``context``,
        default the thread-default; PyGObject).  Active when this returns.
        See :class:`MailboxFeed` for what is delivered when."""
        require("gio", "MessageCenter.listen (callbacks in a GLib main context; use listen_async on asyncio)")
        feed = MailboxFeed(self, identifiers, stored, catch_unsignalled, every_post)
        self._prepare()
        subscription: Listener = Subscription(GLibReactor(context), feed, callback, on_error, on_connection_change)
        return subscription.start(self.address, require_bus, connect_timeout)

    async def listen_async(self, identifiers: Optional[Iterable[str]] = None,
                           callback: Optional[Callable[[Delivery], None]] = None,
                           on_error: Optional[Callable[[DeliveryError], None]] = None, stored: bool = False,
                           catch_unsignalled: bool = True, every_post: bool = False, require_bus: bool = False,
                           on_connection_change: Optional[Callable[[bool, Optional[str], int], None]] = None,
                           connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> "Listener":
        """:meth:`listen` on the running asyncio loop (jeepney); active when
        the await returns.  Without ``callback`` iterate it: ``async for``
        yields :class:`Delivery` (and :class:`DeliveryError` when there is no
        ``on_error``)."""
        require("jeepney", "MessageCenter.listen_async (asyncio)")
        feed = MailboxFeed(self, identifiers, stored, catch_unsignalled, every_post)
        self._prepare()
        subscription: Listener = Subscription(AsyncioReactor(), feed, callback, on_error, on_connection_change)
        return await subscription.start_async(self.address, require_bus, connect_timeout)

    # -- awaitable sends ---------------------------------------------------------------------

    def _async_sender(self) -> Any:
        from ._async_send import AsyncSender
        if self._async is None:
            self._async = AsyncSender(self.address)
        return self._async

    async def send_async(self, identifier: str, value: Any, notify: bool = True,
                         timeout: float = CONFIRM_TIMEOUT_SECONDS) -> SendResult:
        """:meth:`send` for asyncio: store, then post and await the bus's confirmation."""
        validate_identifier(identifier)
        return await self.send_json_async(identifier, _json.dumps(value), notify, timeout)

    async def send_json_async(self, identifier: str, document: Union[str, bytes], notify: bool = True,
                              timeout: float = CONFIRM_TIMEOUT_SECONDS) -> SendResult:
        """:meth:`send_json` for asyncio (the store is the same; the post is awaited)."""
        if notify:
            require("jeepney", "MessageCenter.send_json_async (asyncio)")
            # Connected before the rename, as send_json is (a late Posted reads as a catch-up).
            try:
                await self._async_sender().ready()
            except WormholeError as error:
                result = self.send_json(identifier, document, notify=False)
                result.error = error
                return result
        result = self.send_json(identifier, document, notify=False)
        if notify:
            await self._notify_async(result, timeout)
        return result

    async def clear_async(self, identifier: str, notify: bool = True,
                          timeout: float = CONFIRM_TIMEOUT_SECONDS) -> SendResult:
        """:meth:`clear` for asyncio."""
        if notify:
            require("jeepney", "MessageCenter.clear_async (asyncio)")
        result = self.clear(identifier, notify=False)
        if notify and result.names:
            result.notified = False
            await self._notify_async(result, timeout)
        return result

    async def _notify_async(self, result: SendResult, timeout: float) -> None:
        try:
            sender = self._async_sender()
            for name in result.names:
                await sender.post(name, write_state(), confirm=False)
            await sender.confirm(timeout)
            result.notified = True
        except WormholeError as error:
            result.error = error

    async def send_transient_async(self, identifier: str, value: Any,
                                   timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        """:meth:`send_transient` for asyncio."""
        validate_identifier(identifier)
        text = self._transient_text(identifier, _json.dumps(value))
        await self._async_sender().send_message(self.name(identifier), text, timeout)

    def close(self) -> None:
        """Drain and close the sending connections."""
        for bus in (self._sender, self._transient):
            if bus is not None:
                bus.close()
        if self._async is not None:
            self._async.close()
            self._async = None


#: What :meth:`MessageCenter.listen` returns: the one subscription handle.
Listener = Subscription[Delivery]


class MailboxFeed(Feed[Delivery]):
    """Delivers the messages of some mailboxes (contract section 3).

    * Woken by ``Posted`` (library, CLI or ``dbus-send``) on the bus; reads
      ``I.json`` and delivers it unless its bytes equal the last delivered
      (``every_post`` delivers every post).  An empty mailbox delivers one
      ``cleared``.  Failures go to ``on_error``; listening goes on.
    * Transient ``Message`` signals are delivered with reason ``transient``.
    * Without a bus (none at start, or lost), it is woken by renames in the
      wormhole directory (inotify); when the bus is back it re-adds its rules
      and delivers a ``catchUp`` for each mailbox that changed.
    * ``catch_unsignalled`` (v1.3): while on the bus it also watches the
      directory; a rename onto ``I.json`` not followed by a ``Posted`` for
      ``I`` within 0.5 s is delivered as ``catchUp`` (``sent_at`` None),
      and the late ``Posted`` does not deliver it twice.
    """

    def __init__(self, wormhole: MessageCenter, identifiers: Optional[Iterable[str]], stored: bool,
                 catch_unsignalled: bool, every_post: bool) -> None:
        self.wormhole = wormhole
        self.all = identifiers is None
        self.identifiers: List[str] = [] if identifiers is None else list(dict.fromkeys(identifiers))
        for identifier in self.identifiers:
            validate_identifier(identifier)
        if not self.all and not self.identifiers:
            raise WormholeError("invalidIdentifier", "no identifier to listen to", "")
        self.stored = stored
        self.every_post = every_post
        self.prefix = "%s/%s/" % (wormhole.group, wormhole.directory)
        self.directory = wormhole.path
        self.watch_always = catch_unsignalled
        self.grace = UNSIGNALLED_GRACE_SECONDS
        self._last: Dict[str, Any] = {}
        self.rules = self._rules()

    def _rules(self) -> List[str]:
        if self.all:
            return ["type='signal',path=%s,member=%s,arg0path=%s" % (
                quote_rule_value(OBJECT_PATH), quote_rule_value(member), quote_rule_value(self.prefix))
                for member in (POSTED, MESSAGE)]
        rules = []
        for identifier in self.identifiers:
            name = self.prefix + identifier
            for member in (POSTED, MESSAGE):
                rules.append(exact_rule(name, bucket_interface(name), member))
                rules.append(exact_rule(name, PLAIN_INTERFACE, member))
        return rules

    def _identifier_of(self, name: str) -> Optional[str]:
        if not name.startswith(self.prefix):
            return None
        identifier = name[len(self.prefix):]
        if self.all:
            if "/" in identifier:
                return None
            try:
                validate_identifier(identifier)
            except WormholeError:
                return None
            return identifier
        return identifier if identifier in self.identifiers else None

    def file_key(self, name: str) -> Optional[str]:
        if not name.endswith(".json") or name.startswith("."):
            return None
        return self._identifier_of(self.prefix + name[:-5])

    def started(self) -> None:
        if self.stored:
            for identifier in self._known_identifiers():
                self._deliver(identifier, "stored", None)

    def on_signal(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        if member == POSTED:
            parsed = parse_posted(signature, body)
            if parsed is None:
                return
            identifier = self._identifier_of(parsed[0])
            if identifier is None:
                return
            self.sub.settle(identifier)
            self._deliver(identifier, "posted", parsed[1])
        elif member == MESSAGE:
            self._on_message(signature, body)

    def _on_message(self, signature: str, body: Tuple[Any, ...]) -> None:
        if not signature or signature[0] != "s" or not body:
            return
        identifier = self._identifier_of(body[0])
        if identifier is None:
            return
        if len(signature) < 2 or signature[1] != "s" or len(body) < 2:
            self.sub.error(identifier, MessageFormatError("transientDropped", "transient message for %s dropped: "
                                                          "its second argument is not a string" % shown(identifier),
                                                          identifier))
            return
        text = body[1]
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > TRANSIENT_LIMIT:
            self.sub.error(identifier, TooLargeError("transientDropped", "transient message for %s dropped: %d "
                                                     "bytes, over the limit of %d"
                                                     % (shown(identifier), size, TRANSIENT_LIMIT), identifier))
            return
        try:
            _json.validate_document(text, "transient message for %s" % shown(identifier), "transientDropped")
        except WormholeError as error:
            self.sub.error(identifier, error)
            return
        self.sub.emit(Delivery(identifier, text, "transient", None))

    def wake(self, key: str, reason: str) -> bool:
        return self._deliver(key, reason, None)

    def _deliver(self, identifier: str, reason: str, sent_at: Optional[int]) -> bool:
        """Read ``identifier``'s file and deliver it if it changed (or
        ``every_post``); True when something was delivered."""
        path = self.wormhole.path / (identifier + ".json")
        try:
            data = read_file(path, self.wormhole.max_bytes)
        except WormholeError as error:
            self._last.pop(identifier, None)
            self.sub.error(identifier, error)
            return False
        if data is None:
            if self._last.get(identifier) is _CLEARED and not self.every_post:
                return False
            if reason != "posted" and identifier not in self._last:
                # Stored or caught up, a mailbox never seen is simply empty: nothing changed.
                self._last[identifier] = _CLEARED
                return False
            self._last[identifier] = _CLEARED
            self.sub.emit(Delivery(identifier, None, "cleared", sent_at if reason == "posted" else None))
            return True
        if self._last.get(identifier) == data and not self.every_post:
            return False
        try:
            text = _json.validate_document(data, "stored message %s" % shown(str(path)), "decodingFailed")
        except WormholeError as error:
            self._last.pop(identifier, None)
            self.sub.error(identifier, error)
            return False
        self._last[identifier] = data
        self.sub.emit(Delivery(identifier, text, reason, sent_at if reason == "posted" else None))
        return True

    def _known_identifiers(self) -> List[str]:
        if not self.all:
            return list(self.identifiers)
        found = set(self.wormhole.identifiers())
        found.update(self._last.keys())
        return sorted(found)

    def catch_up(self) -> int:
        changed = 0
        for identifier in self._known_identifiers():
            if self._deliver(identifier, "catchUp", None):
                changed += 1
        return changed


class _BlockingDeliveries:
    def __init__(self, wormhole: MessageCenter, identifiers: Optional[Iterable[str]], timeout: Optional[float],
                 stored: bool) -> None:
        self.queue = BlockingQueue()
        self.timeout = timeout
        self.listener = wormhole.listen(identifiers, self.queue.put, self.queue.put, stored=stored,
                                        context=self.queue.context)

    def __iter__(self) -> "_BlockingDeliveries":
        return self

    def __next__(self) -> Union[Delivery, DeliveryError]:
        try:
            item: Union[Delivery, DeliveryError] = self.queue.get(self.timeout)
            return item
        except TimeoutError:
            raise StopIteration from None

    def close(self) -> None:
        """Stop listening."""
        self.listener.cancel()

    def __enter__(self) -> "_BlockingDeliveries":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def deliveries(wormhole: MessageCenter, identifiers: Optional[Iterable[str]] = None, timeout: Optional[float] = None,
               stored: bool = False) -> _BlockingDeliveries:
    """A blocking iterator of :class:`Delivery` / :class:`DeliveryError` for
    scripts, on a private main context; stops after ``timeout`` seconds
    without a delivery."""
    return _BlockingDeliveries(wormhole, identifiers, timeout, stored)


class Wormhole(MessageCenter):
    """Deprecated: :class:`MessageCenter`, the name Swift and GJS use (2.0).
    Works as before and warns; it goes in the next release."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        renamed("wormhole_py.Wormhole", "MessageCenter")
        super().__init__(*args, **kwargs)

# SPDX-License-Identifier: Apache-2.0
"""Observing a shared-defaults suite, and its awaitable writes (internal:
:class:`~wormhole_py.defaults.GroupDefaults` has these methods).

Woken by the keys' ``Posted`` signals (filtered by the bus daemon: two exact
rules per key, or one ``arg0path`` rule for the whole suite) and by renames
onto the suite file in ``Preferences/`` (inotify: while the bus is away, and
for writers that do not post).  A burst of writes may arrive as one change
carrying the latest value; a value equal to the one last delivered is not
delivered again; after a reconnection every observed key that changed
meanwhile is delivered once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ._contract import PLAIN_INTERFACE, POSTED, bucket_interface, exact_rule, prefix_rule
from ._deprecated import renamed
from ._plist import MISSING, _stored, _typed_key
from ._reactor import AsyncioReactor, GLibReactor
from ._subscription import Failure, Feed, Subscription
from ._wire import require
from .errors import WormholeError
from .notify import parse_posted

__all__ = ["Change", "DefaultsFeed", "ObservingDefaults"]

#: An observed change: ``(key, value)``, the value :data:`~wormhole_py.defaults.MISSING` when removed.
Change = Tuple[str, Any]

_SUITE = "suite"


class DefaultsFeed(Feed[Change]):
    """The changes of some keys of a suite (``None``: every key)."""

    def __init__(self, defaults: "ObservingDefaults", keys: Optional[Sequence[str]]) -> None:
        self.defaults = defaults
        self.keys: Optional[List[str]] = None if keys is None else list(dict.fromkeys(keys))
        self.names: Dict[str, str] = {}
        rules: List[str] = []
        if self.keys is None:
            rules.append(prefix_rule(defaults.prefix))
        else:
            for key in self.keys:
                defaults.validate_key(key)
                name = defaults.name_for(key)
                self.names[name] = key
                rules += [exact_rule(name, bucket_interface(name)), exact_rule(name, PLAIN_INTERFACE)]
        self.rules = rules
        self.directory = defaults.directory
        self.watch_always = True
        defaults._open_lock_directory()
        self._suite_file = defaults.path.name
        self._last: Dict[str, Any] = {}
        snapshot = defaults._read().entries
        for key in (self.keys if self.keys is not None else list(snapshot)):
            self._last[key] = _typed_key(_stored(snapshot.get(key)))

    def on_signal(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        if member != POSTED:
            return
        parsed = parse_posted(signature, body)
        if parsed is None:
            return
        name = parsed[0]
        if self.keys is not None:
            key = self.names.get(name)
            if key is None or interface not in (bucket_interface(name), PLAIN_INTERFACE):
                return
        else:
            prefix = self.defaults.prefix
            key = name[len(prefix):] if name.startswith(prefix) else None
        if key:
            self._deliver(key)

    def file_key(self, name: str) -> Optional[str]:
        return _SUITE if name == self._suite_file else None

    def wake(self, key: str, reason: str) -> bool:
        return self.catch_up() > 0

    def catch_up(self) -> int:
        try:
            entries = self.defaults._read().entries
        except WormholeError as error:
            self.sub.error("", error)
            return 0
        keys = self.keys if self.keys is not None else sorted(set(entries) | set(self._last))
        return sum(1 for key in keys if self._deliver(key, entries.get(key)))

    def _deliver(self, key: str, raw: Any = MISSING) -> bool:
        if raw is MISSING:
            try:
                raw = self.defaults.raw(key)
            except WormholeError as error:
                self.sub.error(key, error)
                return False
        value = _stored(raw)
        typed = _typed_key(value)
        if self._last.get(key, _typed_key(MISSING)) == typed:
            return False
        self._last[key] = typed
        self.sub.emit((key, value))
        return True


class ObservingDefaults:
    """The observing and awaitable-writing half of
    :class:`~wormhole_py.defaults.GroupDefaults`."""

    bus_address: Optional[str]
    directory: Path
    path: Path
    last_post_error: Optional[WormholeError]
    _async: Any
    _deferred: Optional[List[Tuple[List[str], int]]]

    @property
    def prefix(self) -> str:
        raise NotImplementedError

    def validate_key(self, key: str) -> str:
        raise NotImplementedError

    def name_for(self, key: str) -> str:
        raise NotImplementedError

    def raw(self, key: str) -> Optional[str]:
        raise NotImplementedError

    def _read(self) -> Any:
        raise NotImplementedError

    def _open_lock_directory(self) -> None:
        raise NotImplementedError

    def set(self, key: str, value: Any, *, expect: Any = MISSING, expect_absent: bool = False) -> bool:
        raise NotImplementedError

    def delete(self, key: str) -> bool:
        raise NotImplementedError

    def increment(self, key: str, by: int = 1) -> int:
        raise NotImplementedError

    def load(self, values: Mapping[str, Any], *, replace: bool = False) -> List[str]:
        raise NotImplementedError

    # -- observing -------------------------------------------------------------

    def listen(self, keys: Optional[Iterable[str]], handler: Callable[[str, Any], None],
                center: Any = None, *, context: Any = None,
                on_error: Optional[Callable[[Failure], None]] = None,
                on_connection_change: Optional[Callable[[bool, Optional[str], int], None]] = None,
                require_bus: bool = False) -> Subscription[Change]:
        """Call ``handler(key, value)`` (value :data:`MISSING` when removed)
        for every change of ``keys`` (every key of the suite when ``None``),
        in a GLib main context (``context``, or ``center``'s, default the
        thread-default; PyGObject).  Active when this returns.  See
        :mod:`wormhole_py._defaults_feed` for what is delivered when."""
        require("gio", "GroupDefaults.listen (callbacks in a GLib main context; use listen_async on asyncio)")
        feed = DefaultsFeed(self, None if keys is None else list(keys))
        if center is not None:
            context = center.context
        subscription: Subscription[Change] = Subscription(
            GLibReactor(context), feed, lambda change: handler(*change), on_error, on_connection_change)
        return subscription.start(self.bus_address, require_bus)

    async def listen_async(self, keys: Optional[Iterable[str]] = None,
                           callback: Optional[Callable[[Change], None]] = None,
                           on_error: Optional[Callable[[Failure], None]] = None,
                           on_connection_change: Optional[Callable[[bool, Optional[str], int], None]] = None,
                           require_bus: bool = False) -> Subscription[Change]:
        """:meth:`listen` on the running asyncio loop (jeepney): ``async for
        key, value in subscription`` (or ``callback((key, value))``)."""
        require("jeepney", "GroupDefaults.listen_async (asyncio)")
        feed = DefaultsFeed(self, None if keys is None else list(keys))
        subscription: Subscription[Change] = Subscription(AsyncioReactor(), feed, callback, on_error,
                                                          on_connection_change)
        return await subscription.start_async(self.bus_address, require_bus)

    def observe(self, *args: Any, **kwargs: Any) -> Subscription[Change]:
        """Deprecated: :meth:`listen` (Swift's and GJS's verb); goes in the next release."""
        renamed("GroupDefaults.observe", "GroupDefaults.listen")
        return self.listen(*args, **kwargs)

    async def observe_async(self, *args: Any, **kwargs: Any) -> Subscription[Change]:
        """Deprecated: :meth:`listen_async`; goes in the next release."""
        renamed("GroupDefaults.observe_async", "GroupDefaults.listen_async")
        return await self.listen_async(*args, **kwargs)

    # -- awaitable writes ---------------------------------------------------------

    async def _async_write(self, write: Callable[[], Any]) -> Any:
        require("jeepney", "an awaitable GroupDefaults write (asyncio)")
        self._deferred = []
        try:
            result = write()
        finally:
            deferred, self._deferred = self._deferred, None
        for keys, generation in deferred:
            await self._post_async(keys, generation)
        return result

    async def _post_async(self, keys: List[str], generation: int) -> None:
        from ._async_send import AsyncSender
        self.last_post_error = None
        try:
            if self._async is None:
                self._async = AsyncSender(self.bus_address)
            for key in keys:
                await self._async.post(self.name_for(key), generation, confirm=False)
            await self._async.confirm()
        except WormholeError as error:
            self.last_post_error = error

    async def set_async(self, key: str, value: Any, *, expect: Any = MISSING, expect_absent: bool = False) -> bool:
        """:meth:`set`, its posts awaited on the running loop."""
        return bool(await self._async_write(lambda: self.set(key, value, expect=expect,
                                                             expect_absent=expect_absent)))

    async def delete_async(self, key: str) -> bool:
        """:meth:`delete`, its post awaited on the running loop."""
        return bool(await self._async_write(lambda: self.delete(key)))

    async def increment_async(self, key: str, by: int = 1) -> int:
        """:meth:`increment`, its post awaited on the running loop."""
        return int(await self._async_write(lambda: self.increment(key, by)))

    async def load_async(self, values: Mapping[str, Any], *, replace: bool = False) -> List[str]:
        """:meth:`load`, its posts awaited on the running loop."""
        return list(await self._async_write(lambda: self.load(values, replace=replace)))


# SPDX-License-Identifier: Apache-2.0
"""Awaitable sends on asyncio (jeepney).

:class:`AsyncSender` is one private connection in the running loop: a post
is queued on it and :meth:`AsyncSender.confirm` awaits one call the bus
answers (``GetNameOwner`` of its own name), so every signal before it was
taken by the bus.  The facades' ``*_async`` methods store first (a file
write, as in the blocking API) and then post and confirm here; the loop is
never blocked on the bus.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ._closing import Closing
from ._contract import CONNECT_TIMEOUT_SECONDS, MESSAGE, POSTED, bucket_interface, shown, validate_name, validate_state
from ._wire import CallFailed, require
from .bus import CONFIRM_TIMEOUT_SECONDS, app_id, resolve_address
from .errors import BusError, NotSentError

__all__ = ["AsyncSender"]


class AsyncSender(Closing):
    """Posts and transient messages from asyncio, awaited until the bus took them.

    ::

        async with AsyncSender() as sender:
            await sender.post("com.example.app.refresh", 42)

    :raises BusError: (``transportMissing``) without jeepney.
    """

    def __init__(self, address: Optional[str] = None, connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        require("jeepney", "asyncio sending")
        self.address = resolve_address(address)
        self.connect_timeout = connect_timeout
        self._wire: Any = None
        self._claimed = False
        self._last_states: Dict[str, int] = {}

    async def _connected(self) -> Any:
        if self._wire is None or self._wire.closed:
            from ._wire_jeepney import connect_async
            self._wire = await connect_async(self.address, self.connect_timeout)
            self._claimed = False
        if not self._claimed:
            await self._claim()
        return self._wire

    async def _claim(self) -> None:
        identity = app_id()
        self._claimed = True
        if identity is None:
            return
        name = "%s.Wormhole.c%s" % (identity, str(self._wire.unique_name).lstrip(":").replace(".", "_"))
        try:
            reply = await self._wire.call_checked("RequestName", "su", (name, 4), CONFIRM_TIMEOUT_SECONDS)
        except CallFailed as error:
            self._claimed = False
            raise NotSentError("nameRefused", "the bus refused the sender name %s (%s); the notification is not "
                               "sent" % (shown(name), error), name) from None
        if reply[0] not in (1, 4):
            self._claimed = False
            raise NotSentError("nameRefused", "the bus refused the sender name %s (RequestName answered %d)"
                               % (shown(name), reply[0]), name)

    async def ready(self) -> None:
        """Connect now (nothing once connected), so that a later post goes out at once.

        :raises NotSentError: the bus cannot be reached or refused the sender name.
        """
        try:
            await self._connected()
        except (BusError, CallFailed) as error:
            raise _not_sent(error) from None

    async def emit(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        """Queue any signal on the contract's object path (not yet confirmed)."""
        try:
            wire = await self._connected()
            wire.emit(interface, member, signature, body)
        except (BusError, CallFailed) as error:
            raise _not_sent(error) from None

    async def post(self, name: str, state: Optional[int] = None, confirm: bool = True,
                   timeout: float = CONFIRM_TIMEOUT_SECONDS) -> int:
        """Post ``name`` (with ``state``; without one the name's last state
        posted here, else 0); with ``confirm`` wait until the bus took it.

        :returns: the state sent.
        :raises InvalidInputError: a bad name or state (nothing sent).
        :raises NotSentError: the bus did not take it.
        """
        validate_name(name)
        value = validate_state(state)
        if value is None:
            value = self._last_states.get(name, 0)
        else:
            self._last_states[name] = value
        await self.emit(bucket_interface(name), POSTED, "st", (name, value))
        if confirm:
            await self.confirm(timeout)
        return value

    async def send_message(self, name: str, text: str, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        """Send the transient ``Message(name, text)`` and wait until the bus took it."""
        validate_name(name)
        await self.emit(bucket_interface(name), MESSAGE, "ss", (name, text))
        await self.confirm(timeout)

    async def confirm(self, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        """Wait until the bus took every signal sent before.

        :raises NotSentError: (``timedOut`` / ``disconnected``).
        """
        wire = self._wire
        if wire is None or wire.closed:
            raise NotSentError("disconnected", "the bus connection is closed; not confirmed")
        try:
            await wire.call_checked("GetNameOwner", "s", (wire.unique_name,), timeout)
        except CallFailed as error:
            raise NotSentError("timedOut" if error.timed_out else "disconnected",
                               "the bus did not confirm the signal: %s" % error) from None

    def close(self) -> None:
        """Close the connection (its sends were awaited, so nothing is pending)."""
        if self._wire is not None:
            self._wire.close()
            self._wire = None


def _not_sent(error: Exception) -> NotSentError:
    """What a send raises for a failure of the connection under it."""
    if isinstance(error, NotSentError):
        return error
    if isinstance(error, BusError):
        return NotSentError(error.code, str(error), error.value)
    return NotSentError("disconnected", "the signal was not sent: %s" % error)

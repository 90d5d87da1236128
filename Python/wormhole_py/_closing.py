# SPDX-License-Identifier: Apache-2.0
"""What ``with`` and ``async with`` mean for the package's objects (internal):
leaving the block calls ``close()`` (``cancel()`` for a subscription)."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["Closing", "Posting"]

C = TypeVar("C", bound="Closing")


class Closing:
    """``with`` / ``async with`` call :meth:`close` at the end of the block."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self: C) -> C:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class Posting(Closing):
    """A writer that posts after each write: its blocking connection (``_bus``,
    closed only when it made it) and its asyncio one (``_async``)."""

    _bus: Any
    _own_bus: bool
    _async: Any

    def close(self) -> None:
        """Close the posting connections (a ``bus`` passed in is left open)."""
        if self._bus is not None and self._own_bus:
            self._bus.close()
            self._bus = None
        if self._async is not None:
            self._async.close()
            self._async = None

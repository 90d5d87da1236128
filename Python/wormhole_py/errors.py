# SPDX-License-Identifier: Apache-2.0
"""The exceptions of :mod:`wormhole_py`.

Every failure the package reports is a :class:`WormholeError` (or a subclass)
carrying ``code``, the stable reason from the contract's one table of error
codes (``contract/errors.json``, the codes Swift uses: ``invalidName``,
``invalidGroup``, ``invalidDirectory``, ``invalidIdentifier``, ``unsafePath``,
``io``, ``noMessage``, ``invalidJSON``, ``messageTooLarge``,
``disconnected``, ``timedOut``, ...), and ``value``, the offending value when
there is one.  The message always names that value.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "BusError",
    "ContextBusyError",
    "CorruptSuiteError",
    "DefaultsError",
    "ExpectationFailed",
    "InvalidInputError",
    "LockTimeoutError",
    "MessageFormatError",
    "NoMessageError",
    "NotSentError",
    "StorageError",
    "TooLargeError",
    "UnsafePathError",
    "WormholeError",
]


class WormholeError(Exception):
    """Base class of every error this package raises.

    :param code: the stable reason, e.g. ``"invalidName"``.
    :param message: a human-readable sentence naming the bad value.
    :param value: the offending value (a name, identifier, path), if any.
    """

    def __init__(self, code: str, message: str, value: Optional[object] = None) -> None:
        super().__init__(message)
        self.code: str = code
        self.value: Optional[object] = value
        self.message: str = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, value={self.value!r}, message={self.message!r})"


class InvalidInputError(WormholeError, ValueError):
    """A name, group, directory, identifier, state, key or argument is invalid
    (codes ``invalidName``, ``invalidGroup``, ``invalidDirectory``,
    ``invalidIdentifier``, ``invalidAppID``, ``invalidValue``, ``invalidKey``,
    ``invalidSuite``, ``invalidAddress``)."""


class UnsafePathError(WormholeError):
    """A container or file is a symlink, owned by another user, or writable by
    group/others (code ``unsafePath``)."""


class StorageError(WormholeError, OSError):
    """Reading or writing a file failed (code ``io``)."""


class NoMessageError(WormholeError):
    """No message is stored for the identifier (code ``noMessage``)."""


class MessageFormatError(WormholeError):
    """The bytes are not one UTF-8 JSON text without a BOM (code ``invalidJSON``
    for a message given to a send call; ``decodingFailed`` for a stored file, as
    Swift's reads say; ``transientDropped`` for a transient message received)."""


class TooLargeError(WormholeError):
    """A message is over its limit (code ``messageTooLarge``, or
    ``transientTooLarge`` for transient messages)."""


class BusError(WormholeError):
    """The bus could not be reached or answered badly (codes
    ``connectionFailed``, ``disconnected``, ``timedOut``, ``noSessionBus``,
    ``requestFailed``)."""


class NotSentError(BusError):
    """A notification (or transient message) was not sent or not confirmed
    (code ``notSent``).  For a mailbox send the message is still stored."""


class ContextBusyError(WormholeError, RuntimeError):
    """A blocking iterator was asked to run on a main context that is already
    being iterated (code ``contextBusy``)."""


class LockTimeoutError(WormholeError):
    """A ``flock`` was not granted within the lock timeout (code
    ``lockTimeout``)."""


class DefaultsError(WormholeError):
    """A shared-defaults operation failed (codes ``typeMismatch``, also for an
    increment that would overflow, and ``suiteTooLarge``)."""


class CorruptSuiteError(DefaultsError):
    """The suite file is not one JSON object (code ``corruptSuite``).

    ``path`` is the file, ``offset`` the byte offset of the problem, ``reason``
    what was wrong there.  Readers and writers refuse; only :meth:`GroupDefaults.repair`
    moves the file aside.
    """

    def __init__(self, message: str, path: str, offset: int, reason: str, size: int) -> None:
        super().__init__("corruptSuite", message, path)
        self.path = path
        self.offset = offset
        self.reason = reason
        self.size = size


class ExpectationFailed(DefaultsError):
    """A compare-and-set write found another value (code ``expectationFailed``).

    ``stored`` is the stored value's JSON text as ``defaults read`` prints it,
    or ``None`` when the key is absent.
    """

    def __init__(self, message: str, key: str, stored: Optional[str]) -> None:
        super().__init__("expectationFailed", message, key)
        self.key = key
        self.stored = stored

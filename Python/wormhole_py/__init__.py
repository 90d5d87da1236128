"""Wormhole for Python: app-group messaging on the D-Bus session bus.

Implements the Wormhole contract 1.3: Darwin-style notifications
(:class:`NotificationCenter`, :func:`observe_async`), last-value mailboxes and
transient messages (:class:`Wormhole`), shared defaults
(:class:`SharedDefaults`) and the journal (:class:`Journal`).  Every
subscription is one :class:`Subscription`: a callback in a GLib main context
(PyGObject) or ``async for`` on asyncio (jeepney).

The import name is ``wormhole_py`` (``wormhole`` is magic-wormhole's); the
distribution is ``wormhole-dbus``; the command ``wormhole-py``.  Nothing is
printed: the package logs on the ``wormhole_py`` logger.
"""

from __future__ import annotations

__version__ = "0.2.0"
CONTRACT_VERSION = "1.3"

from ._async_send import AsyncSender  # noqa: E402
from ._contract import bucket_interface, fnv1a32  # noqa: E402
from ._subscription import Failure, Subscription  # noqa: E402
from .defaults import MISSING, SharedDefaults  # noqa: E402
from .errors import (  # noqa: E402
    BusError,
    ContextBusyError,
    InvalidInputError,
    LockTimeoutError,
    MessageFormatError,
    NoMessageError,
    NotSentError,
    StorageError,
    TooLargeError,
    UnsafePathError,
    WormholeError,
)
from .journal import Gap, Journal, JournalError, Record  # noqa: E402
from .messages import Delivery, DeliveryError, SendResult, Wormhole  # noqa: E402
from .notify import Notification, NotificationCenter, observe_async, post_async  # noqa: E402

__all__ = [
    "CONTRACT_VERSION",
    "MISSING",
    "AsyncSender",
    "BusError",
    "ContextBusyError",
    "Delivery",
    "DeliveryError",
    "Failure",
    "Gap",
    "InvalidInputError",
    "Journal",
    "JournalError",
    "LockTimeoutError",
    "MessageFormatError",
    "NoMessageError",
    "NotSentError",
    "Notification",
    "NotificationCenter",
    "Record",
    "SendResult",
    "SharedDefaults",
    "StorageError",
    "Subscription",
    "TooLargeError",
    "UnsafePathError",
    "Wormhole",
    "WormholeError",
    "__version__",
    "bucket_interface",
    "fnv1a32",
    "observe_async",
    "post_async",
]

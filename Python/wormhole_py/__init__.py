# SPDX-License-Identifier: Apache-2.0
"""Wormhole for Python: app-group messaging on the D-Bus session bus.

Implements the Wormhole contract 1.4: Darwin-style notifications
(:class:`DarwinNotificationCenter`, :func:`listen_async`), last-value
mailboxes and transient messages (:class:`MessageCenter`), shared defaults
(:class:`GroupDefaults`) and the journal (:class:`Journal`), named as the
Swift library names them; the 0.1 names (``NotificationCenter``,
``observe_async``, ``Wormhole``, ``SharedDefaults``, ``observe``, ``root=``)
still work for one release and raise a :class:`DeprecationWarning`.  Every
subscription is one :class:`Subscription`: a callback in a GLib main context
(PyGObject) or ``async for`` on asyncio (jeepney).

The import name is ``wormhole_py`` (``wormhole`` is magic-wormhole's); the
distribution is ``wormhole-dbus``; the command ``wormhole-py``.  Nothing is
printed: the package logs on the ``wormhole_py`` logger.
"""

from __future__ import annotations

__version__ = "2.0.0"

from ._async_send import AsyncSender
from ._contract import CONTRACT_VERSION, bucket_interface, fnv1a32
from ._subscription import Failure, Subscription
from .defaults import MISSING, GroupDefaults, SharedDefaults
from .errors import (
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
from .journal import Gap, Journal, JournalError, Record
from .messages import Delivery, DeliveryError, MessageCenter, SendResult, Wormhole
from .notify import (
    DarwinNotificationCenter,
    Notification,
    NotificationCenter,
    listen_async,
    observe_async,
    post_async,
)

__all__ = [
    "CONTRACT_VERSION",
    "MISSING",
    "AsyncSender",
    "BusError",
    "ContextBusyError",
    "DarwinNotificationCenter",
    "Delivery",
    "DeliveryError",
    "Failure",
    "Gap",
    "GroupDefaults",
    "InvalidInputError",
    "Journal",
    "JournalError",
    "LockTimeoutError",
    "MessageCenter",
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
    "listen_async",
    "observe_async",
    "post_async",
]

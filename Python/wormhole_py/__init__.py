"""Wormhole for Python: app-group messaging on the D-Bus session bus.

Implements the Wormhole contract 1.3 (Darwin-style notifications, last-value
mailboxes, transient messages, sandboxed participants; shared defaults and the
journal live in :mod:`wormhole_py.defaults` and :mod:`wormhole_py.journal`).

The import name is ``wormhole_py``: ``wormhole`` is magic-wormhole's name on
PyPI and in Debian.  PyGObject (Debian's ``python3-gi``) is required for the
bus parts; the container and validation helpers are plain Python.
"""

from __future__ import annotations

__version__ = "0.1.0"
CONTRACT_VERSION = "1.3"

from .errors import (  # noqa: E402
    WormholeError, InvalidInputError, UnsafePathError, StorageError, NoMessageError,
    MessageFormatError, TooLargeError, BusError, NotSentError, ContextBusyError, LockTimeoutError,
)
from ._contract import bucket_interface, fnv1a32  # noqa: E402

__all__ = [
    "__version__", "CONTRACT_VERSION",
    "WormholeError", "InvalidInputError", "UnsafePathError", "StorageError", "NoMessageError",
    "MessageFormatError", "TooLargeError", "BusError", "NotSentError", "ContextBusyError",
    "LockTimeoutError", "bucket_interface", "fnv1a32",
]

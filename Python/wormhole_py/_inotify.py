# SPDX-License-Identifier: Apache-2.0
"""Directory watches on Linux's inotify through :mod:`ctypes` (internal).

One :class:`Inotify` instance per event loop holds every directory watch of
that loop, reporting the names that arrived (renamed or moved in, or closed
after writing), were created, or left (deleted, renamed or moved out).  The
descriptor is non-blocking: the event loop in use (a GLib main context or an
asyncio loop, see :mod:`wormhole_py._reactor`) wakes the owner when it is
readable, and :meth:`Inotify.read` takes what is queued.  Nothing polls.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from typing import List, Optional, Tuple

__all__ = ["ARRIVED", "CREATED", "LEFT", "RESCAN", "Inotify"]

_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CLOSE_WRITE = 0x00000008
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_IGNORED = 0x00008000
_IN_Q_OVERFLOW = 0x00004000
_IN_ONLYDIR = 0x01000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CLOSE_WRITE | _IN_DELETE_SELF | _IN_MOVE_SELF
_EVENT = struct.Struct("iIII")

#: A name arrived whole (renamed or moved in, or a writer closed it).
ARRIVED = "arrived"
#: A name was created (a socket bound, an empty file opened).
CREATED = "created"
#: A name left the directory (deleted, renamed or moved out).
LEFT = "left"
#: The queue overflowed or the directory itself went: the owner rescans.
RESCAN = "rescan"

_libc: Optional[ctypes.CDLL] = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


class Inotify:
    """One inotify instance holding the watches of many directories (the
    per-user instance limit is 128 on a stock kernel: one per loop, not one
    per directory).

    :raises OSError: no instance can be made (the limit reached).
    """

    def __init__(self) -> None:
        fd = int(_lib().inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, "inotify_init1: %s" % os.strerror(code))
        self.fd: int = fd

    def add(self, path: str) -> int:
        """Watch directory ``path``; returns its watch descriptor (the same
        one for the same directory).

        :raises OSError: it cannot be watched (missing, not a directory).
        """
        wd = int(_lib().inotify_add_watch(self.fd, os.fsencode(path), _MASK | _IN_ONLYDIR))
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return wd

    def remove(self, wd: int) -> None:
        """Stop watching ``wd`` (already gone: nothing happens)."""
        _lib().inotify_rm_watch(self.fd, wd)

    def read(self) -> List[Tuple[int, str, str]]:
        """The queued events as ``(wd, ARRIVED | CREATED | LEFT | RESCAN, name)``,
        in order; an overflow is ``(-1, RESCAN, "")`` (every watch rescans)."""
        events: List[Tuple[int, str, str]] = []
        while self.fd >= 0:
            try:
                data = os.read(self.fd, 65536)
            except OSError as error:
                if error.errno in (errno.EAGAIN, errno.EINTR):
                    break
                raise
            if not data:
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                name = os.fsdecode(raw)
                if mask & _IN_Q_OVERFLOW:
                    events.append((-1, RESCAN, ""))
                elif mask & (_IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED):
                    events.append((wd, RESCAN, ""))
                elif mask & (_IN_DELETE | _IN_MOVED_FROM):
                    events.append((wd, LEFT, name))
                elif mask & (_IN_MOVED_TO | _IN_CLOSE_WRITE):
                    events.append((wd, ARRIVED, name))
                elif mask & _IN_CREATE:
                    events.append((wd, CREATED, name))
        return events

    def close(self) -> None:
        """Close the instance (every watch goes with it; idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

"""A directory watch on Linux's inotify through :mod:`ctypes` (internal).

One watch per directory, reporting the names that arrived (created, or
renamed or moved in) and the names that left (deleted, renamed or moved
out).  The descriptor is non-blocking: the event loop in use (a GLib main
context or an asyncio loop, see :mod:`wormhole_py._reactor`) wakes the
owner when it is readable, and :meth:`DirectoryWatch.read` takes what is
queued.  Nothing polls.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from typing import List, Optional, Tuple

__all__ = ["ARRIVED", "CREATED", "LEFT", "RESCAN", "DirectoryWatch"]

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


class DirectoryWatch:
    """An inotify watch on ``path`` (a directory).

    :raises OSError: the directory cannot be watched (missing, not a
        directory, the per-user instance limit reached).
    """

    def __init__(self, path: str) -> None:
        libc = _lib()
        fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, "inotify_init1: %s" % os.strerror(code), path)
        watch = int(libc.inotify_add_watch(fd, os.fsencode(path), _MASK | _IN_ONLYDIR))
        if watch < 0:
            code = ctypes.get_errno()
            os.close(fd)
            raise OSError(code, os.strerror(code), path)
        self.fd: int = fd
        self.path = path

    def read(self) -> List[Tuple[str, str]]:
        """The queued events as ``(ARRIVED | CREATED | LEFT | RESCAN, name)``, in order."""
        events: List[Tuple[str, str]] = []
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
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                name = os.fsdecode(raw)
                if mask & (_IN_Q_OVERFLOW | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED):
                    events.append((RESCAN, ""))
                elif mask & (_IN_DELETE | _IN_MOVED_FROM):
                    events.append((LEFT, name))
                elif mask & (_IN_MOVED_TO | _IN_CLOSE_WRITE):
                    events.append((ARRIVED, name))
                elif mask & _IN_CREATE:
                    events.append((CREATED, name))
        return events

    def close(self) -> None:
        """Stop watching (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

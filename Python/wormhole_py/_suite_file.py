# SPDX-License-Identifier: Apache-2.0
"""The suite file on disk (contract section 5): its lock, its atomic
replacement with a strictly later modification time (the generation), and
the v1.3 change counter (internal; :class:`~wormhole_py.defaults.GroupDefaults`
has these methods)."""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import time
from pathlib import Path
from typing import Dict, Optional

from . import _contract
from .errors import LockTimeoutError, StorageError, UnsafePathError, WormholeError

__all__ = ["SuiteFile"]


class _Suite:
    """One parsed version of the suite file: key -> the value's JSON text."""

    __slots__ = ("entries", "exists", "mtime_ns", "size", "text")

    def __init__(self, entries: Dict[str, str], text: str, mtime_ns: int, size: int, exists: bool) -> None:
        self.entries = entries
        self.text = text
        self.mtime_ns = mtime_ns
        self.size = size
        self.exists = exists


class SuiteFile:
    """The on-disk half of :class:`~wormhole_py.defaults.GroupDefaults`."""

    suite: str
    container: Path
    directory: Path
    path: Path
    lock_path: Path
    changes_path: Path

    def _parse(self, data: bytes, mtime_ns: int, writing: bool = False) -> _Suite:
        raise NotImplementedError

    def change_count(self) -> Optional[int]:
        """The suite's v1.3 change counter, ``None`` when there is none yet."""
        try:
            with open(self.changes_path, "rb") as handle:
                data = handle.read(8)
        except FileNotFoundError:
            return None
        if len(data) < 8:
            return 0
        return int(struct.unpack("<Q", data)[0])

    def generation(self) -> int:
        """The suite file's modification time in ns (0 when absent): the generation of the last write."""
        try:
            return os.lstat(self.path).st_mtime_ns
        except FileNotFoundError:
            return 0

    def _open_lock(self) -> int:
        from . import container as _container
        _container.ensure_directory(self.container)
        _container.ensure_directory(self.directory)
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UnsafePathError("unsafePath", "lock file %s is a symbolic link; it is not followed"
                                      % _contract.shown(str(self.lock_path)), str(self.lock_path)) from None
            raise StorageError("io", "cannot open the suite lock %s: %s"
                               % (_contract.shown(str(self.lock_path)), error.strerror), str(self.lock_path)) from None
        try:
            _container.check_safe(self.lock_path, os.fstat(fd), "lock file")
            lock_bounded(fd, str(self.lock_path))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_lock_directory(self) -> None:
        """Create (0700) and check the container and its ``Preferences`` directory."""
        from . import container as _container
        _container.ensure_directory(self.container)
        _container.ensure_directory(self.directory)

    def _read_locked(self) -> _Suite:
        from . import container as _container
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return _Suite({}, "", 0, 0, False)
        data = _container.read_file(self.path, max_bytes=None)
        if data is None:
            return _Suite({}, "", 0, 0, False)
        return self._parse(data, st.st_mtime_ns, writing=True)

    def _replace_file(self, text: str, old_mtime_ns: int) -> int:
        """Write ``text`` to a temporary file (its flock held), give it a
        modification time strictly later than ``old_mtime_ns``, rename it onto
        the suite; return the new generation (ns)."""
        from . import container as _container
        data = text.encode("utf-8")
        tmp = self.directory / _container.temp_name(self.suite + ".json")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o600)
        except OSError as error:
            raise StorageError("io", "cannot create %s: %s" % (_contract.shown(str(tmp)), error.strerror),
                               str(tmp)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            generation = max(time.time_ns(), old_mtime_ns + 1)
            os.utime(fd, ns=(generation, generation))
            generation = os.fstat(fd).st_mtime_ns
            if generation <= old_mtime_ns:  # a file system with coarse times: step past it
                generation = old_mtime_ns + 1
                os.utime(fd, ns=(generation, generation))
            os.rename(tmp, self.path)
        except BaseException as error:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            os.close(fd)
            if isinstance(error, OSError) and not isinstance(error, WormholeError):
                raise StorageError("io", "cannot write suite file %s: %s"
                                   % (_contract.shown(str(self.path)), error.strerror), str(self.path)) from None
            raise
        os.close(fd)
        return generation

    def _count_change(self) -> None:
        """Add 1 (wrapping) to the change counter, creating it with 8 zero bytes (v1.3). Under the lock."""
        try:
            fd = os.open(self.changes_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise StorageError("io", "cannot open the change counter %s: %s"
                               % (_contract.shown(str(self.changes_path)), error.strerror),
                               str(self.changes_path)) from None
        try:
            data = os.pread(fd, 8, 0)
            count = struct.unpack("<Q", data)[0] if len(data) == 8 else 0
            os.pwrite(fd, struct.pack("<Q", (count + 1) & 0xFFFFFFFFFFFFFFFF), 0)
        finally:
            os.close(fd)


def lock_timeout() -> float:
    """How long a lock wait may take: ``WORMHOLE_LOCK_TIMEOUT`` (seconds, fractions allowed) when set
    to a number of 0 or more, else 10 seconds (as the Swift library)."""
    try:
        seconds = float(os.environ.get("WORMHOLE_LOCK_TIMEOUT", ""))
    except ValueError:
        return 10.0
    return seconds if 0 <= seconds < float("inf") else 10.0


def _holder(fd: int) -> Optional[int]:
    """The pid ``/proc/locks`` gives for a ``flock`` lock on the file open at ``fd``, other than
    this process's; ``None`` when none is listed."""
    st = os.fstat(fd)
    wanted = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    try:
        with open("/proc/locks") as locks:
            for line in locks:
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == wanted and fields[4] != str(os.getpid()):
                    return int(fields[4])
    except (OSError, ValueError):
        return None
    return None


def lock_bounded(fd: int, path: str) -> None:
    """``flock(LOCK_EX)`` on ``fd`` within :func:`lock_timeout`: ``flock`` has no timeout and no
    descriptor reports a release, so ``LOCK_NB`` is retried with a sleep that doubles from 1 ms to
    50 ms, as the Swift library's lock wait does.

    :raises LockTimeoutError: (``lockTimeout``) not granted in time; nothing was changed."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    bound = lock_timeout()
    deadline = time.monotonic() + bound
    pause = 0.001
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            holder = _holder(fd)
            raise LockTimeoutError("lockTimeout", "timed out after %s s waiting for the lock on %s%s; nothing was "
                                   "changed, try again" % (bound, _contract.shown(path),
                                                           " (held by pid %d)" % holder if holder else ""), path)
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            continue

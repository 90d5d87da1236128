# SPDX-License-Identifier: Apache-2.0
"""Group containers (contract sections 2, 3 and 8): where files live, and
how they are written and read safely.

* :func:`container_root` resolves the root (``$WORMHOLE_CONTAINER_ROOT``, else
  ``$XDG_DATA_HOME/group-containers``, else
  ``$HOME/.local/share/group-containers``; inside a Flatpak sandbox the
  section 8 order).
* :func:`ensure_directory` creates directories with mode ``0700`` and refuses
  a symlink, another owner, or a group/world-writable mode.
* :func:`atomic_write` is the v1.2 writer: a temporary file
  ``.<stem>.<pid>-<hex>.tmp`` in the same directory, held under
  ``flock(LOCK_EX)`` while written, then renamed onto the final name.
* :func:`read_file` opens without following symlinks, checks owner and mode,
  and refuses files over a size limit.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import time
from pathlib import Path
from typing import Mapping, Optional

from ._contract import (
    DEFAULT_DIRECTORY,
    DEFAULT_MAX_MESSAGE_BYTES,
    STALE_TEMP_SECONDS,
    shown,
    validate_directory,
    validate_group,
)
from .errors import InvalidInputError, StorageError, TooLargeError, UnsafePathError

FLATPAK_INFO = "/.flatpak-info"

__all__ = [
    "atomic_write",
    "check_safe",
    "container_path",
    "container_root",
    "ensure_directory",
    "in_flatpak",
    "read_file",
    "remove_stale_temps",
    "temp_name",
    "wormhole_path",
]


def in_flatpak() -> bool:
    """Whether this process runs inside a Flatpak sandbox (``/.flatpak-info`` exists)."""
    return os.path.exists(FLATPAK_INFO)


def container_root(environ: Optional[Mapping[str, str]] = None) -> Path:
    """Return the root directory of group containers (contract sections 2 and 8).

    :param environ: the environment to read (default ``os.environ``).
    :raises InvalidInputError: (``noContainerRoot``) when neither
        ``WORMHOLE_CONTAINER_ROOT``, ``XDG_DATA_HOME`` nor ``HOME`` gives an
        absolute path.
    """
    env = os.environ if environ is None else environ
    explicit = env.get("WORMHOLE_CONTAINER_ROOT")
    if explicit:
        return _absolute(explicit, "WORMHOLE_CONTAINER_ROOT")
    home = env.get("HOME")
    xdg = env.get("XDG_DATA_HOME")
    if in_flatpak() and home and os.path.isabs(home):
        host_default = Path(home) / ".local" / "share" / "group-containers"
        if host_default.is_dir():
            return host_default
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "group-containers"
    if home:
        return _absolute(home, "HOME") / ".local" / "share" / "group-containers"
    raise InvalidInputError("noContainerRoot",
                            "no container root: set WORMHOLE_CONTAINER_ROOT, XDG_DATA_HOME or HOME")


def _absolute(value: str, variable: str) -> Path:
    if not os.path.isabs(value):
        raise InvalidInputError("noContainerRoot", "%s %s is not an absolute path" % (variable, shown(value)), value)
    return Path(value)


def check_safe(path: Path, st: os.stat_result, what: str = "path") -> None:
    """Refuse ``path`` (already ``lstat``-ed or ``fstat``-ed as ``st``) when it
    is a symlink, owned by another user, or writable by group or others."""
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError("unsafePath", "%s %s is a symbolic link; it is not followed" % (what, shown(str(path))),
                              str(path))
    if st.st_uid != os.geteuid():
        raise UnsafePathError("unsafePath", "%s %s is owned by uid %d, not by this user (uid %d)"
                              % (what, shown(str(path)), st.st_uid, os.geteuid()), str(path))
    if st.st_mode & 0o022:
        raise UnsafePathError("unsafePath", "%s %s is writable by group or others (mode %04o); "
                              "run: chmod go-w %s" % (what, shown(str(path)), stat.S_IMODE(st.st_mode), path),
                              str(path))


def ensure_directory(path: Path, create: bool = True, mode: int = 0o700) -> bool:
    """Make sure ``path`` is a safe directory, creating it (and its missing
    parents, all ``0700``) when ``create`` is true.

    :returns: whether the directory exists afterwards.
    :raises UnsafePathError: a symlink, foreign owner or unsafe mode.
    :raises StorageError: it exists but is not a directory, or cannot be made.
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return False
        parent = path.parent
        if parent != path and not parent.exists():
            try:
                os.makedirs(parent, mode=0o700, exist_ok=True)
            except OSError as error:
                raise StorageError("io", "cannot create %s: %s" % (shown(str(parent)), error.strerror),
                                   str(parent)) from None
        try:
            os.mkdir(path, mode)
        except FileExistsError:
            pass
        except OSError as error:
            raise StorageError("io", "cannot create %s: %s" % (shown(str(path)), error.strerror), str(path)) from None
        st = os.lstat(path)
    except OSError as error:
        raise StorageError("io", "cannot inspect %s: %s" % (shown(str(path)), error.strerror), str(path)) from None
    check_safe(path, st, "directory")
    if not stat.S_ISDIR(st.st_mode):
        raise StorageError("io", "%s is not a directory" % shown(str(path)), str(path))
    return True


def container_path(group: str, root: Optional[Path] = None) -> Path:
    """The container directory ``<root>/<group>`` (validated, not created)."""
    validate_group(group)
    return (Path(root) if root is not None else container_root()) / group


def wormhole_path(group: str, directory: str = DEFAULT_DIRECTORY, root: Optional[Path] = None,
                  create: bool = False) -> Path:
    """The wormhole directory ``<root>/<group>/<directory>``; with ``create``
    the container and the directory are made (``0700``) and checked."""
    validate_group(group)
    validate_directory(directory)
    container = container_path(group, root)
    path = container / directory
    if create:
        ensure_directory(container)
        ensure_directory(path)
    return path


def temp_name(stem: str) -> str:
    """A v1.2 temporary file name for final file stem ``stem``:
    ``.<stem>.<pid>-<hex>.tmp``."""
    return ".%s.%d-%s.tmp" % (stem, os.getpid(), secrets.token_hex(8))


def atomic_write(directory: Path, final_name: str, data: bytes, stem: Optional[str] = None,
                 durable: bool = False, mode: int = 0o600) -> Path:
    """Replace ``directory/final_name`` with ``data`` atomically (contract v1.2).

    A temporary file ``.<stem>.<pid>-<hex>.tmp`` (``stem`` defaults to
    ``final_name`` without its last suffix) is created ``O_EXCL`` with
    ``mode``, held under ``flock(LOCK_EX)`` while written, optionally
    ``fsync``-ed, and renamed onto the final name; a reader sees the old or
    the new bytes, never a mix.  On any failure the temporary file is removed
    and :class:`StorageError` raised; the old file stays.

    The caller has checked ``directory`` (see :func:`ensure_directory`).
    """
    directory = Path(directory)
    if stem is None:
        stem = final_name.rsplit(".", 1)[0] if "." in final_name else final_name
    tmp_path = directory / temp_name(stem)
    final_path = directory / final_name
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp_path, flags, mode)
    except OSError as error:
        raise StorageError("io", "cannot create %s: %s" % (shown(str(tmp_path)), error.strerror),
                           str(tmp_path)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
        try:
            existing = os.lstat(final_path)
        except FileNotFoundError:
            existing = None
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise StorageError("io", "%s is a directory" % shown(str(final_path)), str(final_path))
        os.rename(tmp_path, final_path)
    except BaseException as error:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        os.close(fd)
        if isinstance(error, OSError) and not isinstance(error, StorageError):
            raise StorageError("io", "cannot write %s: %s" % (shown(str(final_path)), error.strerror),
                               str(final_path)) from None
        raise
    os.close(fd)
    return final_path


def read_file(path: Path, max_bytes: Optional[int] = DEFAULT_MAX_MESSAGE_BYTES) -> Optional[bytes]:
    """Read ``path`` without following a symlink; ``None`` when it does not exist.

    :raises UnsafePathError: a symlink, foreign owner, or unsafe mode.
    :raises TooLargeError: (``messageTooLarge``) larger than ``max_bytes``.
    :raises StorageError: any other failure, or not a regular file.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafePathError("unsafePath", "file %s is a symbolic link; it is not followed" % shown(str(path)),
                                  str(path)) from None
        raise StorageError("io", "cannot open %s: %s" % (shown(str(path)), error.strerror), str(path)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StorageError("io", "%s is not a regular file" % shown(str(path)), str(path))
        check_safe(path, st, "file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise TooLargeError("messageTooLarge", "%s is %d bytes, over the limit of %d bytes"
                                % (shown(str(path)), st.st_size, max_bytes), str(path))
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if max_bytes is not None and total > max_bytes:
                raise TooLargeError("messageTooLarge", "%s grew over the limit of %d bytes while read"
                                    % (shown(str(path)), max_bytes), str(path))
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as error:
        if isinstance(error, StorageError):
            raise
        raise StorageError("io", "cannot read %s: %s" % (shown(str(path)), error.strerror), str(path)) from None
    finally:
        os.close(fd)


def remove_stale_temps(directory: Path, now: Optional[float] = None) -> int:
    """Remove temporary files of killed writers in ``directory`` (v1.2: a
    ``.*.tmp`` file whose flock can be taken and older than 10 minutes).

    :returns: how many were removed.
    """
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < STALE_TEMP_SECONDS:
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:
            os.unlink(entry.path)
            removed += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed

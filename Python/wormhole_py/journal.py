# SPDX-License-Identifier: Apache-2.0
"""The journal: a lossless, ordered log per identifier (contract 1.4, section 6).

The byte format is ``docs/journal-format.md`` (version 1): the directory
``<root>/<G>/<D>/<I>.journal/`` (0700) holds segments ``NNNN….seg`` (20
decimal digits, the first record's sequence number), ``append.lock``,
``sync.lock``, consumer cursors ``NAME.cursor`` and their locks
``NAME.consumer.lock``.  A segment is a 16-byte header (``WHJL``, version 1,
3 zero bytes, first sequence number) and frames::

    u32 length (0xFFFFFFFF: a seal) | u64 sequence | u64 time (ns) | payload | u32 CRC-32C

all little-endian, the CRC over the frame's first ``20 + length`` bytes.

:class:`Journal` appends (under ``flock`` on ``append.lock``: the torn tail of
a killed appender is cut, damage followed by data refuses the append, the
next number is after the last whole frame and every stored consumer cursor),
then posts ``<G>/<D>/<I>/journal`` with the last sequence number and makes one
call the bus answers.  :meth:`Journal.scan` walks every frame and reports
each range it cannot read (``missing``, ``truncated``, ``foreign``,
``checksum``; ``retention`` before the first segment); nothing is skipped
silently.  :class:`JournalReader` follows the journal from a sequence number
or a durable consumer's cursor.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat as _stat
import struct
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _contract
from ._closing import Posting
from ._crc32c import crc32c
from ._deprecated import container_root_keyword
from ._journal_format import (
    _SEGMENT,
    _U32,
    _U64,
    DEFAULT_SEGMENT_SIZE,
    HEADER,
    MAGIC,
    MAX_RECORD,
    MAX_SEQUENCE,
    SEAL,
    VERSION,
    Cursor,
    Gap,
    JournalError,
    Record,
    Scan,
    _build_frame,
    _describe_bad,
    _frame_at,
    _frame_reaches_end,
    _header,
    _parse_cursor,
    _valid_consumer,
    compact_json,
    segment_name,
)
from ._journal_reader import JournalFeed, JournalReader
from ._journal_scan import ScanningJournal
from ._reactor import AsyncioReactor, GLibReactor
from ._subscription import Failure, Subscription
from ._wire import require, transport
from .errors import InvalidInputError, StorageError, WormholeError

__all__ = [
    "DEFAULT_SEGMENT_SIZE",
    "MAX_RECORD",
    "Cursor",
    "Gap",
    "Journal",
    "JournalError",
    "JournalReader",
    "Record",
    "Scan",
    "compact_json",
]

Item = Union[Record, Gap]


class Journal(ScanningJournal, Posting):
    """The journal of ``identifier`` in wormhole ``directory`` of ``group``.

    :param segment_size: start a new segment once the current one reached this many bytes.
    :param durable: ``fdatasync`` each append (group commit through ``sync.lock``).
    :param bus_address: / :param bus: where appends are posted; ``post=False`` posts nothing.
    :param container_root: the container root (default: contract section 2);
        ``root=`` is accepted as its deprecated spelling.
    """

    def __init__(self, group: str, identifier: str, directory: str = _contract.DEFAULT_DIRECTORY, *,
                 container_root: "Optional[os.PathLike[str]]" = None, bus_address: Optional[str] = None,
                 bus: Any = None, post: bool = True, segment_size: int = DEFAULT_SEGMENT_SIZE,
                 durable: bool = False, root: "Optional[os.PathLike[str]]" = None) -> None:
        from . import container as _container
        given_root = container_root_keyword(container_root, root, "Journal")
        _contract.validate_group(group)
        _contract.validate_directory(directory)
        _contract.validate_identifier(identifier)
        self.group = group
        self.directory = directory
        self.identifier = identifier
        self.container = _container.container_path(group, None if given_root is None else Path(given_root))
        self.wormhole = self.container / directory
        self.path = self.wormhole / (identifier + ".journal")
        self.name = "%s/%s/%s/journal" % (group, directory, identifier)
        self.bus_address = bus_address
        self._bus = bus
        self._own_bus = bus is None
        self._async: Any = None
        self._defer_post = False
        self._post_enabled = post
        self.segment_size = segment_size
        self.durable = durable
        #: The error of the last post that did not go out (``None`` when it did).
        self.last_post_error: Optional[WormholeError] = None
        # The appender's view: (segment first, segment size, next sequence).
        self._view: Optional[Tuple[int, int, int]] = None

    # -- the directory -------------------------------------------------------

    def _exists(self) -> bool:
        from . import container as _container
        for directory in (self.container, self.wormhole, self.path):
            try:
                st = os.lstat(directory)
            except FileNotFoundError:
                return False
            _container.check_safe(directory, st, "directory")
            if not _stat.S_ISDIR(st.st_mode):
                raise JournalError("journalCorrupt", "%s is not a directory" % _contract.shown(str(directory)),
                                   str(directory))
        return True

    def _ensure(self) -> None:
        from . import container as _container
        for directory in (self.container, self.wormhole, self.path):
            _container.ensure_directory(directory)

    def _listing(self) -> Tuple[List[Tuple[int, str]], List[str]]:
        """The segments (first, name) sorted, and the consumer names; any
        entry that does not belong is a ``journalCorrupt`` error."""
        segments: List[Tuple[int, str]] = []
        consumers: List[str] = []
        for name in os.listdir(self.path):
            if _SEGMENT.match(name) and name != segment_name(0):
                segments.append((int(name[:20]), name))
            elif name in ("append.lock", "sync.lock"):
                continue
            elif name.startswith(".") and name.endswith(".tmp"):
                continue
            elif name.endswith(".cursor") and _valid_consumer(name[:-7]):
                consumers.append(name[:-7])
            elif name.endswith(".consumer.lock") and _valid_consumer(name[:-14]):
                continue
            else:
                raise JournalError("journalCorrupt", "'%s' is not part of the journal %s: move it out of the directory"
                                   % (name, _contract.shown(str(self.path))), str(self.path / name))
        segments.sort()
        return segments, sorted(consumers)

    def _read_segment(self, name: str) -> Tuple[Optional[bytes], str]:
        """The bytes of a segment, or ``(None, why)`` when the name is held by
        something other than a regular file."""
        path = self.path / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None, "missing"
        except OSError as error:
            if error.errno == errno.ELOOP:
                return None, "a symbolic link"
            raise StorageError("io", "cannot open %s: %s" % (_contract.shown(str(path)), error.strerror),
                               str(path)) from None
        try:
            st = os.fstat(fd)
            if not _stat.S_ISREG(st.st_mode):
                return None, "not a regular file"
            chunks = []
            while True:
                chunk = os.read(fd, 1 << 22)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks), ""
        finally:
            os.close(fd)

    def cursors(self) -> Tuple[Dict[str, Cursor], Dict[str, str]]:
        """The stored consumer cursors, and the consumers whose cursor cannot be read (name -> reason)."""
        good: Dict[str, Cursor] = {}
        bad: Dict[str, str] = {}
        if not self._exists():
            return good, bad
        _, consumers = self._listing()
        for consumer in consumers:
            try:
                cursor = self.read_cursor(consumer)
                if cursor is not None:
                    good[consumer] = cursor
            except JournalError as error:
                bad[consumer] = str(error)
        return good, bad

    def read_cursor(self, consumer: str) -> Optional[Cursor]:
        """Consumer ``consumer``'s stored cursor, ``None`` when it has none.

        :raises JournalError: (``invalidCursor``) the file does not parse.
        """
        path = self.path / (consumer + ".cursor")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise JournalError("invalidCursor", "cursor file '%s' of consumer '%s' cannot be opened: %s"
                               % (path, consumer, error.strerror), str(path)) from None
        try:
            if not _stat.S_ISREG(os.fstat(fd).st_mode):
                raise JournalError("invalidCursor", "cursor file '%s' of consumer '%s' is not a regular file"
                                   % (path, consumer), str(path))
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        cursor = _parse_cursor(data)
        if cursor is None:
            shown = data.decode("utf-8", "replace").strip()
            raise JournalError(
                "invalidCursor", "cursor file '%s' of consumer '%s' does not parse (not "
                '{"format":1,"acknowledged":N,"delivering":N} with non-negative integers): \'%s\'; remove it to start '
                'the consumer afresh, or write {"format":1,"acknowledged":N,"delivering":N}'
                % (path, consumer, shown[:200]), str(path))
        return cursor

    def write_cursor(self, consumer: str, cursor: Cursor) -> None:
        """Replace the consumer's cursor atomically (``.NAME.cursor.tmp``, then rename)."""
        tmp = self.path / (".%s.cursor.tmp" % consumer)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, cursor.to_bytes())
        finally:
            os.close(fd)
        os.rename(tmp, self.path / (consumer + ".cursor"))

    # -- walking -----------------------------------------------------------------

    def stat(self) -> Dict[str, Any]:
        """The object ``journal stat`` prints."""
        scan = self.scan()
        good, bad = self.cursors()
        out: Dict[str, Any] = {
            "identifier": self.identifier, "first": scan.first, "last": scan.last, "records": scan.records,
            "bytes": scan.bytes, "segments": scan.segments,
            "consumers": {name: cursor.acknowledged for name, cursor in sorted(good.items())},
        }
        if bad:
            out["badConsumers"] = dict(sorted(bad.items()))
        out["damaged"] = [gap.as_json() for gap in scan.damaged]
        return out

    # -- appending ---------------------------------------------------------------

    def _lock(self, name: str) -> int:
        from . import container as _container
        path = self.path / name
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _container.check_safe(path, os.fstat(fd), "lock file")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _create_segment(self, first: int) -> None:
        name = segment_name(first)
        tmp = self.path / (".%s.tmp" % name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, _header(first))
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, self.path / name)
        if self.durable:
            self._datasync(self.path)

    def _find_end(self) -> Tuple[int, int, int]:
        """Under ``append.lock``: the last segment's first number, the end of
        its last whole frame (a torn tail is cut), and the next number."""
        segments, consumers = self._listing()
        view = self._view
        if view is not None and segments and segments[-1][0] == view[0]:
            try:
                size = os.lstat(self.path / segments[-1][1]).st_size
            except OSError:
                size = -1
            if size == view[1]:
                return view
            if size > view[1]:
                found = self._scan_tail(view[0], view[1], view[2], full=False)
                if found is not None:
                    return found
        highest_cursor = 0
        for consumer in consumers:
            try:
                cursor = self.read_cursor(consumer)
            except JournalError:
                continue
            if cursor is not None:
                highest_cursor = max(highest_cursor, cursor.delivering)
        if not segments:
            first = highest_cursor + 1
            self._create_segment(first)
            return first, HEADER, first
        first = segments[-1][0]
        found = self._scan_tail(first, HEADER, first, full=True)
        assert found is not None
        first, end, expected = found
        return first, end, max(expected, highest_cursor + 1)

    def _scan_tail(self, first: int, offset: int, expected: int, full: bool) -> Optional[Tuple[int, int, int]]:
        """Read the last segment from ``offset`` (expecting number
        ``expected``), following seals; cut a torn tail; refuse damage.  With
        ``full`` false, ``None`` when the segment is not as remembered."""
        name = segment_name(first)
        start_offset = offset
        while True:
            path = self.path / name
            data, why = self._read_segment(name)
            if data is None:
                raise JournalError("journalCorrupt", "the last segment name '%s' is held by %s; move it out of the "
                                   "journal" % (path, why), str(path))
            if data[:4] != MAGIC or len(data) < HEADER:
                raise JournalError("journalCorrupt", "journal segment '%s' has no WHJL header; move it out of the "
                                   "journal" % path, str(path))
            if data[4] != VERSION:
                raise JournalError("journalVersion", "journal segment '%s' is format version %d; this writer writes "
                                   "version %d" % (path, data[4], VERSION), str(path))
            if start_offset > len(data):
                return None
            offset = start_offset
            sealed_at: Optional[int] = None
            while offset < len(data):
                frame = _frame_at(data, offset)
                if frame is not None and frame.valid and frame.sequence >= expected:
                    if frame.seal:
                        sealed_at = frame.sequence
                        offset = frame.end
                        break
                    expected = frame.sequence + 1
                    offset = frame.end
                    continue
                torn = (frame is None and (_frame_reaches_end(data, offset) or not any(memoryview(data)[offset:]))) \
                    or (frame is not None and (frame.end == len(data) or not any(memoryview(data)[frame.end:])))
                if not torn:
                    raise JournalError(
                        "journalCorrupt", "journal segment '%s' is damaged at offset %d: %s; records after it cannot "
                        "be trusted (see docs/journal-format.md, 'Damage')"
                        % (path, offset, _describe_bad(data, offset).split(": ", 1)[1]), str(path))
                # Repair: cut the torn tail.
                fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    os.ftruncate(fd, offset)
                finally:
                    os.close(fd)
                break
            if sealed_at is not None:
                first = sealed_at
                expected = sealed_at
                start_offset = HEADER
                name = segment_name(first)
                if not (self.path / name).exists():
                    self._create_segment(first)
                continue
            return first, offset, expected

    def append(self, payloads: Union[str, bytes, Sequence[Union[str, bytes]]]) -> int:
        """Append one record (a JSON text) or several (a list of texts) in one
        write; post the journal's name with the last sequence number.

        Returns the last sequence number appended.

        :raises InvalidInputError: a payload that is not one UTF-8 JSON text (``invalidJSON``).
        :raises JournalError: over 1 MiB (``recordTooLarge``), damage in the last segment
            (``journalCorrupt``), numbers exhausted (``journalFull``).
        """
        from ._plist import JSONSyntaxError, decode_utf8, parse_json
        if isinstance(payloads, (str, bytes, bytearray)):
            payloads = [payloads]
        elif not isinstance(payloads, (list, tuple)):
            raise InvalidInputError("invalidValue", "Journal.append takes a JSON text or a list of JSON texts, not "
                                    "a %s: append json.dumps(value) to store a value as one record; nothing was "
                                    "appended" % type(payloads).__name__, type(payloads).__name__)
        encoded: List[bytes] = []
        for payload in payloads:
            if not isinstance(payload, (str, bytes, bytearray)):
                raise InvalidInputError("invalidValue", "a record is a JSON text (str or bytes), not a %s: use "
                                        "json.dumps(value); nothing was appended" % type(payload).__name__,
                                        type(payload).__name__)
            data = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
            try:
                parse_json(decode_utf8(data))
            except JSONSyntaxError as error:
                raise InvalidInputError("invalidJSON", "the record is not one JSON text: %s" % error,
                                        data[:200]) from None
            if len(data) > MAX_RECORD:
                raise JournalError("recordTooLarge", "the record is %d bytes, over the journal's limit of %d bytes"
                                   % (len(data), MAX_RECORD), len(data))
            encoded.append(data)
        if not encoded:
            raise InvalidInputError("invalidValue", "nothing to append")
        if self._post_enabled and self._bus is None:
            transport()  # a missing D-Bus library is refused before anything is appended
        self._ensure()
        lock = self._lock("append.lock")
        try:
            first, end, sequence = self._find_end()
            if sequence + len(encoded) - 1 > MAX_SEQUENCE:
                raise JournalError("journalFull", "journal %s has used every sequence number" % self.name, self.name)
            name = segment_name(first)
            if end >= self.segment_size:
                seal = _build_frame(SEAL, sequence, time.time_ns(), b"")
                self._pwrite(name, end, seal)
                if self.durable:
                    self._datasync(self.path / name)
                first, end = sequence, HEADER
                name = segment_name(first)
                self._create_segment(first)
            frames = []
            for index, data in enumerate(encoded):
                frames.append(_build_frame(len(data), sequence + index, time.time_ns(), data))
            self._pwrite(name, end, b"".join(frames))
            last = sequence + len(encoded) - 1
            self._view = (first, end + sum(len(frame) for frame in frames), last + 1)
        except BaseException:
            self._view = None
            raise
        finally:
            os.close(lock)
        if self.durable:
            self._sync(name, self._view[1])
        self._post(last)
        return last

    def _pwrite(self, name: str, offset: int, data: bytes) -> None:
        path = self.path / name
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            try:
                written = 0
                while written < len(data):
                    written += os.pwrite(fd, data[written:], offset + written)
            except OSError as error:
                os.ftruncate(fd, offset)
                raise StorageError("io", "cannot append to %s: %s; nothing was appended"
                                   % (_contract.shown(str(path)), error.strerror), str(path)) from None
        finally:
            os.close(fd)

    def _datasync(self, path: Any) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def _sync(self, name: str, end: int) -> None:
        """Group commit (after ``append.lock`` is released): under
        ``sync.lock``, done when its position (first 16 bytes, checked by the
        CRC-32C in the next 4) covers ``end`` of segment ``name``; else
        ``fdatasync`` the segment and store the position, unless a later
        segment's position is stored already (then only synchronise)."""
        first = int(name[:20])
        lock = self._lock("sync.lock")
        try:
            stored = os.pread(lock, 20, 0)
            stored_first = stored_offset = None
            if len(stored) == 20 and _U32.unpack_from(stored, 16)[0] == crc32c(stored[:16]):
                stored_first, stored_offset = struct.unpack_from("<QQ", stored)
                if stored_first == first and stored_offset >= end:
                    return
            self._datasync(self.path / name)
            if stored_first is not None and stored_first > first:
                return
            position = _U64.pack(first) + _U64.pack(end)
            os.pwrite(lock, position + _U32.pack(crc32c(position)), 0)
        finally:
            os.close(lock)

    def _post(self, last: int) -> None:
        self.last_post_error = None
        if not self._post_enabled or self._defer_post:
            return
        try:
            from .bus import Bus
            if self._bus is None:
                self._bus = Bus.connect(self.bus_address)
            self._bus.post(self.name, last)
            self._bus.confirm()
        except WormholeError as error:
            self.last_post_error = error

    # -- retention ---------------------------------------------------------------

    def trim(self, max_bytes: Optional[int] = None, max_age: Optional[float] = None,
             max_records: Optional[int] = None) -> List[str]:
        """Remove whole segments, oldest first, never the last, while one of
        the limits is exceeded; returns the removed file names."""
        if not self._exists():
            return []
        removed: List[str] = []
        lock = self._lock("append.lock")
        try:
            segments, _ = self._listing()
            sizes = []
            for first, name in segments:
                st = os.lstat(self.path / name)
                sizes.append((first, name, st.st_size, st.st_mtime))
            total = sum(size for _, _, size, _ in sizes)
            scan = self.scan()
            last = scan.last
            now = time.time()
            while len(sizes) > 1:
                first, name, size, mtime = sizes[0]
                next_first = sizes[1][0]
                drop = False
                if max_bytes is not None and total > max_bytes:
                    drop = True
                if max_age is not None and now - mtime > max_age:
                    drop = True
                if max_records is not None and last - (next_first - 1) >= max_records:
                    drop = True
                if not drop:
                    break
                os.unlink(self.path / name)
                removed.append(name)
                total -= size
                sizes.pop(0)
        finally:
            os.close(lock)
        return removed

    # -- reading -------------------------------------------------------------------

    def reader(self, start: Union[int, str] = "end", consumer: Optional[str] = None) -> "JournalReader":
        """A :class:`JournalReader` from ``start`` (``"start"``, ``"end"`` or a
        number); with ``consumer`` a durable one (its stored cursor wins)."""
        return JournalReader(self, start, consumer)

    def listen(self, callback: Callable[[Item], None], start: Union[int, str] = "end",
               consumer: Optional[str] = None, *, context: Any = None,
               on_error: Optional[Callable[[Failure], None]] = None,
               on_connection_change: Optional[Callable[[bool, Optional[str], int], None]] = None,
               require_bus: bool = False) -> Subscription[Item]:
        """Call ``callback`` with each :class:`Record` (and each :class:`Gap`,
        in its place) from ``start`` or ``consumer``'s cursor, in a GLib main
        context (``context``, default the thread-default; PyGObject).  Active
        when this returns; records already there are delivered first.
        Cancelling inside the callback stops the batch there (the cursor keeps
        the rest for the next reader).

        :raises JournalError: (``consumerBusy``) the consumer is in use.
        """
        require("gio", "Journal.listen (callbacks in a GLib main context; use listen_async on asyncio)")
        feed = JournalFeed(self.reader(start, consumer))
        subscription: Subscription[Item] = Subscription(GLibReactor(context), feed, callback, on_error,
                                                        on_connection_change)
        try:
            return subscription.start(self.bus_address, require_bus)
        except BaseException:
            feed.close()
            raise

    async def listen_async(self, start: Union[int, str] = "end", consumer: Optional[str] = None, *,
                           callback: Optional[Callable[[Item], None]] = None,
                           on_error: Optional[Callable[[Failure], None]] = None,
                           on_connection_change: Optional[Callable[[bool, Optional[str], int], None]] = None,
                           require_bus: bool = False) -> Subscription[Item]:
        """:meth:`listen` on the running asyncio loop (jeepney): ``async for
        item in subscription`` yields :class:`Record` and :class:`Gap`; with
        a consumer a record is acknowledged when the next one is asked for."""
        require("jeepney", "Journal.listen_async (asyncio)")
        feed = JournalFeed(self.reader(start, consumer))
        subscription: Subscription[Item] = Subscription(AsyncioReactor(), feed, callback, on_error,
                                                        on_connection_change)
        try:
            return await subscription.start_async(self.bus_address, require_bus)
        except BaseException:
            feed.close()
            raise

    async def append_async(self, payloads: Union[str, bytes, Sequence[Union[str, bytes]]]) -> int:
        """:meth:`append`, its post awaited on the running loop."""
        from ._async_send import AsyncSender
        if self._post_enabled:
            require("jeepney", "Journal.append_async (asyncio)")
        self._defer_post = True
        try:
            last = self.append(payloads)
        finally:
            self._defer_post = False
        if self._post_enabled:
            self.last_post_error = None
            try:
                if self._async is None:
                    self._async = AsyncSender(self.bus_address)
                await self._async.post(self.name, last)
            except WormholeError as error:
                self.last_post_error = error
        return last

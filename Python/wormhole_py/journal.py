"""The journal: a lossless, ordered log per identifier (contract 1.3, section 6).

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
import json
import os
import re
import stat as _stat
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _contract
from ._crc32c import crc32c
from .errors import InvalidInputError, StorageError, WormholeError

__all__ = [
    "Journal", "JournalReader", "JournalError", "Record", "Gap", "Scan", "Cursor", "compact_json",
    "MAGIC", "VERSION", "SEAL", "MAX_RECORD", "DEFAULT_SEGMENT_SIZE", "MAX_SEQUENCE", "segment_name",
]

MAGIC = b"WHJL"
VERSION = 1
HEADER = 16
HEAD = 20
TRAILER = 4
FRAME_OVERHEAD = HEAD + TRAILER
SEAL = 0xFFFFFFFF
#: A record's payload is at most 1 MiB.
MAX_RECORD = 1 << 20
DEFAULT_SEGMENT_SIZE = 8 * 1024 * 1024
#: The highest sequence number a record may have (the next must fit 64 bits).
MAX_SEQUENCE = 2 ** 64 - 2
#: A durable consumer's batch is at most this many records.
BATCH = 256

_SEGMENT = re.compile(r"[0-9]{20}\.seg\Z")
_HEAD = struct.Struct("<IQQ")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class JournalError(WormholeError):
    """A journal operation failed.  Codes: ``journalCorrupt`` (damage that
    refuses an append, or a file that does not belong), ``journalVersion``,
    ``invalidCursor``, ``consumerBusy``, ``tooLarge``, ``journalFull``."""


def segment_name(first: int) -> str:
    """The file name of the segment whose first record is ``first``."""
    return "%020d.seg" % first


def compact_json(text: str) -> str:
    """A valid JSON text without its insignificant whitespace; nothing else
    changes (numbers and strings stay exactly as written)."""
    return _WHITESPACE_OR_STRING.sub(_keep_strings, text)


_WHITESPACE_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|[ \t\n\r]+', re.S)


def _keep_strings(match: "re.Match[str]") -> str:
    token = match.group(0)
    return token if token.startswith('"') else ""


@dataclass
class Record:
    """One record: its sequence number, append time (ns since 1970), the
    payload's JSON text as stored, and where it is."""

    sequence: int
    time: int
    payload: bytes
    file: str
    offset: int

    @property
    def text(self) -> str:
        """The payload as a string."""
        return self.payload.decode("utf-8")

    def message(self) -> Any:
        """The payload decoded with :func:`json.loads` (``1e400`` becomes ``inf``; use :attr:`text` to keep it)."""
        return json.loads(self.text)


@dataclass
class Gap:
    """A range of sequence numbers that cannot be delivered: ``reason`` is
    ``missing``, ``truncated``, ``foreign``, ``checksum`` (damage) or
    ``retention`` (removed on purpose, never damage); ``file`` is the segment's
    name (for a missing one, the name it should have)."""

    first: int
    last: int
    file: str
    reason: str
    detail: str = ""

    @property
    def is_damage(self) -> bool:
        """Whether this range is damage (everything but retention)."""
        return self.reason != "retention"

    def as_json(self) -> Dict[str, Any]:
        """The ``{"from":A,"to":B,"file":F,"reason":R,"detail":…}`` object of ``journal stat``."""
        out: Dict[str, Any] = {"from": self.first, "to": self.last, "file": self.file, "reason": self.reason}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class Position:
    """Where a walk stopped: the segment to read next (by its first number),
    the offset in it, and the next expected sequence number."""

    segment: Optional[int]
    offset: int
    expected: int
    waiting_on_damage: bool = False


@dataclass
class Scan:
    """The result of a full walk: counts, damage, and the end position."""

    first: int = 1
    last: int = 0
    records: int = 0
    bytes: int = 0
    segments: int = 0
    gaps: List[Gap] = field(default_factory=list)
    end: Optional[Position] = None

    @property
    def damaged(self) -> List[Gap]:
        """The damaged ranges (retention excluded)."""
        return [gap for gap in self.gaps if gap.is_damage]


@dataclass
class Cursor:
    """A durable consumer's cursor: records up to ``acknowledged`` were
    handled; ``acknowledged+1 … delivering`` were handed out."""

    acknowledged: int
    delivering: int

    def to_bytes(self) -> bytes:
        """The cursor file's one line of JSON."""
        return b'{"format":1,"acknowledged":%d,"delivering":%d}\n' % (self.acknowledged, self.delivering)


class _Frame:
    __slots__ = ("length", "sequence", "time", "end", "stored", "computed")

    def __init__(self, length: int, sequence: int, time_ns: int, end: int, stored: int, computed: int) -> None:
        self.length = length
        self.sequence = sequence
        self.time = time_ns
        self.end = end
        self.stored = stored
        self.computed = computed

    @property
    def seal(self) -> bool:
        return self.length == SEAL

    @property
    def valid(self) -> bool:
        return self.stored == self.computed


def _frame_at(data: bytes, offset: int) -> Optional[_Frame]:
    """The frame at ``offset`` with its stored and computed checksums, or
    ``None`` when it is incomplete or its length is impossible."""
    if len(data) - offset < FRAME_OVERHEAD:
        return None
    length, sequence, time_ns = _HEAD.unpack_from(data, offset)
    payload = 0 if length == SEAL else length
    if payload > MAX_RECORD:
        return None
    end = offset + HEAD + payload + TRAILER
    if end > len(data):
        return None
    stored = _U32.unpack_from(data, end - TRAILER)[0]
    computed = crc32c(memoryview(data)[offset:end - TRAILER])
    return _Frame(length, sequence, time_ns, end, stored, computed)


def _describe_bad(data: bytes, offset: int) -> str:
    frame = _frame_at(data, offset)
    if frame is None:
        if len(data) - offset < FRAME_OVERHEAD:
            return "offset %d: incomplete frame (%d bytes left)" % (offset, len(data) - offset)
        length = _U32.unpack_from(data, offset)[0]
        return "offset %d: impossible length %d" % (offset, length)
    return "offset %d: checksum mismatch (stored 0x%08X, computed 0x%08X)" % (offset, frame.stored, frame.computed)


def _build_frame(length: int, sequence: int, time_ns: int, payload: bytes) -> bytes:
    head = _HEAD.pack(length, sequence, time_ns) + payload
    return head + _U32.pack(crc32c(head))


def _header(first: int) -> bytes:
    return MAGIC + bytes([VERSION, 0, 0, 0]) + _U64.pack(first)


def _parse_cursor(data: bytes) -> Optional[Cursor]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("format") != 1:
        return None
    a, d = value.get("acknowledged"), value.get("delivering")
    for number in (a, d):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0 or number > MAX_SEQUENCE:
            return None
    return Cursor(a, d)


def validate_consumer(name: str) -> str:
    """Check a consumer name (the identifier rules)."""
    return _contract.validate_component(name, "consumer", "invalidConsumer", _contract.MAX_IDENTIFIER_BYTES)


class Journal:
    """The journal of ``identifier`` in wormhole ``directory`` of ``group``.

    :param segment_size: start a new segment once the current one reached this many bytes.
    :param durable: ``fdatasync`` each append (group commit through ``sync.lock``).
    :param bus_address: / :param bus: where appends are posted; ``post=False`` posts nothing.
    """

    def __init__(self, group: str, identifier: str, directory: str = _contract.DEFAULT_DIRECTORY, *,
                 container_root: Optional[os.PathLike] = None, bus_address: Optional[str] = None, bus: Any = None,
                 post: bool = True, segment_size: int = DEFAULT_SEGMENT_SIZE, durable: bool = False) -> None:
        from . import container as _container
        _contract.validate_group(group)
        _contract.validate_directory(directory)
        _contract.validate_identifier(identifier)
        self.group = group
        self.directory = directory
        self.identifier = identifier
        self.container = _container.container_path(group, container_root)
        self.wormhole = self.container / directory
        self.path = self.wormhole / (identifier + ".journal")
        self.name = "%s/%s/%s/journal" % (group, directory, identifier)
        self.bus_address = bus_address
        self._bus = bus
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
                good[consumer] = self.read_cursor(consumer)
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

    def walk(self, start: Optional[Position] = None, records: bool = True) -> Iterator[Union[Record, Gap, Position]]:
        """Walk the journal from ``start`` (default: the first segment),
        yielding each :class:`Record` and :class:`Gap` in sequence order and,
        last, the :class:`Position` where a later walk goes on.

        ``retention`` gaps are yielded for numbers before the first segment
        when ``start`` names an earlier number.
        """
        if not self._exists():
            expected = start.expected if start is not None else 1
            yield Position(None, HEADER, expected)
            return
        segments, _ = self._listing()
        if not segments:
            yield Position(None, HEADER, start.expected if start is not None else 1)
            return
        expected = start.expected if start is not None else None
        offset = start.offset if start is not None and start.segment is not None else HEADER
        index = 0
        if start is not None and start.segment is not None:
            # Go on in the segment we stopped in, if it is still there; else at the first after it.
            index = 0
            while index < len(segments) and segments[index][0] < start.segment:
                index += 1
            if index >= len(segments) or segments[index][0] != start.segment:
                offset = HEADER
        elif start is not None:
            # Start at the segment holding start.expected.
            index = 0
            while index + 1 < len(segments) and segments[index + 1][0] <= start.expected:
                index += 1
            offset = HEADER
        if expected is not None and index == 0 and segments[0][0] > expected and offset == HEADER:
            yield Gap(expected, segments[0][0] - 1, segments[0][1], "retention",
                      "records before %d were removed by retention" % segments[0][0])
            expected = segments[0][0]
        while index < len(segments):
            first, name = segments[index]
            next_first = segments[index + 1][0] if index + 1 < len(segments) else None
            last_segment = next_first is None
            if expected is None:
                expected = first
                if first > 1 and start is None:
                    yield Gap(1, first - 1, name, "retention", "records before %d were removed by retention" % first)
            if offset == HEADER and first > expected:
                # The segment expected (named by a seal or the listing) is absent.
                if index == 0:
                    yield Gap(expected, first - 1, name, "retention",
                              "records before %d were removed by retention" % first)
                else:
                    yield Gap(expected, first - 1, segment_name(expected), "missing",
                              "segment file %s is missing" % segment_name(expected))
                expected = first
            data, why = self._read_segment(name)
            if data is not None and offset == HEADER:
                problem = ""
                if data[:4] != MAGIC:
                    problem = "it does not start with the WHJL header"
                elif len(data) >= 5 and data[4] != VERSION:
                    raise JournalError("journalVersion", "journal segment '%s' is format version %d; this reader "
                                       "reads version %d" % (self.path / name, data[4], VERSION), str(self.path / name))
                elif len(data) < HEADER:
                    problem = "its header is incomplete (%d bytes)" % len(data)
                elif _U64.unpack_from(data, 8)[0] != first:
                    problem = "its header names first record %d" % _U64.unpack_from(data, 8)[0]
                if problem:
                    if last_segment and len(data) < HEADER and MAGIC.startswith(data[:4]):
                        # A header being created: nothing there yet.
                        yield Position(first, HEADER, expected)
                        return
                    data, why = None, problem
            if data is None:
                upper = (next_first - 1) if next_first is not None else expected
                if upper >= expected:
                    yield Gap(expected, upper, name, "foreign", "segment name %s is held by %s" % (name, why))
                if next_first is None:
                    yield Position(first, HEADER, expected, waiting_on_damage=True)
                    return
                expected = next_first
                index += 1
                offset = HEADER
                continue
            sealed = False
            while True:
                frame = _frame_at(data, offset)
                if frame is not None and frame.valid and frame.sequence < expected and not frame.seal:
                    offset = frame.end  # a record before the start: not delivered
                    continue
                if frame is not None and frame.valid and frame.sequence <= MAX_SEQUENCE + 1 and (
                        frame.sequence >= expected):
                    if frame.sequence > expected:
                        yield Gap(expected, frame.sequence - 1, name, "truncated",
                                  "the frame at offset %d is numbered %d where %d was expected"
                                  % (offset, frame.sequence, expected))
                        expected = frame.sequence
                    if frame.seal:
                        sealed = True
                        offset = frame.end
                        break
                    if frame.sequence > MAX_SEQUENCE:
                        yield Gap(frame.sequence, frame.sequence, name, "checksum",
                                  "offset %d: record number %d is past the last allowed" % (offset, frame.sequence))
                    elif records:
                        yield Record(frame.sequence, frame.time,
                                     data[offset + HEAD:frame.end - TRAILER], name, offset)
                    else:
                        yield Record(frame.sequence, frame.time, b"", name, offset)
                    expected = frame.sequence + 1
                    offset = frame.end
                    continue
                if offset >= len(data):
                    break  # the segment's end
                # A frame that is not whole and valid.
                tail_torn = frame is None and (
                    _frame_reaches_end(data, offset) or not any(memoryview(data)[offset:]))
                if frame is not None and frame.valid is False and (frame.end == len(data) or
                                                                    not any(memoryview(data)[frame.end:])):
                    tail_torn = True
                if tail_torn:
                    break  # a torn or incomplete tail: not (yet) a record
                detail = _describe_bad(data, offset)
                found = self._resync(data, offset, expected, next_first)
                if found is not None:
                    resume, number = found
                    yield Gap(expected, number - 1, name, "checksum",
                              "%s; records resume at offset %d" % (detail, resume))
                    expected = number
                    offset = resume
                    continue
                if next_first is not None:
                    if next_first - 1 >= expected:
                        yield Gap(expected, next_first - 1, name, "checksum", detail + "; nothing readable after it")
                    expected = next_first
                    offset = len(data)
                    break
                yield Gap(expected, expected, name, "checksum", detail + "; nothing readable after it yet")
                yield Position(first, offset, expected, waiting_on_damage=True)
                return
            if sealed:
                index += 1
                if next_first is None:
                    yield Position(expected, HEADER, expected)
                    return
                offset = HEADER
                continue
            if next_first is None:
                yield Position(first, offset, expected)
                return
            # Ended without a seal, and a later segment exists.
            if next_first - 1 >= expected:
                yield Gap(expected, next_first - 1, name, "truncated",
                          "segment %s ends at offset %d without a seal" % (name, offset))
            expected = next_first
            index += 1
            offset = HEADER
        yield Position(None, HEADER, expected if expected is not None else 1)

    def _resync(self, data: bytes, bad: int, expected: int, next_first: Optional[int]) -> Optional[Tuple[int, int]]:
        """The next valid frame after damage at ``bad``: ``(offset, number)``."""
        view = data
        for candidate in range(bad + 1, len(data) - FRAME_OVERHEAD + 1):
            length = _U32.unpack_from(view, candidate)[0]
            if length != SEAL and length > MAX_RECORD:
                continue
            sequence = _U64.unpack_from(view, candidate + 4)[0]
            if sequence <= expected:
                continue
            if next_first is not None and sequence >= next_first + (1 if length == SEAL else 0):
                continue
            if next_first is None and sequence - expected > (candidate - bad) // FRAME_OVERHEAD + 1:
                continue
            frame = _frame_at(data, candidate)
            if frame is not None and frame.valid:
                return candidate, sequence
        return None

    def scan(self) -> Scan:
        """Walk every frame from the first segment (``journal check`` / ``stat``)."""
        result = Scan()
        first_seen: Optional[int] = None
        if self._exists():
            segments, _ = self._listing()
            result.segments = len(segments)
            for _, name in segments:
                try:
                    st = os.lstat(self.path / name)
                    if _stat.S_ISREG(st.st_mode):
                        result.bytes += st.st_size
                except OSError:
                    pass
            if segments:
                first_seen = segments[0][0]
        for item in self.walk(records=False):
            if isinstance(item, Record):
                result.records += 1
                result.last = max(result.last, item.sequence)
            elif isinstance(item, Gap):
                result.gaps.append(item)
                if item.is_damage:
                    result.last = max(result.last, item.last)
            else:
                result.end = item
        result.first = first_seen if first_seen is not None else 1
        if result.end is not None:
            result.last = max(result.last, result.end.expected - 1)
        if result.last < result.first - 1:
            result.last = result.first - 1
        return result

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
        :raises JournalError: over 1 MiB (``tooLarge``), damage in the last segment
            (``journalCorrupt``), numbers exhausted (``journalFull``).
        """
        from .defaults import JSONSyntaxError, decode_utf8, parse_json
        if isinstance(payloads, (str, bytes, bytearray)):
            payloads = [payloads]
        encoded: List[bytes] = []
        for payload in payloads:
            data = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
            try:
                parse_json(decode_utf8(data))
            except JSONSyntaxError as error:
                raise InvalidInputError("invalidJSON", "the record is not one JSON text: %s" % error,
                                        data[:200]) from None
            if len(data) > MAX_RECORD:
                raise JournalError("tooLarge", "the record is %d bytes, over the journal's limit of %d bytes"
                                   % (len(data), MAX_RECORD), len(data))
            encoded.append(data)
        if not encoded:
            raise InvalidInputError("invalidValue", "nothing to append")
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
        if not self._post_enabled:
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


def _valid_consumer(name: str) -> bool:
    try:
        validate_consumer(name)
        return True
    except InvalidInputError:
        return False


def _frame_reaches_end(data: bytes, offset: int) -> bool:
    """Whether the incomplete frame at ``offset`` claims to run to or past the end of the file."""
    if len(data) - offset < 4:
        return True
    length = _U32.unpack_from(data, offset)[0]
    if length != SEAL and length > MAX_RECORD:
        return False
    payload = 0 if length == SEAL else length
    return offset + HEAD + payload + TRAILER >= len(data)


class JournalReader:
    """Reads a journal in sequence order from a start, reporting each range it
    cannot deliver once, in its place.  :meth:`read` returns what is new since
    the last call (call it on each ``Posted`` of the journal's name).

    With a consumer, the reader holds ``NAME.consumer.lock`` (a second reader
    of the same consumer is refused: ``consumerBusy``) and stores the cursor
    around each batch (at-least-once).
    """

    def __init__(self, journal: Journal, start: Union[int, str] = "end", consumer: Optional[str] = None) -> None:
        self.journal = journal
        self.consumer = consumer
        self._lock_fd: Optional[int] = None
        self.redeliver_until = 0
        cursor: Optional[Cursor] = None
        if consumer is not None:
            validate_consumer(consumer)
            journal._ensure()
            path = journal.path / (consumer + ".consumer.lock")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise JournalError("consumerBusy", "consumer '%s' of journal '%s' is in use by another process"
                                   % (consumer, journal.identifier), consumer) from None
            self._lock_fd = fd
            cursor = journal.read_cursor(consumer)
        if cursor is not None:
            expected = cursor.acknowledged + 1
            self.redeliver_until = cursor.delivering
            self.acknowledged = cursor.acknowledged
        elif start == "start":
            expected = 1
        elif start == "end":
            expected = journal.scan().last + 1
        else:
            if isinstance(start, bool) or not isinstance(start, int) or start < 1:
                raise InvalidInputError("invalidValue", "start %r is not start, end or a sequence number" % (start,),
                                        start)
            expected = start
        if cursor is None:
            self.acknowledged = expected - 1
        self._position = Position(None, HEADER, expected)
        self._reported_waiting: Optional[Tuple[int, int]] = None
        # The highest number a reported gap covered (a gap is reported once).
        self._reported_through = 0

    @property
    def next_sequence(self) -> int:
        """The number of the next record this reader delivers."""
        return self._position.expected

    def read(self) -> List[Union[Record, Gap]]:
        """The records and gaps after the last call, in order (gaps before
        the reader's start are left out)."""
        out: List[Union[Record, Gap]] = []
        start = self._position
        for item in self.journal.walk(start if start.segment is not None else Position(None, HEADER, start.expected)):
            if isinstance(item, Position):
                if item.waiting_on_damage:
                    mark = (item.segment or 0, item.offset)
                    # A gap at a damaged last segment is reported once.
                    if out and isinstance(out[-1], Gap) and self._reported_waiting == mark:
                        out.pop()
                    self._reported_waiting = mark
                    self._position = Position(item.segment, item.offset, item.expected)
                else:
                    self._position = item
                break
            if isinstance(item, Record):
                if item.sequence < start.expected:
                    continue
                out.append(item)
            else:
                floor = max(start.expected, self._reported_through + 1)
                if item.last < floor:
                    continue
                if item.first < floor:
                    item.first = floor
                out.append(item)
        for item in out:
            if isinstance(item, Gap):
                self._reported_through = max(self._reported_through, item.last)
        return out

    def begin_batch(self, records: List[Record]) -> None:
        """Before handing out ``records``: store the cursor (acknowledged so far, delivering the batch's last)."""
        if self.consumer is not None and records:
            self.journal.write_cursor(self.consumer, Cursor(self.acknowledged, records[-1].sequence))

    def end_batch(self, records: List[Record]) -> None:
        """After ``records`` were handled: store both as the batch's last."""
        if records:
            self.acknowledged = records[-1].sequence
            if self.consumer is not None:
                self.journal.write_cursor(self.consumer, Cursor(self.acknowledged, self.acknowledged))

    def close(self) -> None:
        """Release the consumer lock."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

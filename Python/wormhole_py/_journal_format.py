# SPDX-License-Identifier: Apache-2.0
"""The journal's byte format (``docs/journal-format.md``, version 1): segment
headers, frames, cursors, and the values a scan reports (internal;
:mod:`wormhole_py.journal` exports :class:`Record`, :class:`Gap`,
:class:`Scan` and :class:`Cursor`)."""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, cast

from . import _contract
from ._crc32c import crc32c
from .errors import InvalidInputError, WormholeError

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
    ``invalidCursor``, ``consumerBusy``, ``recordTooLarge``, ``journalFull``."""


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
    __slots__ = ("computed", "end", "length", "sequence", "stored", "time")

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
    return Cursor(cast(int, a), cast(int, d))


def validate_consumer(name: str) -> str:
    """Check a consumer name (the identifier rules)."""
    return _contract.validate_component(name, "consumer", "invalidConsumer", _contract.MAX_IDENTIFIER_BYTES)



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



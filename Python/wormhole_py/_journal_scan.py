# SPDX-License-Identifier: Apache-2.0
"""Reading a journal in order: every frame walked, every range that cannot
be read reported once, in its place (internal; :class:`Journal` has these
methods)."""

from __future__ import annotations

import os
import stat as _stat
from pathlib import Path
from typing import Iterator, List, Optional, Tuple, Union

from ._journal_format import (
    _U32,
    _U64,
    FRAME_OVERHEAD,
    HEAD,
    HEADER,
    MAGIC,
    MAX_RECORD,
    MAX_SEQUENCE,
    SEAL,
    TRAILER,
    VERSION,
    Gap,
    JournalError,
    Position,
    Record,
    Scan,
    _describe_bad,
    _frame_at,
    _frame_reaches_end,
    segment_name,
)


class ScanningJournal:
    """The reading half of :class:`~wormhole_py.journal.Journal`."""

    path: Path

    def _exists(self) -> bool:
        raise NotImplementedError

    def _listing(self) -> Tuple[List[Tuple[int, str]], List[str]]:
        raise NotImplementedError

    def _read_segment(self, name: str) -> Tuple[Optional[bytes], str]:
        raise NotImplementedError

    def walk(self, start: Optional[Position] = None, records: bool = True) -> Iterator[Union[Record, Gap, Position]]:
        """Walk the journal from ``start`` (default: the first segment),
        yielding each :class:`Record` and :class:`Gap` in sequence order and,
        last, the :class:`Position` where a later walk goes on.

        ``retention`` gaps are yielded for numbers before the first segment
        when ``start`` names an earlier number.
        """
        if not self._exists():
            yield Position(None, HEADER, start.expected if start is not None else 1)
            return
        segments, _ = self._listing()
        if not segments:
            yield Position(None, HEADER, start.expected if start is not None else 1)
            return
        expected: Optional[int] = start.expected if start is not None else None
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


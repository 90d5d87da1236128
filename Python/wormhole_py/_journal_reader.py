# SPDX-License-Identifier: Apache-2.0
"""Following a journal: :class:`JournalReader` (records after a start or a
consumer's cursor) and the subscription feed behind :meth:`Journal.listen`
and :meth:`Journal.listen_async` (internal; :mod:`wormhole_py.journal`
exports the reader).

The feed is woken by the journal's ``Posted`` (every append posts its last
sequence number) and, while the bus is away, by its segments changing
(inotify on ``<I>.journal/``); each wake reads what is new, in order, gaps
reported in their place.  With a consumer, the cursor is stored around each
batch (at-least-once): a callback's batch is acknowledged when the callback
returned for each record; ``async for`` acknowledges a record when the next
one is asked for.
"""

from __future__ import annotations

import fcntl
import os
from typing import TYPE_CHECKING, Any, List, Optional, Tuple, Union

from ._contract import PLAIN_INTERFACE, POSTED, bucket_interface, exact_rule
from ._journal_format import BATCH, HEADER, Cursor, Gap, JournalError, Position, Record, validate_consumer
from ._subscription import Feed
from .errors import InvalidInputError, WormholeError
from .notify import parse_posted

if TYPE_CHECKING:
    from .journal import Journal

__all__ = ["JournalFeed", "JournalReader"]


class JournalReader:
    """Reads a journal in sequence order from a start, reporting each range it
    cannot deliver once, in its place.  :meth:`read` returns what is new since
    the last call (call it on each ``Posted`` of the journal's name).

    With a consumer, the reader holds ``NAME.consumer.lock`` (a second reader
    of the same consumer is refused: ``consumerBusy``) and stores the cursor
    around each batch (at-least-once).
    """

    def __init__(self, journal: "Journal", start: Union[int, str] = "end", consumer: Optional[str] = None) -> None:
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


class JournalFeed(Feed[Union[Record, Gap]]):
    """The records (and gaps) of one journal, in order."""

    def __init__(self, reader: JournalReader) -> None:
        journal = reader.journal
        self.reader = reader
        name = journal.name
        self.rules = [exact_rule(name, bucket_interface(name)), exact_rule(name, PLAIN_INTERFACE)]
        journal._ensure()
        self.directory = journal.path
        # Also while on the bus: an appender killed between its write and its post.
        self.watch_always = True
        self._name = name
        self._held = False
        self._flushing = False
        self._closing = False

    def on_signal(self, interface: str, member: str, signature: str, body: Tuple[Any, ...]) -> None:
        if member != POSTED:
            return
        parsed = parse_posted(signature, body)
        if parsed is not None and parsed[0] == self._name:
            self.drain()

    def file_key(self, name: str) -> Optional[str]:
        return "segments" if name.endswith(".seg") else None

    def hold(self) -> None:
        """Deliver nothing until :meth:`release` (a command prints ``ready`` first)."""
        self._held = True

    def release(self) -> None:
        """End :meth:`hold` and deliver what is there."""
        self._held = False
        self.drain()

    def started(self) -> None:
        self.drain()

    def wake(self, key: str, reason: str) -> bool:
        return self.drain() > 0

    def catch_up(self) -> int:
        return self.drain()

    def drain(self) -> int:
        """Read what is new and deliver it; returns how many items."""
        if self._held or self._closing:
            return 0
        try:
            items = self.reader.read()
        except (WormholeError, OSError) as error:
            failure = error if isinstance(error, WormholeError) else JournalError(
                "io", "cannot read journal %s: %s" % (self._name, error), self._name)
            self.sub.error(self._name, failure)
            return 0
        batch: List[Record] = []
        for item in items:
            if self._closing:
                break
            if isinstance(item, Gap):
                self._flush(batch)
                self.sub.emit(item)
                continue
            batch.append(item)
            if len(batch) >= BATCH:
                self._flush(batch)
        self._flush(batch)
        return len(items)

    def _flush(self, batch: List[Record]) -> None:
        if not batch:
            return
        self.reader.begin_batch(batch)
        if self.sub.callback is None:  # async for: acknowledged as they are taken
            for record in batch:
                self.sub.emit(record)
            batch.clear()
            return
        handed: List[Record] = []
        self._flushing = True
        try:
            for record in batch:
                if not self.sub.active:
                    break
                self.sub.emit(record)
                handed.append(record)
        finally:
            self._flushing = False
            self.reader.end_batch(handed)
            batch.clear()
            if self._closing:
                self.reader.close()

    def taken(self, item: Union[Record, Gap]) -> None:
        if isinstance(item, Record):
            self.reader.end_batch([item])

    def close(self) -> None:
        self._closing = True
        if not self._flushing:
            self.reader.close()

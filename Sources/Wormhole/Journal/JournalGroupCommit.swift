// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import WormholeSystem

/// What a synchronising appender needs: the segment and the offset its records end at.
struct JournalSyncTarget: Sendable {
    var segment: OpenFile
    var segmentFirst: UInt64
    var end: Int
}

/// The journal's group commit (``Journal/Durability/fdatasync``) in one process: the appenders
/// of a journal make their records durable through it, and one `fdatasync` covers every record
/// written before it, whichever process wrote them.
final class JournalGroupCommit: Sendable {
    let location: JournalLocation
    private let state = Locked(State())

    /// The group commit's state in this process: `sync.lock`, and the position (segment, offset)
    /// known to be synchronised, so a thread another thread of this process covered is done
    /// without taking the file lock.
    private struct State {
        var file: OpenFile?
        var segmentFirst: UInt64 = 0
        var offset = 0

        /// Whether the position is at or past `target`'s end in the same segment. A position in
        /// a later segment does not count: an appender without `.fdatasync` seals a segment
        /// without synchronising it, so the records before the seal may still be in the page cache.
        func covers(_ target: JournalSyncTarget) -> Bool {
            segmentFirst == target.segmentFirst && offset >= target.end
        }

        /// Whether the position is in a segment after `target`'s (its segment was sealed since).
        func isPast(_ target: JournalSyncTarget) -> Bool { segmentFirst > target.segmentFirst }

        /// Takes a position read from `sync.lock` when it is past the one known.
        mutating func learn(_ stored: (segment: UInt64, offset: UInt64)) {
            if stored.segment > segmentFirst || (stored.segment == segmentFirst && stored.offset > UInt64(offset)) {
                (segmentFirst, offset) = (stored.segment, Int(clamping: stored.offset))
            }
        }
    }

    init(location: JournalLocation) { self.location = location }

    /// Makes the records up to `target.end` durable: an appender that finds another already
    /// synchronised past its records is done without a system call of its own. The position
    /// synchronised so far is shared between processes in `sync.lock` (``JournalFormat/syncPositionSize``
    /// bytes: the segment's first sequence number, the offset, and a check), written under
    /// `flock` of that file. A process waiting for the lock reads the position between its tries
    /// and is done as soon as it covers its records: the appender that holds the lock may take it
    /// back for its next record before a waiter's next try, again and again, and each of its syncs
    /// covers the waiters' records too.
    func synchronize(
        _ target: JournalSyncTarget, wholeEnd: () throws(WormholeError) -> JournalSyncTarget
    ) throws(WormholeError) {
        try state.withLock { sync throws(WormholeError) in
            if sync.covers(target) { return }
            if sync.isPast(target) { return try target.segment.dataSync() }
            if sync.file == nil {
                guard let directory = try location.open(create: true) else { preconditionFailure("created") }
                sync.file = try directory.openOrCreateFile(JournalFormat.syncLockName)
            }
            guard let file = sync.file else { return }
            var learnt = sync
            let locked = try file.lock(backoff: .journalSync) {
                // Unlocked: only a position whose check matches counts.
                guard let bytes = try? file.read(at: 0, count: JournalFormat.syncPositionSize),
                    let stored = JournalFormat.parseSyncPosition(bytes, checked: true)
                else { return false }
                learnt.learn(stored)
                return learnt.covers(target) || learnt.isPast(target)
            }
            sync = learnt
            if !locked && sync.covers(target) { return }
            // Sealed since our write: synchronise the segment itself (quick when the appender that
            // sealed it did), leaving the stored position, which is already past it.
            if !locked { return try target.segment.dataSync() }
            defer { file.unlock() }
            if let stored = JournalFormat.parseSyncPosition(
                try file.read(at: 0, count: JournalFormat.syncPositionSize), checked: false)
            {
                sync.learn(stored)
                if sync.covers(target) { return }
                if sync.isPast(target) { return try target.segment.dataSync() }
            }
            // Nobody appended after us (a single appender's case): our own end is the last whole
            // frame's, known without the append lock.
            var whole = try target.segment.size() == target.end ? target : try wholeEnd()
            if whole.segmentFirst != target.segmentFirst {
                // A rollover since our write: an appender without `.fdatasync` seals without a
                // sync, so synchronise our own segment and store only our own end.
                whole = target
            }
            try whole.segment.dataSync()
            try file.write(JournalFormat.syncPosition(segment: whole.segmentFirst, offset: UInt64(whole.end)), at: 0)
            (sync.segmentFirst, sync.offset) = (whole.segmentFirst, whole.end)
        }
    }
}

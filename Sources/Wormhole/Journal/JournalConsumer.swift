// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Synchronization
import WormholeSystem

/// A durable consumer's cursor file, `<name>.cursor` in the journal directory: one line of JSON,
/// `{"format":1,"acknowledged":A,"delivering":D}`. Records up to A were handled; records A+1…D
/// were handed out and may not have been (they are delivered again, flagged, after a crash).
/// Replaced atomically (a temporary file, then rename), so a crash leaves the old or the new one.
/// While a reader uses the consumer it holds `flock(LOCK_EX)` on `<name>.consumer.lock`: a second
/// reader of the same consumer is refused.
final class JournalCursorFile: Sendable {
    let name: JournalConsumerName
    let path: String
    private let directory: OpenFile
    private let lock: OpenFile
    private let synchronized: Bool

    /// How long a consumer's lock is waited for before it is reported in use.
    static let busyBound: Duration = .milliseconds(250)

    init(directory: OpenFile, name: JournalConsumerName, synchronized: Bool, identifier: MessageIdentifier)
        throws(WormholeError)
    {
        self.name = name
        self.directory = directory
        self.synchronized = synchronized
        path = directory.child(name.rawValue + JournalFormat.cursorSuffix)
        lock = try directory.openOrCreateFile(name.rawValue + JournalFormat.consumerLockSuffix)
        // Not at once: a process of this program that is starting another (posix_spawn) holds a
        // copy of every descriptor until the child's exec closes it, flock included, for an
        // instant. A reader that really holds the consumer still holds it after the bound.
        guard try lock.lock(within: Self.busyBound) else {
            throw WormholeError(
                .consumerBusy, value: name.rawValue,
                "consumer '\(name.rawValue)' of journal '\(identifier)' is in use by another reader "
                    + "(it holds '\(lock.path)'); give each reader its own consumer name")
        }
    }

    /// The stored cursor, or nil when there is none yet.
    func load() throws(WormholeError) -> (acknowledged: UInt64, delivering: UInt64)? {
        guard let file = try directory.openFile(name.rawValue + JournalFormat.cursorSuffix) else { return nil }
        return try Self.parse(try file.read(at: 0, count: 4096), path: path, consumer: name.rawValue)
    }

    /// The `(acknowledged, delivering)` pair of a cursor file's bytes.
    static func parse(_ bytes: [UInt8], path: String, consumer: String) throws(WormholeError) -> (
        acknowledged: UInt64, delivering: UInt64
    ) {
        let shown = String(decoding: bytes.prefix(100), as: UTF8.self)
        func bad(_ why: String) -> WormholeError {
            WormholeError(
                .invalidCursor, value: path,
                "cursor file '\(path)' of consumer '\(consumer)' does not parse (\(why)): '\(shown)'; "
                    + "remove it to start the consumer afresh, or write {\"format\":1,\"acknowledged\":N,\"delivering\":N}"
            )
        }
        struct Stored: Decodable {
            var format: Int
            var acknowledged: UInt64
            var delivering: UInt64
        }
        let stored: Stored
        do {
            stored = try JSONDecoder().decode(Stored.self, from: Data(bytes))
        } catch {
            throw bad("not {\"format\":1,\"acknowledged\":N,\"delivering\":N} with non-negative integers")
        }
        guard stored.format == 1 else { throw bad("\"format\" is \(stored.format), not 1") }
        guard stored.delivering >= stored.acknowledged else { throw bad("\"delivering\" is below \"acknowledged\"") }
        guard stored.delivering <= JournalFormat.maximumSequence else {
            throw bad(
                "\"delivering\" is past the largest sequence number a journal can hold, \(JournalFormat.maximumSequence)"
            )
        }
        return (stored.acknowledged, stored.delivering)
    }

    /// Replaces the cursor file atomically.
    func store(acknowledged: UInt64, delivering: UInt64) throws(WormholeError) {
        let line = "{\"format\":1,\"acknowledged\":\(acknowledged),\"delivering\":\(delivering)}\n"
        let final = name.rawValue + JournalFormat.cursorSuffix
        _ = try directory.createAtomically(
            final, temporary: "." + final + ".tmp", bytes: Array(line.utf8), sync: synchronized)
    }
}

/// A reader plus, for a durable consumer, its cursor file: hands out batches, flags records
/// that may have been handed out before a crash, and stores the cursor as batches are handled.
final class JournalConsumerCore: Sendable {
    private struct Progress {
        /// Records up to this one are handled (stored in the cursor file for a durable consumer).
        var acknowledged: UInt64
        /// The last record handed out.
        var handedOut: UInt64
        /// What the cursor file says now.
        var stored: (acknowledged: UInt64, delivering: UInt64)?
    }

    /// The most records handed out at once: a consumer killed mid-batch gets at most this many
    /// again (flagged).
    static let batchSize = 256

    let reader: JournalReader
    let cursor: JournalCursorFile?
    /// Records up to this one may have been handed out before: flagged as redeliveries.
    let redeliveredThrough: UInt64
    private let progress: Locked<Progress>

    init(location: JournalLocation, start: JournalPosition, consumer: String?, synchronized: Bool) throws(WormholeError)
    {
        guard let consumer else {
            reader = try JournalReader(location: location, start: start)
            cursor = nil
            redeliveredThrough = 0
            let handled = reader.nextSequence - 1
            progress = Locked(Progress(acknowledged: handled, handedOut: handled, stored: nil))
            return
        }
        let name = try JournalConsumerName(consumer)
        guard let directory = try location.open(create: true) else { preconditionFailure("created") }
        let cursor = try JournalCursorFile(
            directory: directory, name: name, synchronized: synchronized, identifier: location.identifier)
        let stored = try cursor.load()
        let reader: JournalReader
        if let stored {
            do throws(WormholeError) {
                reader = try JournalReader(location: location, start: .sequence(stored.acknowledged + 1))
            } catch  where error.code == .invalidPosition {
                // The cursor is past the last whole record (a frame it read was cut since): wait at
                // the end. Appenders number after the highest stored cursor, so the next record
                // this consumer gets is one it never saw (contract §6, v1.2).
                reader = try JournalReader(location: location, start: .end, floor: stored.delivering)
            }
        } else {
            reader = try JournalReader(location: location, start: start)
        }
        self.reader = reader
        self.cursor = cursor
        redeliveredThrough = stored?.delivering ?? 0
        let handled = stored?.acknowledged ?? (reader.nextSequence - 1)
        progress = Locked(Progress(acknowledged: handled, handedOut: handled, stored: stored))
        if stored == nil {
            // Stored at once: a consumer that starts at the end and crashes before its first record
            // must not start at the (later) end next time.
            try cursor.store(acknowledged: handled, delivering: handled)
            progress.withLock { $0.stored = (handled, handled) }
        }
    }

    /// The next batch, each record with whether it may have been handed out before a crash.
    /// For a durable consumer, the cursor file says the batch is being delivered before it is
    /// returned (one write per batch), and everything handed out before is acknowledged.
    func nextBatch(maximumRecords: Int = JournalConsumerCore.batchSize) throws(WormholeError) -> [(
        record: RawJournalRecord, isRedelivery: Bool
    )] {
        let batch: [RawJournalRecord]
        do throws(WormholeError) {
            batch = try reader.poll(maximumRecords: maximumRecords)
        } catch  where error.code == .journalGap || error.code == .journalDamaged {
            // Reported: from now on the consumer is at the next readable record.
            let skipped = reader.nextSequence - 1
            progress.withLock {
                $0.acknowledged = max($0.acknowledged, skipped)
                $0.handedOut = max($0.handedOut, skipped)
            }
            try? acknowledgeHandedOut()
            throw error
        }
        guard let last = batch.last else {
            try acknowledgeHandedOut()
            return []
        }
        // Everything handed out before is handled (the caller asks for more); with a cursor file,
        // the file says so, and that this batch is being delivered, before the batch is returned.
        // Under the lock: a listener's exit hook may store the cursor from another thread.
        let cursor = cursor
        try progress.withLock { progress throws(WormholeError) in
            if let cursor {
                try cursor.store(acknowledged: progress.handedOut, delivering: last.sequence)
                progress.stored = (progress.handedOut, last.sequence)
            }
            progress.acknowledged = progress.handedOut
            progress.handedOut = last.sequence
        }
        return batch.map { ($0, $0.sequence <= redeliveredThrough) }
    }

    /// Everything handed out is handled: stores the cursor (when it changed).
    func acknowledgeHandedOut() throws(WormholeError) {
        let through = progress.withLock { $0.handedOut }
        try acknowledge(through: through)
    }

    /// Records up to `sequence` (handed out) are handled; records after it up to `delivering`
    /// may be being handled (flagged if delivered again). Stores the cursor when it changed.
    /// Never moves the acknowledged position back; safe from any thread.
    func acknowledge(through sequence: UInt64, delivering: UInt64 = 0) throws(WormholeError) {
        let cursor = cursor
        try progress.withLock { progress throws(WormholeError) in
            progress.acknowledged = max(progress.acknowledged, sequence)
            let acknowledged = progress.acknowledged
            let delivering = max(acknowledged, delivering)
            guard let cursor else { return }
            if let stored = progress.stored, stored.acknowledged == acknowledged, stored.delivering == delivering {
                return
            }
            try cursor.store(acknowledged: acknowledged, delivering: delivering)
            progress.stored = (acknowledged, delivering)
        }
    }
}

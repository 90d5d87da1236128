// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import Logging
import Synchronization
import WormholeSystem

/// Appends records to one journal directory, from any number of threads and processes.
///
/// Appenders serialise on `flock(LOCK_EX)` of `append.lock` in the journal directory (and, in
/// one process, on a mutex first: `flock` locks belong to an open file description). The lock
/// holder first brings its view up to date (what other processes appended since its last append,
/// read from where it stopped), repairs a torn tail (truncates the last segment to its last whole
/// valid frame), rolls over to a new segment when the current one reached the segment size,
/// writes every frame of the batch with one `pwrite`, and applies retention after a rollover.
final class JournalWriter: Sendable {
    private struct State {
        var directory: OpenFile?
        var lock: OpenFile?
        /// The segment being appended to, its first sequence number, the end of its last whole
        /// frame, and the last sequence number in the journal, as of the last time the lock was held.
        var segment: OpenFile?
        var segmentFirst: UInt64 = 0
        var end = 0
        var last: UInt64 = 0
        var encodeBuffer: [UInt8] = []
        /// The buffer of the read from the last known byte (``probeSize`` bytes, made once).
        var probe: [UInt8] = []
        /// The view was rebuilt or a tail cut since the consumers' cursors were last read: the
        /// next append numbers after the highest one stored (contract §6, v1.2).
        var readCursors = true
    }

    let location: JournalLocation
    let options: Journal.Options
    /// How much the lock holder reads from its last known end to see what others appended.
    private static let probeSize = 4096
    private let state = Locked(State())
    private let groupCommit: JournalGroupCommit
    init(location: JournalLocation, options: Journal.Options) {
        self.location = location
        self.options = options
        groupCommit = JournalGroupCommit(location: location)
    }

    /// Appends `payloads` (each one JSON document, already checked) as consecutive records;
    /// returns their sequence numbers. Either every record is appended or, on an error, none is.
    func append(_ payloads: [Data]) throws(WormholeError) -> ClosedRange<UInt64> {
        precondition(!payloads.isEmpty)
        for payload in payloads { try checkSize(payload) }
        return try append(count: payloads.count) { first, time, bytes in
            for (index, payload) in payloads.enumerated() {
                JournalFormat.appendFrame(sequence: first + UInt64(index), time: time, payload: payload, to: &bytes)
            }
        }
    }

    /// Appends one record (the path of a single `append`: no array of payloads); returns its sequence number.
    func append(_ payload: Data) throws(WormholeError) -> UInt64 {
        try checkSize(payload)
        return try append(count: 1) { first, time, bytes in
            JournalFormat.appendFrame(sequence: first, time: time, payload: payload, to: &bytes)
        }.lowerBound
    }

    private func checkSize(_ payload: Data) throws(WormholeError) {
        guard payload.count > Journal.maximumRecordSize else { return }
        throw WormholeError(
            .recordTooLarge, value: String(payload.count),
            "record for journal '\(location.identifier)' is \(payload.count) bytes, over the maximum record size "
                + "of \(Journal.maximumRecordSize) bytes; nothing was appended")
    }

    /// Appends `count` records whose frames `frames` writes (given the first sequence number and
    /// the append time) into the writer's reused buffer, under the lock, with one `pwrite`.
    private func append(
        count: Int, frames: (_ first: UInt64, _ time: UInt64, _ bytes: inout [UInt8]) -> Void
    ) throws(WormholeError) -> ClosedRange<UInt64> {
        let time = Syscall.realTimeNanoseconds()
        let (range, target) = try state.withLock {
            state throws(WormholeError) -> (ClosedRange<UInt64>, JournalSyncTarget) in
            let lock = try openIfNeeded(&state)
            try lock.lock(backoff: .journal)
            defer { lock.unlock() }
            try locate(&state)
            guard UInt64(count) <= JournalFormat.maximumSequence - state.last else {
                // Only a crafted segment name comes near the end of the 64-bit numbers.
                let path = state.segment?.path ?? location.identifier.rawValue
                throw WormholeError(
                    .journalCorrupt, value: path,
                    "journal segment '\(path)' ends at sequence number \(state.last); \(count) more would pass "
                        + "the largest a journal can hold (\(JournalFormat.maximumSequence)); nothing was appended")
            }
            if state.end >= options.segmentSize && state.last >= state.segmentFirst {
                try rollover(&state, time: time)
                try applyRetention(&state)
            }
            guard let segment = state.segment else { preconditionFailure("located without a segment") }
            var bytes = state.encodeBuffer
            state.encodeBuffer = []
            bytes.removeAll(keepingCapacity: true)
            frames(state.last + 1, time, &bytes)
            do throws(WormholeError) {
                try segment.write(bytes, at: state.end)
            } catch {
                // A full disk or a failed write: take back whatever part reached the file, so the
                // journal ends at the last whole record again.
                try? segment.truncate(to: state.end)
                state.encodeBuffer = bytes
                throw error
            }
            let first = state.last + 1
            state.end += bytes.count
            state.last += UInt64(count)
            state.encodeBuffer = bytes
            return (
                first...state.last,
                JournalSyncTarget(segment: segment, segmentFirst: state.segmentFirst, end: state.end)
            )
        }
        if options.durability == .fdatasync {
            try groupCommit.synchronize(target) { () throws(WormholeError) in try self.wholeEnd() }
        }
        return range
    }

    /// The last sequence number appended (by anyone), bringing the view up to date under the lock.
    func lastSequence() throws(WormholeError) -> UInt64 {
        try state.withLock { state throws(WormholeError) -> UInt64 in
            let lock = try openIfNeeded(&state)
            try lock.lock(backoff: .journal)
            defer { lock.unlock() }
            try locate(&state)
            return state.last
        }
    }

    /// Applies `retention` now, under the lock; returns the segments removed.
    func trim(_ retention: Journal.Retention) throws(WormholeError) -> [String] {
        try state.withLock { state throws(WormholeError) -> [String] in
            let lock = try openIfNeeded(&state)
            try lock.lock(backoff: .journal)
            defer { lock.unlock() }
            try locate(&state)
            return try removeSegments(&state, retention: retention)
        }
    }

    // MARK: Under the lock

    private func openIfNeeded(_ state: inout State) throws(WormholeError) -> OpenFile {
        if let lock = state.lock { return lock }
        guard let directory = try location.open(create: true) else { preconditionFailure("created") }
        let lock = try directory.openOrCreateFile(JournalFormat.appendLockName)
        state.directory = directory
        state.lock = lock
        return lock
    }

    /// Brings `state` up to date with the files: reads what others appended since our last
    /// append, follows seals to later segments, and repairs a torn tail.
    private func locate(_ state: inout State) throws(WormholeError) {
        guard let directory = state.directory else { preconditionFailure("opened") }
        if state.segment == nil { try resynchronise(&state, directory) }
        while true {
            guard let segment = state.segment else { preconditionFailure("resynchronised") }
            // A read from the last byte we know, not `fstat`: one byte back means nothing was
            // appended since (the usual case: one system call); a short read gives the size.
            // (Linux gives a file whose times were looked at since its last change fine-grained
            // times on the next write, which then costs a journalled inode update each time.)
            if state.probe.count != Self.probeSize { state.probe = [UInt8](repeating: 0, count: Self.probeSize) }
            let got = try segment.readOnce(at: state.end - 1, into: &state.probe)
            if got == 1 {
                numberAfterStoredCursors(&state, directory)
                return
            }
            // A short read holds everything others appended since: scanned without reading again.
            let tail = got > 1 && got < Self.probeSize ? Array(state.probe[1..<got]) : nil
            let scan = try JournalScan.run(
                segment, from: state.end, expecting: state.last + 1, collect: false, tail: tail)
            state.end = scan.end
            state.last = scan.next - 1
            switch scan.stop {
            case .end, .budget:
                if scan.size < state.end {
                    // The file is shorter than what we read before: start again from the listing.
                    try resynchronise(&state, directory)
                    continue
                }
                numberAfterStoredCursors(&state, directory)
                return
            case .jump(let to):
                // Numbers skipped by an appender that numbered past a stored cursor: records go on at `to`.
                state.last = to - 1
            case .seal(let next):
                if let following = try directory.openFile(JournalFormat.segmentName(next), writable: true) {
                    let first = try readHeader(following)
                    guard first == next else { throw misnamed(following, first: first) }
                    state.segment = following
                    state.segmentFirst = next
                    state.end = JournalFormat.headerSize
                } else if try directory.status(of: JournalFormat.segmentName(state.segmentFirst)) == nil {
                    // Our segment was removed by retention and its successor too: list again.
                    try resynchronise(&state, directory)
                } else {
                    // A writer sealed the segment and stopped before creating the next one.
                    try createSegment(&state, first: next)
                }
            case .incomplete:
                try repair(segment, at: state.end, reason: "an incomplete last frame")
                state.readCursors = true
                numberAfterStoredCursors(&state, directory)
                return
            case .invalid(let reason, let tailLike):
                guard tailLike else {
                    throw WormholeError(
                        .journalCorrupt, value: segment.path,
                        "journal segment '\(segment.path)' is damaged at offset \(state.end): \(reason); "
                            + "records after it cannot be trusted (see docs/journal-format.md, 'Damage')")
                }
                try repair(segment, at: state.end, reason: reason)
                state.readCursors = true
                numberAfterStoredCursors(&state, directory)
                return
            }
        }
    }

    /// A number a durable consumer has stored is never given to another record: when a frame it
    /// read was cut since (a torn or truncated tail), the next append numbers after the highest
    /// `delivering` of the cursor files (unreadable ones are skipped; they are that consumer's
    /// problem). The skipped numbers are then a damaged range readers report.
    private func numberAfterStoredCursors(_ state: inout State, _ directory: OpenFile) {
        guard state.readCursors else { return }
        state.readCursors = false
        guard let names = try? JournalListing(directory).consumers else { return }
        for name in names {
            let fileName = name + JournalFormat.cursorSuffix
            guard let file = try? directory.openFile(fileName), let bytes = try? file.read(at: 0, count: 4096),
                let stored = try? JournalCursorFile.parse(bytes, path: file.path, consumer: name)
            else { continue }
            if stored.delivering > state.last {
                location.logger.warning(
                    "journal consumer stored a record that is no longer there; numbering after it",
                    metadata: ["consumer": "\(name)", "stored": "\(stored.delivering)", "last": "\(state.last)"])
                state.last = stored.delivering
            }
        }
    }

    /// Truncates the torn tail of the last segment (the lock holder's repair).
    private func repair(_ segment: OpenFile, at offset: Int, reason: String) throws(WormholeError) {
        try segment.truncate(to: offset)
        if options.durability == .fdatasync { try segment.dataSync() }
        location.logger.notice(
            "repaired a torn journal tail",
            metadata: ["segment": "\(segment.path)", "offset": "\(offset)", "reason": "\(reason)"])
    }

    /// Starts from the directory listing: the last segment, read from its header.
    private func resynchronise(_ state: inout State, _ directory: OpenFile) throws(WormholeError) {
        let listing = try JournalListing(directory)
        try listing.sweepTemporaries(directory)
        guard let lastFirst = listing.segments.last else {
            try createSegment(&state, first: 1)
            return
        }
        guard let segment = try directory.openFile(JournalFormat.segmentName(lastFirst), writable: true) else {
            throw WormholeError(
                .journalCorrupt, value: directory.child(JournalFormat.segmentName(lastFirst)),
                "journal segment '\(directory.child(JournalFormat.segmentName(lastFirst)))' vanished while the "
                    + "append lock was held")
        }
        let first = try readHeader(segment)
        guard first == lastFirst else { throw misnamed(segment, first: first) }
        state.segment = segment
        state.segmentFirst = first
        state.end = JournalFormat.headerSize
        state.last = first - 1
        state.readCursors = true
    }

    private func readHeader(_ segment: OpenFile) throws(WormholeError) -> UInt64 {
        try JournalFormat.checkHeader(try segment.read(at: 0, count: JournalFormat.headerSize), path: segment.path)
    }

    private func misnamed(_ segment: OpenFile, first: UInt64) -> WormholeError {
        WormholeError(
            .journalCorrupt, value: segment.path,
            "journal segment '\(segment.path)' says its first record is \(first), which does not match its name")
    }

    /// Creates the segment starting at `first` (header written to a temporary file, then renamed).
    private func createSegment(_ state: inout State, first: UInt64) throws(WormholeError) {
        guard let directory = state.directory else { preconditionFailure("opened") }
        let name = JournalFormat.segmentName(first)
        let sync = options.durability == .fdatasync
        let segment: OpenFile
        if let existing = try directory.openFile(name, writable: true) {
            segment = existing
            let stored = try readHeader(segment)
            guard stored == first else { throw misnamed(segment, first: stored) }
        } else {
            segment = try directory.createAtomically(
                name, temporary: "." + name + ".tmp", bytes: JournalFormat.header(first: first), sync: sync)
        }
        state.segment = segment
        state.segmentFirst = first
        state.end = JournalFormat.headerSize
        state.last = first - 1
    }

    /// Seals the current segment and starts the next one.
    private func rollover(_ state: inout State, time: UInt64) throws(WormholeError) {
        guard let segment = state.segment else { preconditionFailure("located") }
        var seal: [UInt8] = []
        JournalFormat.appendFrame(sequence: state.last + 1, time: time, payload: nil, to: &seal)
        do throws(WormholeError) {
            try segment.write(seal, at: state.end)
        } catch {
            try? segment.truncate(to: state.end)
            throw error
        }
        if options.durability == .fdatasync { try segment.dataSync() }
        try createSegment(&state, first: state.last + 1)
    }

    private func applyRetention(_ state: inout State) throws(WormholeError) {
        if options.retention.isUnlimited { return }
        _ = try removeSegments(&state, retention: options.retention)
    }

    /// Removes whole segments, oldest first, never the last one, while `retention` says so.
    private func removeSegments(_ state: inout State, retention: Journal.Retention) throws(WormholeError) -> [String] {
        guard let directory = state.directory else { preconditionFailure("opened") }
        let listing = try JournalListing(directory)
        var segments = listing.segments
        var sizes: [UInt64: Int] = [:]
        var modified: [UInt64: Double] = [:]
        for first in segments {
            if let status = try directory.status(of: JournalFormat.segmentName(first)) {
                sizes[first] = Int(status.st_size)
                modified[first] = Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9
            }
        }
        var total = sizes.values.reduce(0, +)
        let now = Double(Syscall.realTimeNanoseconds()) / 1e9
        var removed: [String] = []
        while segments.count > 1 {
            let oldest = segments[0]
            let lastInOldest = segments[1] - 1
            var remove = false
            if let maximumBytes = retention.maximumBytes, total > maximumBytes { remove = true }
            if let maximumRecords = retention.maximumRecords, state.last >= maximumRecords,
                lastInOldest <= state.last - maximumRecords
            {
                remove = true
            }
            if let maximumAge = retention.maximumAge, let time = modified[oldest], now - time > maximumAge {
                remove = true
            }
            guard remove else { break }
            let name = JournalFormat.segmentName(oldest)
            try directory.remove(name)
            removed.append(name)
            total -= sizes[oldest] ?? 0
            segments.removeFirst()
        }
        return removed
    }

    /// What a sync covers: the segment appended to and the end of its last whole frame, brought
    /// up to date under `append.lock` as an appender does (a torn tail is cut first). Not the
    /// file's size: that may hold part of a frame an appender is writing, or a killed one left,
    /// and once the tail is cut a later, shorter record would end inside the stored position and
    /// be taken as synchronised when it is not.
    private func wholeEnd() throws(WormholeError) -> JournalSyncTarget {
        try state.withLock { state throws(WormholeError) -> JournalSyncTarget in
            let lock = try openIfNeeded(&state)
            try lock.lock(backoff: .journal)
            defer { lock.unlock() }
            try locate(&state)
            guard let segment = state.segment else { preconditionFailure("located without a segment") }
            return JournalSyncTarget(segment: segment, segmentFirst: state.segmentFirst, end: state.end)
        }
    }
}

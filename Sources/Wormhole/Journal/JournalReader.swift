// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import WormholeSystem

/// Where a reader starts.
public enum JournalPosition: Sendable, Hashable {
    /// At the first record still in the journal (never a gap).
    case beginning
    /// After the last record appended when the reader starts: only records appended later.
    case end
    /// At the record with this sequence number (1 is the first record ever appended). A sequence
    /// number already removed by retention gives a gap report, then the first available record;
    /// one after the journal's next sequence number is refused.
    case sequence(UInt64)
}

/// Reads a journal's records in order without any lock: writers are never blocked by it, and
/// only whole frames with a matching checksum are returned.
///
/// Nothing is skipped silently (contract §6, v1.2): a range of numbers the reader cannot deliver
/// (removed by retention, a missing, truncated or foreign segment, a bad checksum) is reported
/// once, as a ``JournalDamage`` in a thrown ``WormholeError``, at its place in the order, and the
/// reader goes on with the next readable record. How it finds that record is described in
/// docs/journal-format.md, "Reading past damage".
final class JournalReader: Sendable {
    struct State {
        var directory: OpenFile
        var segment: OpenFile?
        /// The open segment's first sequence number (its name), or with no open segment, the
        /// segment to open next (after a seal, or before any append).
        var segmentFirst: UInt64
        var offset = JournalFormat.headerSize
        var next: UInt64
        /// Ranges found and not yet reported, in order.
        var pending: [JournalDamage] = []
        /// Numbers at or below this are neither reported nor delivered (before the start position).
        var floor: UInt64 = 0
        /// The segments as last listed, and the directory's version then (a new segment changes it).
        var listing: [UInt64] = []
        var listedAt: FileVersion?
        /// Where damage with nothing readable after it (yet) was reported: not again.
        var stuckAt: (segment: UInt64, offset: Int)?
    }

    let location: JournalLocation
    private let state: Locked<State>

    /// Positions a reader at `start`; numbers up to `floor` are never delivered or reported (a
    /// consumer whose stored cursor is past the journal's last whole record waits for the
    /// records after it).
    init(location: JournalLocation, start: JournalPosition, floor: UInt64 = 0) throws(WormholeError) {
        self.location = location
        guard let directory = try location.open(create: true) else { preconditionFailure("created") }
        let listing = try JournalListing(directory)
        var state = State(directory: directory, segmentFirst: 1, next: 1)
        state.listing = listing.segments
        state.listedAt = try Self.signature(directory)
        try Self.position(&state, start: start, location: location)
        state.floor = max(state.floor, floor)
        self.state = Locked(state)
    }

    /// The next sequence number this reader returns.
    var nextSequence: UInt64 { state.withLock { $0.next } }

    private static func position(_ state: inout State, start: JournalPosition, location: JournalLocation)
        throws(WormholeError)
    {
        guard let first = state.listing.first, let last = state.listing.last else {
            // No segment yet: the first record will be 1.
            if case .sequence(let wanted) = start, wanted != 1 {
                throw future(wanted, next: 1, location: location)
            }
            state.segmentFirst = 1
            state.next = 1
            return
        }
        switch start {
        case .beginning:
            state.segmentFirst = first
            state.next = first
        case .end:
            state.segmentFirst = last
            state.next = last
            try skip(&state, to: nil, location: location)
            state.floor = state.next - 1
            state.pending = []
        case .sequence(let wanted):
            if wanted < first {
                state.pending = [
                    JournalDamage(
                        from: wanted, to: first - 1, file: JournalFormat.segmentName(wanted), reason: .retention)
                ]
                state.segmentFirst = first
                state.next = first
                state.floor = wanted - 1
                return
            }
            let containing = state.listing.last { $0 <= wanted } ?? first
            state.segmentFirst = containing
            state.next = containing
            state.floor = wanted - 1
            try skip(&state, to: wanted, location: location)
            if state.next < wanted { throw future(wanted, next: state.next, location: location) }
        }
    }

    private static func future(_ wanted: UInt64, next: UInt64, location: JournalLocation) -> WormholeError {
        WormholeError(
            .invalidPosition, value: String(wanted),
            "sequence number \(wanted) is after the next record of journal '\(location.identifier)' "
                + "(the next record will be \(next))")
    }

    /// Moves forward without reading payloads, to `target` (or to the end when nil), past damage
    /// (ranges after the floor stay pending).
    private static func skip(_ state: inout State, to target: UInt64?, location: JournalLocation) throws(WormholeError)
    {
        while true {
            if let target, state.next >= target { return }
            let reported = state.pending.count
            let taken = try read(
                &state, collect: false, maximumRecords: .max, maximumBytes: .max, until: target, location: location
            ).count
            if taken == 0 && state.pending.count == reported { return }
            if target == nil { state.pending = [] }
        }
    }

    /// The records available now, in order, up to the given budget (at least one record when
    /// any is available). A range that cannot be delivered is thrown once, in its place in the
    /// order (``WormholeError/Code/journalGap`` for retention, ``WormholeError/Code/journalDamaged``
    /// otherwise, with ``WormholeError/journalDamage`` set); the next poll goes on after it.
    func poll(maximumRecords: Int = 4096, maximumBytes: Int = 4 << 20) throws(WormholeError) -> [RawJournalRecord] {
        try state.withLock { state throws(WormholeError) -> [RawJournalRecord] in
            if !state.pending.isEmpty { throw report(state.pending.removeFirst(), state) }
            let result = try Self.read(
                &state, collect: true, maximumRecords: maximumRecords, maximumBytes: maximumBytes, location: location)
            let records = state.floor == 0 ? result.records : result.records.filter { $0.sequence > state.floor }
            if !records.isEmpty { return records }
            if !state.pending.isEmpty { throw report(state.pending.removeFirst(), state) }
            return []
        }
    }

    /// Every damaged range from the reader's position to the end, and how many records are
    /// readable (`journal check`; reads every frame).
    func check() throws(WormholeError) -> (damaged: [JournalDamage], readable: UInt64, next: UInt64) {
        try state.withLock { state throws(WormholeError) in
            var damaged: [JournalDamage] = []
            var readable: UInt64 = 0
            while true {
                let taken = try Self.read(
                    &state, collect: false, maximumRecords: .max, maximumBytes: .max, location: location
                ).count
                readable += UInt64(taken)
                if state.pending.isEmpty && taken == 0 { break }
                damaged += state.pending
                state.pending = []
            }
            return (damaged, readable, state.next)
        }
    }

    private func report(_ damage: JournalDamage, _ state: State) -> WormholeError {
        damage.error(identifier: location.identifier, directory: state.directory.path)
    }

    // MARK: Reading

    /// Reads frames from the position until the end of what is there, the budget, or a range that
    /// cannot be delivered (appended to `pending`; reading stops there, so that records after it
    /// come after its report). `count` is the number of records passed (collected or not).
    private static func read(
        _ state: inout State, collect: Bool, maximumRecords: Int, maximumBytes: Int, until target: UInt64? = nil,
        location: JournalLocation
    ) throws(WormholeError) -> (records: [RawJournalRecord], count: Int) {
        var records: [RawJournalRecord] = []
        var count = 0
        var bytes = 0
        var retried = false
        var rescanned = false
        let reported = state.pending.count
        while count < maximumRecords && bytes < maximumBytes {
            // Positioning stops at `target` exactly (a jump may have moved `next` on meanwhile).
            if let target, state.next >= target { return (records, count) }
            guard let segment = state.segment else {
                let goOn = try openNext(&state)
                if goOn && state.pending.count == reported { continue }
                return (records, count)
            }
            let budget = target.map { Int(clamping: $0 - state.next) } ?? .max
            let scan = try JournalScan.run(
                segment, from: state.offset, expecting: state.next, collect: collect,
                maximumRecords: min(maximumRecords - count, budget), maximumBytes: maximumBytes - bytes)
            let taken = Int(scan.next - state.next)
            if collect { records += scan.records }
            count += taken
            bytes += scan.end - state.offset
            if taken > 0 || scan.end != state.offset { state.stuckAt = nil }
            state.offset = scan.end
            state.next = scan.next
            switch scan.stop {
            case .budget:
                return (records, count)
            case .seal(let next):
                state.segment = nil
                state.segmentFirst = next
            case .jump(let to):
                // Records before `to` are not in the file (cut, or numbered past a stored cursor).
                let damage = JournalDamage(
                    from: state.next, to: to - 1, file: JournalFormat.segmentName(state.segmentFirst),
                    reason: .truncated,
                    detail: "the frame at offset \(state.offset) is numbered \(to) where \(state.next) was expected")
                state.next = to
                if found(&state, damage) { return (records, count) }
            case .end, .incomplete, .invalid(_, tailLike: true):
                // The end of what is there, or a torn tail the next appender repairs: the journal
                // goes on here unless a later segment exists (then this one ends early).
                guard let later = try laterSegment(&state, after: state.segmentFirst) else { return (records, count) }
                if !rescanned {
                    // The seal is written before the next segment is created: read again.
                    rescanned = true
                    continue
                }
                let damage = JournalDamage(
                    from: state.next, to: later - 1, file: JournalFormat.segmentName(state.segmentFirst),
                    reason: .truncated,
                    detail: "it ends at offset \(state.offset) without a seal; the next segment starts at \(later)")
                state.segment = nil
                state.segmentFirst = later
                let empty = state.next >= later
                state.next = max(state.next, later)
                if !empty && found(&state, damage) { return (records, count) }
            case .invalid(let reason, tailLike: false):
                // Read once more (a repair may have been under way) before it is damage.
                if !retried {
                    retried = true
                    continue
                }
                if state.stuckAt?.segment == state.segmentFirst && state.stuckAt?.offset == state.offset {
                    return (records, count)
                }
                let later = try laterSegment(&state, after: state.segmentFirst)
                let size = try segment.size()
                let frames = UInt64(max(0, size - state.offset) / JournalFormat.frameOverhead) + 1
                let (sum, overflow) = state.next.addingReportingOverflow(frames)
                let bound = later ?? (overflow ? UInt64.max : sum)
                let file = JournalFormat.segmentName(state.segmentFirst)
                if let resumed = try JournalScan.resynchronise(
                    segment, from: state.offset, after: state.next, through: bound)
                {
                    let damage = JournalDamage(
                        from: state.next, to: resumed.sequence - 1, file: file, reason: .checksum,
                        detail: "offset \(state.offset): \(reason); records resume at offset \(resumed.offset)")
                    state.offset = resumed.offset
                    state.next = resumed.sequence
                    if found(&state, damage) { return (records, count) }
                } else if let later {
                    let damage = JournalDamage(
                        from: state.next, to: max(state.next, later - 1), file: file, reason: .checksum,
                        detail: "offset \(state.offset): \(reason); nothing readable follows in the segment")
                    state.segment = nil
                    state.segmentFirst = later
                    state.next = max(state.next, later)
                    if found(&state, damage) { return (records, count) }
                } else {
                    // Damage in the last segment with nothing readable after it (yet): reported
                    // once; appends are refused until it is moved away or cut (see docs).
                    state.stuckAt = (state.segmentFirst, state.offset)
                    let damage = JournalDamage(
                        from: state.next, to: state.next, file: file, reason: .checksum,
                        detail: "offset \(state.offset): \(reason); nothing readable follows yet")
                    _ = found(&state, damage)
                    return (records, count)
                }
            }
        }
        return (records, count)
    }

    /// Records a range (the part after the floor); true when something is left to report.
    private static func found(_ state: inout State, _ damage: JournalDamage) -> Bool {
        var clipped = damage
        clipped.from = max(damage.from, state.floor + 1)
        guard clipped.from <= clipped.to else { return false }
        state.pending.append(clipped)
        return true
    }

    /// Opens the segment `state.segmentFirst`; true when the reader can go on reading (opened, or
    /// a range was skipped and recorded), false when it must wait (not created yet).
    private static func openNext(_ state: inout State) throws(WormholeError) -> Bool {
        let first = state.segmentFirst
        let name = JournalFormat.segmentName(first)
        var foreign: String?
        do throws(WormholeError) {
            if let segment = try state.directory.openFile(name) {
                let stored = try JournalFormat.checkHeader(
                    try segment.read(at: 0, count: JournalFormat.headerSize), path: segment.path)
                if stored == first {
                    state.segment = segment
                    state.offset = JournalFormat.headerSize
                    state.next = max(state.next, first)
                    state.stuckAt = nil
                    return true
                }
                foreign = "its header says its first record is \(stored)"
            }
        } catch  where error.code == .journalVersion || error.code == .io {
            throw error
        } catch {
            foreign = error.message
        }
        let later = try laterSegment(&state, after: first, fresh: true)
        if let foreign {
            if state.stuckAt?.segment == first && state.stuckAt?.offset == 0 { return false }
            let damage = JournalDamage(
                from: max(state.next, first), to: max(state.next, (later ?? first + 1) - 1), file: name,
                reason: .foreign,
                detail: foreign)
            if let later {
                state.segmentFirst = later
                state.next = max(state.next, later)
            } else {
                state.stuckAt = (first, 0)
            }
            return found(&state, damage) || later != nil
        }
        // Missing: not created yet (nothing after it), removed by retention (nothing before it),
        // or lost between present segments.
        guard let later else { return false }
        let retention = (state.listing.first ?? later) > first
        let damage = JournalDamage(
            from: max(state.next, first), to: later - 1, file: name, reason: retention ? .retention : .missing)
        state.segmentFirst = later
        state.next = max(state.next, later)
        _ = found(&state, damage)
        return true
    }

    /// The first segment after `first` (nil when none), from the listing, listed again when the
    /// directory changed since (or always when `fresh`).
    private static func laterSegment(_ state: inout State, after first: UInt64, fresh: Bool = false)
        throws(WormholeError) -> UInt64?
    {
        let now = try signature(state.directory)
        if fresh || now != state.listedAt {
            state.listing = try JournalListing(state.directory).segments
            state.listedAt = now
        }
        return state.listing.first { $0 > first }
    }

    private static func signature(_ directory: OpenFile) throws(WormholeError) -> FileVersion {
        FileVersion(try directory.status())
    }
}

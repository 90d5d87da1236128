import Foundation
import Synchronization

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
/// only whole frames with a matching checksum and the expected sequence number are returned.
final class JournalReader: Sendable {
    private struct State {
        var directory: JournalFile
        var segment: JournalFile?
        /// With no open segment: the segment to open next (after a seal, or before any append).
        var waitingFor: UInt64
        var offset = JournalFormat.headerSize
        var next: UInt64
        var gap: (missing: UInt64, available: UInt64)?
    }

    let location: JournalLocation
    private let state: Mutex<State>

    /// Positions a reader at `start`.
    init(location: JournalLocation, start: JournalPosition) throws(WormholeError) {
        self.location = location
        guard let directory = try location.open(create: true) else { preconditionFailure("created") }
        let listing = try JournalListing(directory)
        var state = State(directory: directory, waitingFor: 1, next: 1)
        try Self.position(&state, listing: listing, start: start, location: location)
        self.state = Mutex(state)
    }

    /// The next sequence number this reader returns.
    var nextSequence: UInt64 { state.withLock { $0.next } }

    private static func position(
        _ state: inout State, listing: JournalListing, start: JournalPosition, location: JournalLocation
    ) throws(WormholeError) {
        guard let first = listing.segments.first, let last = listing.segments.last else {
            // No segment yet: the first record will be 1.
            if case .sequence(let wanted) = start, wanted != 1 {
                throw future(wanted, next: 1, location: location)
            }
            state.segment = nil
            state.waitingFor = 1
            state.next = 1
            return
        }
        switch start {
        case .beginning:
            try open(&state, first: first)
        case .end:
            try open(&state, first: last)
            try skip(&state, to: nil, location: location)
        case .sequence(let wanted):
            if wanted < first {
                state.gap = (wanted, first)
                try open(&state, first: first)
                return
            }
            let containing = listing.segments.last { $0 <= wanted } ?? first
            try open(&state, first: containing)
            try skip(&state, to: wanted, location: location)
            if state.next != wanted { throw future(wanted, next: state.next, location: location) }
        }
    }

    private static func future(_ wanted: UInt64, next: UInt64, location: JournalLocation) -> WormholeError {
        WormholeError(
            .invalidPosition, value: String(wanted),
            "sequence number \(wanted) is after the next record of journal '\(location.identifier)' "
                + "(the next record will be \(next))")
    }

    /// Opens the segment starting at `first` and places the reader at its first record.
    private static func open(_ state: inout State, first: UInt64) throws(WormholeError) {
        let name = JournalFormat.segmentName(first)
        guard let segment = try state.directory.openFile(name) else {
            state.segment = nil
            state.waitingFor = first
            state.next = first
            return
        }
        let stored = try JournalFormat.checkHeader(try segment.read(at: 0, count: JournalFormat.headerSize), path: segment.path)
        guard stored == first else {
            throw WormholeError(
                .journalCorrupt, value: segment.path,
                "journal segment '\(segment.path)' says its first record is \(stored), which does not match its name")
        }
        state.segment = segment
        state.offset = JournalFormat.headerSize
        state.next = first
    }

    /// Moves forward without reading payloads, to `target` (or to the end when nil), following seals.
    private static func skip(_ state: inout State, to target: UInt64?, location: JournalLocation) throws(WormholeError) {
        while let segment = state.segment {
            let budget = target.map { Int(clamping: $0 - state.next) } ?? .max
            let scan = try JournalScan.run(segment, from: state.offset, expecting: state.next, collect: false, maximumRecords: budget)
            state.offset = scan.end
            state.next = scan.next
            switch scan.stop {
            case .seal(let next):
                try open(&state, first: next)
            case .invalid(let reason, tailLike: false):
                throw corrupt(segment, offset: scan.end, reason: reason)
            default:
                return
            }
        }
    }

    private static func corrupt(_ segment: JournalFile, offset: Int, reason: String) -> WormholeError {
        WormholeError(
            .journalCorrupt, value: segment.path,
            "journal segment '\(segment.path)' is damaged at offset \(offset): \(reason); no record after it is "
                + "delivered (see docs/journal-format.md, 'Damage')")
    }

    /// The records available now, in order, up to the given budget (at least one record when
    /// any is available). Throws a gap report once when records this reader had not read were
    /// removed by retention (it then goes on from the first available record), and a
    /// ``WormholeError/Code/journalCorrupt`` error, each time, for damage it cannot read past.
    func poll(maximumRecords: Int = 4096, maximumBytes: Int = 4 << 20) throws(WormholeError) -> [RawJournalRecord] {
        try state.withLock { state throws(WormholeError) -> [RawJournalRecord] in
            if let gap = state.gap {
                state.gap = nil
                throw WormholeError(
                    .journalGap, value: String(gap.available),
                    "journal '\(location.identifier)': records \(gap.missing)…\(gap.available - 1) were removed by "
                        + "retention before this reader read them; going on at \(gap.available)")
            }
            var records: [RawJournalRecord] = []
            var retried = false
            while records.count < maximumRecords {
                if state.segment == nil {
                    try Self.open(&state, first: state.waitingFor)
                    if state.segment == nil {
                        // Not created yet, or removed by retention while this reader was behind.
                        let listing = try JournalListing(state.directory)
                        if let first = listing.segments.first, first > state.waitingFor {
                            let missing = state.next
                            try Self.open(&state, first: first)
                            if !records.isEmpty {
                                state.gap = (missing, first)
                                return records
                            }
                            throw WormholeError(
                                .journalGap, value: String(first),
                                "journal '\(location.identifier)': records \(missing)…\(first - 1) were removed by "
                                    + "retention before this reader read them; going on at \(first)")
                        }
                        return records
                    }
                }
                guard let segment = state.segment else { return records }
                let scan = try JournalScan.run(
                    segment, from: state.offset, expecting: state.next, collect: true,
                    maximumRecords: maximumRecords - records.count, maximumBytes: maximumBytes)
                records += scan.records
                state.offset = scan.end
                state.next = scan.next
                switch scan.stop {
                case .end, .incomplete, .budget:
                    return records
                case .seal(let next):
                    state.segment = nil
                    state.waitingFor = next
                case .invalid(let reason, let tailLike):
                    // A torn tail waits for the next appender's repair. Damage is read once more
                    // (a repair may have been under way) before it is reported.
                    if tailLike || !records.isEmpty { return records }
                    if retried { throw Self.corrupt(segment, offset: scan.end, reason: reason) }
                    retried = true
                }
            }
            return records
        }
    }
}

import Foundation

/// What a journal holds (see ``Journal/status()``; `wormhole journal stat` prints it).
public struct JournalStatus: Sendable, Hashable {
    /// The first record still in the journal (``last`` + 1 when it holds none).
    public var first: UInt64
    /// The last record appended (0 when none ever was).
    public var last: UInt64
    /// The size of every segment together, in bytes.
    public var bytes: Int
    /// The segments' file names, oldest first.
    public var segments: [String]
    /// Each durable consumer's cursor: the last record it handled.
    public var consumers: [String: UInt64]

    /// How many records the journal holds.
    public var count: UInt64 { last >= first ? last - first + 1 : 0 }

    static func read(_ location: JournalLocation) throws(WormholeError) -> JournalStatus {
        guard let directory = try location.open(create: false) else {
            return JournalStatus(first: 1, last: 0, bytes: 0, segments: [], consumers: [:])
        }
        let listing = try JournalListing(directory)
        var bytes = 0
        for first in listing.segments {
            if let status = try directory.status(of: JournalFormat.segmentName(first)) { bytes += Int(status.st_size) }
        }
        let reader = try JournalReader(location: location, start: .end)
        let last = reader.nextSequence - 1
        let first = listing.segments.first.map { min($0, last + 1) } ?? 1
        var consumers: [String: UInt64] = [:]
        for name in listing.consumers {
            let path = directory.child(name + JournalFormat.cursorSuffix)
            guard let file = try directory.openFile(name + JournalFormat.cursorSuffix) else { continue }
            let acknowledged = try JournalCursorFile.parse(try file.read(at: 0, count: 4096), path: path, consumer: name).acknowledged
            consumers[name] = acknowledged
        }
        return JournalStatus(
            first: first, last: last, bytes: bytes, segments: listing.segments.map(JournalFormat.segmentName),
            consumers: consumers)
    }
}

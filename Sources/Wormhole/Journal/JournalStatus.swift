import FoundationEssentials
import Glibc

/// What a journal holds (see ``Journal/status()``; `wormholectl journal stat` prints it).
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
    /// The consumers whose cursor file cannot be read, with why (they are not in ``consumers``;
    /// the others are not affected).
    public var badConsumers: [String: String]
    /// The ranges that cannot be read, in order (empty when the journal is whole; records
    /// removed by retention are not damage).
    public var damaged: [JournalDamage]
    /// How many records can be read: those from ``first`` to ``last`` outside ``damaged``.
    public var readable: UInt64

    /// How many records the journal holds (readable ones: ``readable``).
    package var count: UInt64 { readable }

    /// Whether nothing is damaged.
    package var isWhole: Bool { damaged.isEmpty }

    static func read(_ location: JournalLocation) throws(WormholeError) -> JournalStatus {
        guard let directory = try location.open(create: false) else {
            return JournalStatus(
                first: 1, last: 0, bytes: 0, segments: [], consumers: [:], badConsumers: [:], damaged: [], readable: 0)
        }
        let listing = try JournalListing(directory)
        var bytes = 0
        for first in listing.segments {
            if let status = try directory.status(of: JournalFormat.segmentName(first)),
                status.st_mode & S_IFMT == S_IFREG
            {
                bytes += Int(status.st_size)
            }
        }
        // Every frame is read: damage anywhere is found (contract §6, v1.2).
        let reader = try JournalReader(location: location, start: .beginning)
        let check = try reader.check()
        let last = check.next - 1
        let first = listing.segments.first.map { min($0, last + 1) } ?? 1
        var consumers: [String: UInt64] = [:]
        var badConsumers: [String: String] = [:]
        for name in listing.consumers {
            do throws(WormholeError) {
                guard let file = try directory.openFile(name + JournalFormat.cursorSuffix) else { continue }
                let path = directory.child(name + JournalFormat.cursorSuffix)
                consumers[name] = try JournalCursorFile.parse(
                    try file.read(at: 0, count: 4096), path: path, consumer: name
                ).acknowledged
            } catch {
                badConsumers[name] = error.message
            }
        }
        return JournalStatus(
            first: first, last: last, bytes: bytes, segments: listing.segments.map(JournalFormat.segmentName),
            consumers: consumers, badConsumers: badConsumers, damaged: check.damaged.filter { $0.reason != .retention },
            readable: check.readable)
    }
}

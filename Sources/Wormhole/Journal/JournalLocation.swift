// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Logging

/// Where a journal lives: `<root>/<group>/<directory>/<identifier>.journal/`, and the name its
/// appenders post (`<group>/<directory>/<identifier>/journal`).
struct JournalLocation: Sendable {
    let container: GroupContainer
    let directory: WormholeDirectoryName
    let identifier: MessageIdentifier
    let logger: Logger

    /// The journal directory's name inside the wormhole directory.
    var directoryName: String { identifier.rawValue + ".journal" }

    var path: String { container.directoryPath(directory) + "/" + directoryName }

    var notificationName: NotificationName {
        // At most 255 + 1 + 255 + 1 + 200 + 8 bytes of ASCII: always a valid name.
        try! NotificationName("\(container.group.rawValue)/\(directory.rawValue)/\(identifier.rawValue)/journal")
    }

    /// The journal directory, checked; nil when it does not exist and `create` is false.
    func open(create: Bool) throws(WormholeError) -> OpenFile? {
        guard let wormhole = try container.openDirectory(directory, create: create) else { return nil }
        return try wormhole.openDirectory(directoryName, create: create)
    }
}

/// The files of a journal directory, sorted out. Anything that is not a segment, a lock file,
/// a consumer's cursor or lock, or one of the journal's temporary files (`.NAME.tmp`) is refused
/// with an error naming it: records are never read around a file the journal did not write.
struct JournalListing {
    /// The segments' first sequence numbers, in order.
    var segments: [UInt64] = []
    /// The consumers that have a cursor file.
    var consumers: [String] = []
    var temporaries: [String] = []

    init(_ directory: OpenFile) throws(WormholeError) {
        for name in try directory.names(includingDirectories: true) {
            if let first = JournalFormat.segmentSequence(name) {
                segments.append(first)
            } else if name == JournalFormat.appendLockName || name == JournalFormat.syncLockName {
                continue
            } else if name.hasPrefix(".") && name.hasSuffix(".tmp") {
                temporaries.append(name)
            } else if name.hasSuffix(JournalFormat.cursorSuffix),
                let consumer = try? JournalConsumerName(String(name.dropLast(JournalFormat.cursorSuffix.count)))
            {
                consumers.append(consumer.rawValue)
            } else if name.hasSuffix(JournalFormat.consumerLockSuffix),
                (try? JournalConsumerName(String(name.dropLast(JournalFormat.consumerLockSuffix.count)))) != nil
            {
                continue
            } else {
                throw WormholeError(
                    .journalCorrupt, value: directory.child(name),
                    "'\(directory.child(name))' is not part of the journal (a journal directory holds only "
                        + "NNNNNNNNNNNNNNNNNNNN.seg segments, append.lock, sync.lock, NAME.cursor and "
                        + "NAME.consumer.lock); move it out of the journal directory")
            }
        }
        segments.sort()
        consumers.sort()
    }

    /// Removes leftover temporary segment files (a writer killed while creating a segment). Only
    /// the holder of the append lock may call this.
    func sweepTemporaries(_ directory: OpenFile) throws(WormholeError) {
        for name in temporaries where name.hasSuffix(JournalFormat.segmentSuffix + ".tmp") {
            try directory.remove(name)
        }
    }
}

/// A durable consumer's name: the rules of a message identifier (1 to 200 bytes of
/// `A-Z a-z 0-9 . _ -`, not starting with `.`).
struct JournalConsumerName: Sendable, Hashable {
    let rawValue: String

    init(_ string: String) throws(WormholeError) {
        try NameRules.validate(
            string, kind: "journal consumer name", code: .invalidConsumer,
            maximumLength: MessageIdentifier.maximumLength)
        rawValue = string
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Wormhole
import WormholeDBus

/// The journal calls the bench makes (issue 10), in one place like the rest of ``LibraryAPI``.
extension LibraryAPI {
    /// The journal `identifier` of `group` under `root`, page cache or `fdatasync` with group commit.
    static func journal(
        group: String, root: String, address: BusAddress, identifier: String, synchronized: Bool = false
    ) throws -> Journal {
        try Mailbox(applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root, busAddress: address)
            .journal(
                MessageIdentifier(identifier), options: Journal.Options(durability: synchronized ? .fdatasync : .none))
    }

    /// Appends one record.
    @discardableResult
    static func append<Message: Encodable>(_ journal: Journal, _ message: Message) throws -> UInt64 {
        try journal.append(message)
    }

    /// Appends records under one lock acquisition and write.
    @discardableResult
    static func append<Message: Encodable>(_ journal: Journal, contentsOf messages: [Message]) throws -> ClosedRange<
        UInt64
    > {
        try journal.append(contentsOf: messages)
    }

    /// Appends one record exactly as the document's bytes (no encoding).
    @discardableResult
    static func append(_ journal: Journal, document: JSONDocument) throws -> UInt64 {
        try journal.append(document)
    }

    /// Appends documents as consecutive records under one lock acquisition and write.
    @discardableResult
    static func append(_ journal: Journal, documents: [JSONDocument]) throws -> ClosedRange<UInt64> {
        try journal.append(contentsOf: documents)
    }

    /// Calls `handler` with each record (sequence, redelivery flag, raw JSON), on the I/O thread;
    /// a failure (gap, damage) is passed as its message.
    static func listen(
        _ journal: Journal, from start: JournalPosition, consumer: String?,
        handler: @escaping @Sendable (Result<JournalRecord<JSONDocument>, WormholeError>) -> Void
    ) throws -> Subscription {
        try journal.listen(from: start, consumer: consumer, as: JSONDocument.self, on: .ioThread, handler: handler)
    }

    /// Every record from `sequence`, read now (an in-process cursor).
    static func records(_ journal: Journal, from sequence: UInt64) throws -> [JournalRecord<JSONDocument>] {
        let consumer = try journal.makeConsumer(from: .sequence(sequence), consumer: nil)
        var all: [JournalRecord<JSONDocument>] = []
        while true {
            let batch = try consumer.nextBatch()
            if batch.isEmpty { return all }
            all += batch
        }
    }
}

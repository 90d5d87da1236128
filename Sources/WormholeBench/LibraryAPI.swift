import ArgumentParser
import Dispatch
import Foundation
import Wormhole
import WormholeDBus

/// Every call the bench makes into the part of the public API that issue 7 renames (the
/// `Wormhole` class, `queue: DispatchQueue?` parameters, `DarwinNotification.kind`,
/// `passMessage`): the rest of the bench goes through here, so the rename touches this file only.
enum LibraryAPI {
    /// The messaging class (to become `MessageCenter`).
    typealias Mailbox = Wormhole

    /// Where a handler runs.
    enum Delivery: String, ExpressibleByArgument, CaseIterable, Sendable {
        /// On the connection's I/O thread (today `queue: nil`; to become `.ioThread`).
        case ioThread = "io-thread"
        /// On a serial queue of the observer's own (today `queue: DispatchQueue(...)`; to become `.serial`).
        case serial

        /// The argument today's API takes.
        fileprivate var queue: DispatchQueue? {
            switch self {
            case .ioThread: nil
            case .serial: DispatchQueue(label: "wormhole.bench.handler")
            }
        }
    }

    /// Calls `handler` with the state of every post of `name` (not for catch-ups).
    static func observe(
        _ center: DarwinNotificationCenter, _ name: NotificationName, on delivery: Delivery,
        handler: @escaping @Sendable (UInt64?) -> Void
    ) throws -> NotificationObserver {
        try center.addObserver(for: name, queue: delivery.queue) { note in
            if note.kind == .posted { handler(note.state) }
        }
    }

    /// A wormhole of `group` under the container root `root`.
    static func mailbox(group: String, root: String, address: BusAddress) throws -> Mailbox {
        try Mailbox(applicationGroupIdentifier: group, containerRoot: root, busAddress: address)
    }

    /// Calls `handler` with each payload delivered for `identifier`, on the I/O thread.
    static func listen(
        _ mailbox: Mailbox, identifier: String, handler: @escaping @Sendable (BenchPayload) -> Void
    ) throws -> MessageListener {
        try mailbox.listen(identifier: identifier, as: BenchPayload.self, queue: nil) { delivery in
            if case .success(let payload) = delivery.result { handler(payload) }
        }
    }

    /// Stores `payload` for `identifier` and posts.
    static func send(_ mailbox: Mailbox, _ payload: BenchPayload, identifier: String) throws {
        _ = try mailbox.passMessage(payload, identifier: identifier)
    }
}

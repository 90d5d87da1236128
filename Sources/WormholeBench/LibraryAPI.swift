import ArgumentParser
import Dispatch
import Foundation
import Wormhole
import WormholeDBus

/// Every call the bench makes into the messaging and notification API, in one place: the rest
/// of the bench goes through here.
enum LibraryAPI {
    /// The messaging class.
    typealias Mailbox = MessageCenter

    /// Where a handler runs.
    enum Delivery: String, ExpressibleByArgument, CaseIterable, Sendable {
        /// On the connection's I/O thread (`DeliveryQueue.ioThread`).
        case ioThread = "io-thread"
        /// On a serial queue of the observer's own (`DeliveryQueue.serial`, the default).
        case serial

        /// The library's choice.
        fileprivate var queue: DeliveryQueue {
            switch self {
            case .ioThread: .ioThread
            case .serial: .serial
            }
        }
    }

    /// Calls `handler` with the state of every post of `name` (not for catch-ups).
    static func observe(
        _ center: DarwinNotificationCenter, _ name: NotificationName, on delivery: Delivery,
        handler: @escaping @Sendable (UInt64?) -> Void
    ) throws -> NotificationObserver {
        try center.addObserver(for: name, on: delivery.queue) { note in
            if note.reason == .posted { handler(note.state) }
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
        try mailbox.listen(identifier: identifier, as: BenchPayload.self, on: .ioThread) { delivery in
            if case .success(let payload) = delivery.result { handler(payload) }
        }
    }

    /// Stores `payload` for `identifier` and posts.
    static func send(_ mailbox: Mailbox, _ payload: BenchPayload, identifier: String) throws {
        _ = try mailbox.passMessage(payload, identifier: identifier)
    }
}

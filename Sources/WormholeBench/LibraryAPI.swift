// SPDX-License-Identifier: Apache-2.0
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

    /// How a center wakes Wormhole peers (``PeerWake``).
    enum Wake: String, ExpressibleByArgument, CaseIterable, Sendable {
        /// The doorbell beside the bus signal (`PeerWake.doorbell`).
        case doorbell
        /// The bus signal alone (`PeerWake.busOnly`).
        case busOnly = "bus-only"
    }

    /// A notification center on `address` that wakes peers as `wake` says.
    static func center(address: BusAddress, wake: Wake) throws -> DarwinNotificationCenter {
        try DarwinNotificationCenter(busAddress: address, wake: wake == .doorbell ? .doorbell : .busOnly)
    }

    /// Calls `handler` with the state of every post of `name` (not for catch-ups).
    static func observe(
        _ center: DarwinNotificationCenter, _ name: NotificationName, on delivery: Delivery,
        handler: @escaping @Sendable (UInt64?) -> Void
    ) throws -> Subscription {
        try center.listen(name: name, on: delivery.queue) { note in
            if note.reason == .posted { handler(note.state) }
        }
    }

    /// A wormhole of `group` under the container root `root`.
    static func mailbox(group: String, root: String, address: BusAddress) throws -> Mailbox {
        try Mailbox(applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root, busAddress: address)
    }

    /// Calls `handler` with each payload delivered for `identifier`, on the I/O thread.
    static func listen(
        _ mailbox: Mailbox, identifier: String, handler: @escaping @Sendable (BenchPayload) -> Void
    ) throws -> Subscription {
        try mailbox.listen(identifier: MessageIdentifier(identifier), as: BenchPayload.self, on: .ioThread) {
            delivery in
            if case .success(let payload) = delivery.result { handler(payload) }
        }
    }

    /// Stores `payload` for `identifier` and posts.
    static func send(_ mailbox: Mailbox, _ payload: BenchPayload, identifier: String) throws {
        _ = try mailbox.passMessage(payload, identifier: MessageIdentifier(identifier))
    }

    /// Sends `payload` to the running listeners of `identifier` in the signal itself (not stored).
    static func sendTransient(_ mailbox: Mailbox, _ payload: BenchPayload, identifier: String) throws {
        try mailbox.passTransientMessage(payload, identifier: MessageIdentifier(identifier))
    }

    /// Calls `handler` with each delivery for `identifier` (stored or transient) as its raw JSON
    /// document (`JSONDocument`: checked to be one JSON value, not decoded), on the I/O thread;
    /// `watchBesideBus` false turns off the default watch on the wormhole directory beside the bus.
    static func listenDocument(
        _ mailbox: Mailbox, identifier: String, watchBesideBus: Bool = true,
        handler: @escaping @Sendable (JSONDocument) -> Void
    ) throws -> Subscription {
        try mailbox.listen(
            identifier: MessageIdentifier(identifier), as: JSONDocument.self, on: .ioThread,
            options: MessageCenter.ListenOptions(catchesWritesWithoutSignal: watchBesideBus)
        ) { delivery in
            if case .success(let document) = delivery.result { handler(document) }
        }
    }

    /// Stores the raw document for `identifier` as it is and posts (no encoder).
    static func send(_ mailbox: Mailbox, _ document: JSONDocument, identifier: String) throws {
        _ = try mailbox.passMessage(document, identifier: MessageIdentifier(identifier))
    }

    /// Sends a JSON document as a transient message (checked and compacted, no encoder).
    static func sendTransient(_ mailbox: Mailbox, _ document: JSONDocument, identifier: String) throws {
        try mailbox.passTransientMessage(document, identifier: MessageIdentifier(identifier))
    }

    /// The raw document of a payload, `{"seq":N,"pad":"xx…"}` (`pad`: its UTF-8 bytes), checked
    /// by `JSONDocument(data:)` as every raw send is.
    static func document(seq: UInt64, pad: [UInt8]) throws -> JSONDocument {
        var bytes = Array(#"{"seq":\#(seq),"pad":""#.utf8)
        bytes.reserveCapacity(bytes.count + pad.count + 2)
        bytes += pad
        bytes += Array(#""}"#.utf8)
        return try JSONDocument(data: Data(bytes))
    }

    /// The sequence number of a raw document made by ``document(seq:pad:)`` (read from its first
    /// bytes, nothing parsed), or nil (also when it does not fit in a `UInt64`).
    static func sequence(of document: JSONDocument) -> UInt64? {
        let prefix = Array(#"{"seq":"#.utf8)
        return document.data.withUnsafeBytes { bytes -> UInt64? in
            guard bytes.count > prefix.count, bytes.prefix(prefix.count).elementsEqual(prefix) else { return nil }
            var value: UInt64 = 0
            var index = prefix.count
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                let (times, overflow) = value.multipliedReportingOverflow(by: 10)
                let (sum, carry) = times.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
                guard !overflow, !carry else { return nil }
                value = sum
                index += 1
            }
            return index > prefix.count ? value : nil
        }
    }

    /// One hop's codec work on the Codable path, as the library does it: a fresh `JSONEncoder`
    /// (`.withoutEscapingSlashes`) encodes `payload`, a fresh `JSONDecoder` decodes it.
    static func codecRoundTrip(_ payload: BenchPayload) throws -> BenchPayload {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return try JSONDecoder().decode(BenchPayload.self, from: try encoder.encode(payload))
    }

    // MARK: Shared defaults

    /// The shared settings suite of `group` under the container root `root` (no fsync), its reads
    /// checked as `freshness` says (one `lstat` by default; the change counter, no system call).
    static func defaults(
        group: String, root: String, address: BusAddress, freshness: GroupDefaults.Freshness = .everyWriter
    ) throws -> GroupDefaults {
        try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root, busAddress: address,
            freshness: freshness)
    }

    /// Adds 1 to the integer `key` under the suite's lock (`update`).
    static func increment(_ defaults: GroupDefaults, key: String) throws {
        try defaults.update(forKey: key) { .integer(($0?.intValue ?? 0) + 1) }
    }

    /// Stores the integer `value` for `key` (`set(_:forKey:)`).
    static func set(_ defaults: GroupDefaults, _ value: Int, forKey key: String) throws {
        try defaults.set(value, forKey: key)
    }

    /// The integer stored for `key` (a cached, freshness-checked read), or nil.
    static func integer(_ defaults: GroupDefaults, forKey key: String) throws -> Int? {
        try defaults.value(forKey: key)?.intValue
    }

    /// Every stored value; throws when the suite does not parse (it is then moved aside).
    static func values(_ defaults: GroupDefaults) throws -> [String: PropertyListValue] {
        try defaults.values()
    }

    /// Calls `handler` with the integer value of `key` after each change by another process, on
    /// the I/O thread.
    static func observe(
        _ defaults: GroupDefaults, key: String, handler: @escaping @Sendable (Int) -> Void
    ) throws -> Subscription {
        try defaults.listen(forKey: key, on: .ioThread) { change in
            if let value = change.value?.intValue { handler(value) }
        }
    }
}

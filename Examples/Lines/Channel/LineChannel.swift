// SPDX-License-Identifier: Apache-2.0
// Scenario 1: a shell app ("Lines") and its browser extension ("LineGrabber") share an inbox
// and an outbox. The extension's native host writes `toShell`, the app reads it; the app writes
// `toExtension`, the host reads it. `LineChannel` hides how, so the mechanism can be swapped.
import Foundation
public import Wormhole

/// One clipped line of text (or one answer back), with where it came from.
public struct Line: Codable, Sendable, Hashable {
    /// A unique id, so that a reader can tell two equal texts apart.
    public var id: String
    /// The text.
    public var text: String
    /// The page it was clipped from, when known.
    public var url: String?
    /// When it was written, seconds since 1970.
    public var sentAt: Double

    public init(text: String, url: String? = nil) {
        id = UUID().uuidString
        self.text = text
        self.url = url
        sentAt = Date().timeIntervalSince1970
    }
}

/// The two directions between the extension and the app.
public enum LineDirection: String, Sendable, CaseIterable {
    /// Written by the extension's host, read by the app.
    case toShell
    /// Written by the app, read by the extension's host.
    case toExtension

    /// The mailbox (and journal) of this direction: identifiers written in the source are
    /// string literals.
    var identifier: MessageIdentifier {
        switch self {
        case .toShell: "toShell"
        case .toExtension: "toExtension"
        }
    }
}

/// How lines travel between the extension and the app: write one, read the latest, be woken
/// when a new one arrives. On Apple systems the same protocol sat on two keys of the group's
/// shared `UserDefaults`, and the app had to poll; here the app is woken.
public protocol LineChannel: Sendable {
    /// Stores `line` as the latest in `direction` and wakes the reader.
    func send(_ line: Line, _ direction: LineDirection) throws
    /// The latest line in `direction`, or nil when none was ever sent.
    func latest(_ direction: LineDirection) throws -> Line?
    /// Calls `handler` for each line sent in `direction` from now on (with `includingStored`,
    /// first the one already stored), until the returned handle is released or cancelled.
    func receive(
        _ direction: LineDirection, includingStored: Bool,
        handler: @escaping @Sendable (Line, _ wasStored: Bool) -> Void
    ) throws -> any SubscriptionHandle
}

/// The channel of an app group: each line is written to the key `toShell` / `toExtension` of the
/// group's shared defaults suite (the design the app had on Apple systems, which stays readable
/// by anything that reads the suite) and passed as the wormhole message of the same name, whose
/// listener wakes the reader at once. The message is the one readers listen to; the key is the
/// durable record.
public final class GroupLineChannel: LineChannel {
    let defaults: GroupDefaults
    let wormhole: MessageCenter

    /// The channel of `group` (default `group.com.example.lines`, or `LINES_GROUP`), on the session
    /// bus unless `busAddress` is given.
    public init(group: String? = nil, busAddress: String? = nil) throws {
        let group = group ?? ProcessInfo.processInfo.environment["LINES_GROUP"] ?? "group.com.example.lines"
        let address = try busAddress.map(BusAddress.init)
        defaults = try GroupDefaults(applicationGroupIdentifier: GroupIdentifier(group), busAddress: address)
        wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), directory: WormholeDirectoryName("lines"),
            busAddress: address)
    }

    public func send(_ line: Line, _ direction: LineDirection) throws {
        try defaults.set(
            ["id": line.id, "text": line.text, "url": line.url ?? "", "sentAt": line.sentAt] as [String: Any],
            forKey: direction.rawValue)
        try wormhole.passMessage(line, identifier: direction.identifier)
        wormhole.flush()
    }

    public func latest(_ direction: LineDirection) throws -> Line? {
        // The message is what the writer stored last; the key is its durable twin.
        try wormhole.message(identifier: direction.identifier, as: Line.self)
    }

    public func receive(
        _ direction: LineDirection, includingStored: Bool, handler: @escaping @Sendable (Line, Bool) -> Void
    ) throws -> any SubscriptionHandle {
        try wormhole.listen(
            identifier: direction.identifier, as: Line.self,
            options: .init(deliversStoredMessageOnStart: includingStored)
        ) { delivery in
            guard case .success(let line) = delivery.result else { return }
            handler(line, delivery.reason == .stored)
        }
    }

    /// Waits until every notification posted so far is written to the bus.
    public func flush() { wormhole.flush() }
}

/// The default channel of an app group: each line is appended to the journal `toShell` /
/// `toExtension` (directory `lines`), which keeps every line in order, so lines sent faster than
/// the reader reads all arrive (a mailbox keeps only the latest). The line is also written to the
/// shared-defaults key of the same name, as `GroupLineChannel` does, which is where ``latest(_:)``
/// reads it.
public final class JournalLineChannel: LineChannel {
    let defaults: GroupDefaults
    let wormhole: MessageCenter

    /// The channel of `group` (default `group.com.example.lines`, or `LINES_GROUP`), on the session
    /// bus unless `busAddress` is given.
    public init(group: String? = nil, busAddress: String? = nil) throws {
        let group = group ?? ProcessInfo.processInfo.environment["LINES_GROUP"] ?? "group.com.example.lines"
        let address = try busAddress.map(BusAddress.init)
        defaults = try GroupDefaults(applicationGroupIdentifier: GroupIdentifier(group), busAddress: address)
        wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), directory: WormholeDirectoryName("lines"),
            busAddress: address)
    }

    func journal(_ direction: LineDirection) throws -> Journal {
        wormhole.journal(direction.identifier)
    }

    public func send(_ line: Line, _ direction: LineDirection) throws {
        let journal = try journal(direction)
        try journal.append(line)
        try defaults.set(
            ["id": line.id, "text": line.text, "url": line.url ?? "", "sentAt": line.sentAt] as [String: Any],
            forKey: direction.rawValue)
        journal.flush()
    }

    public func latest(_ direction: LineDirection) throws -> Line? {
        guard let value = try? defaults.value(forKey: direction.rawValue), case .dictionary(let stored) = value,
            let id = stored["id"]?.stringValue, let text = stored["text"]?.stringValue
        else { return nil }
        var line = Line(text: text, url: stored["url"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 })
        line.id = id
        line.sentAt = stored["sentAt"]?.doubleValue ?? line.sentAt
        return line
    }

    /// Every line appended from now on, in order (with `includingStored`, first the last one
    /// already there, as `wasStored`).
    public func receive(
        _ direction: LineDirection, includingStored: Bool, handler: @escaping @Sendable (Line, Bool) -> Void
    ) throws -> any SubscriptionHandle {
        let journal = try journal(direction)
        let last = try journal.status().last
        let start: JournalPosition = includingStored && last > 0 ? .sequence(last) : .end
        return try journal.listen(from: start, as: Line.self) { result in
            guard case .success(let record) = result else { return }
            handler(record.message, includingStored && record.sequence <= last)
        }
    }
}

/// The channel Lines and LineGrabber's host use: ``JournalLineChannel``, or ``GroupLineChannel``
/// (latest line only) when `LINES_CHANNEL` is `mailbox`.
public func makeLineChannel(group: String? = nil, busAddress: String? = nil) throws -> any LineChannel {
    if ProcessInfo.processInfo.environment["LINES_CHANNEL"] == "mailbox" {
        return try GroupLineChannel(group: group, busAddress: busAddress)
    }
    return try JournalLineChannel(group: group, busAddress: busAddress)
}

import Dispatch
public import Foundation
public import Logging
import Synchronization
public import WormholeDBus

/// MMWormhole for Linux: last-value mailboxes in an app-group container, with a D-Bus
/// notification per identifier that wakes listeners in other processes at once.
///
/// ```swift
/// let wormhole = try Wormhole(applicationGroupIdentifier: "group.com.example.counter")
/// // The watch side:
/// try wormhole.passMessage(["buttonNumber": 3], identifier: "button")
/// // The app side, in another process:
/// let listener = try wormhole.listen(identifier: "button", as: [String: Int].self, queue: .main) { delivery in
///     if let message = try? delivery.result.get() { print(message["buttonNumber"]!) }
/// }
/// ```
///
/// A message is stored as `<root>/<group>/<directory>/<identifier>.json` (replaced atomically)
/// and then `Posted` is emitted with the name `<group>/<directory>/<identifier>` (contract §3).
/// Storing never depends on the bus: if the bus is down, ``passMessage(_:identifier:)`` still
/// stores the message and reports that nobody was told.
public final class Wormhole: Sendable {
    /// How messages are stored.
    public enum Transiting: Sendable {
        /// ``FileTransiting``: atomic replace (the contract's layout; the default).
        case file
        /// ``CoordinatedFileTransiting``: the same files, with cross-process advisory locks.
        case coordinatedFile
        /// Your own storage. Notifications still use the contract's names.
        case custom(any WormholeTransiting)
    }

    /// The app-group container.
    public let container: GroupContainer
    /// The wormhole directory inside the container.
    public let directory: WormholeDirectoryName
    /// The storage in use.
    public let transiting: any WormholeTransiting
    /// The bus the wormhole posts and listens on (`nil`: the session bus).
    public let busAddress: BusAddress?
    let logger: Logger
    private let centerBox = Mutex<DarwinNotificationCenter?>(nil)
    private let sharedStateDirectory: String?
    private let lastState = Atomic<UInt64>(0)

    /// Opens a wormhole (like MMWormhole's `initWithApplicationGroupIdentifier:optionalDirectory:`).
    ///
    /// Nothing is written and no bus connection is made until the first message or listener.
    /// - Parameters:
    ///   - applicationGroupIdentifier: the app group, such as `group.com.example.lines`.
    ///   - directory: the directory inside the container (default `wormhole`).
    ///   - transiting: how messages are stored.
    ///   - durability: for the built-in transitings: whether writes are `fsync`ed.
    ///   - containerRoot: the root of all group containers; `nil` resolves it from the
    ///     environment (`$WORMHOLE_CONTAINER_ROOT`, `$XDG_DATA_HOME/group-containers`,
    ///     `$HOME/.local/share/group-containers`).
    ///   - busAddress: the bus; `nil` for the session bus.
    ///   - sharedStateDirectory: see ``DarwinNotificationCenter/init(busAddress:sharedStateDirectory:logger:)``.
    /// - Throws: ``WormholeError`` naming an invalid group or directory, before touching disk or bus.
    public init(
        applicationGroupIdentifier: String, directory: String = "wormhole", transiting: Transiting = .file,
        durability: FileTransiting.Durability = .atomic, containerRoot: String? = nil, busAddress: BusAddress? = nil,
        sharedStateDirectory: String? = nil, logger: Logger = Logger(label: "wormhole")
    ) throws {
        let group = try GroupIdentifier(applicationGroupIdentifier)
        self.directory = try WormholeDirectoryName(directory)
        container = try GroupContainer(group: group, root: containerRoot)
        switch transiting {
        case .file: self.transiting = FileTransiting(container: container, directory: self.directory, durability: durability)
        case .coordinatedFile:
            self.transiting = CoordinatedFileTransiting(container: container, directory: self.directory, durability: durability)
        case .custom(let custom): self.transiting = custom
        }
        self.busAddress = busAddress
        self.sharedStateDirectory = sharedStateDirectory
        self.logger = logger
    }

    /// The notification name for `identifier`: `<group>/<directory>/<identifier>`.
    public func notificationName(for identifier: MessageIdentifier) -> NotificationName {
        // At most 255 + 1 + 255 + 1 + 200 bytes of ASCII: always a valid name.
        try! NotificationName("\(container.group.rawValue)/\(directory.rawValue)/\(identifier.rawValue)")
    }

    /// The prefix every notification of this wormhole starts with: `<group>/<directory>/`.
    public var notificationPrefix: NotificationName {
        try! NotificationName("\(container.group.rawValue)/\(directory.rawValue)/")
    }

    /// The notification center, connecting on first use; a failed connection is retried next time.
    public func notificationCenter() throws -> DarwinNotificationCenter {
        try centerBox.withLock { box in
            if let center = box { return center }
            let center = try DarwinNotificationCenter(
                busAddress: busAddress, sharedStateDirectory: sharedStateDirectory, logger: logger)
            box = center
            return center
        }
    }

    // MARK: Sending

    /// What happened to the notification after a message was stored.
    public struct SendReport: Sendable {
        /// The state the notification carried (the write's timestamp in nanoseconds since
        /// 1970, strictly increasing within a process); it differs for every write.
        public var state: UInt64
        /// Why listeners were not told, when they were not (the bus is down or unreachable).
        /// The message is stored either way; listeners catch up when they reconnect.
        public var notificationError: (any Error)?
        /// Whether the notification was sent.
        public var notified: Bool { notificationError == nil }
    }

    /// Stores `message` as the JSON document for `identifier` (replacing the previous one
    /// atomically) and notifies listeners.
    ///
    /// - Returns: whether listeners were notified. A bus that is down is not an error here: the
    ///   message is stored, the problem is logged and returned in the report.
    /// - Throws: ``WormholeError`` for an invalid identifier (before anything is written), a
    ///   message that does not encode, or a storage failure.
    @discardableResult
    public func passMessage(_ message: some Encodable, identifier: String) throws -> SendReport {
        let identifier = try MessageIdentifier(identifier)
        // JSONEncoder's output is one JSON document: no need to parse it again.
        try transiting.writeMessage(try Self.encode(message, identifier: identifier), identifier: identifier)
        return notify(identifier)
    }

    /// Stores an already-encoded JSON document (it is checked to be one JSON value) and notifies.
    @discardableResult
    public func passMessageData(_ data: Data, identifier: MessageIdentifier) throws -> SendReport {
        try Self.validateJSON(data, identifier: identifier)
        try transiting.writeMessage(data, identifier: identifier)
        return notify(identifier)
    }

    /// Wakes listeners of `identifier` without changing the stored message; they read and
    /// deliver what is stored (MMWormhole's nil message left them reading a stale file).
    @discardableResult
    public func passMessage(identifier: String) throws -> SendReport {
        notify(try MessageIdentifier(identifier))
    }

    /// Removes the message for `identifier` and notifies, so listeners learn the mailbox is
    /// empty (they receive a ``WormholeError/Code/noMessage`` delivery).
    @discardableResult
    public func clearMessage(identifier: String) throws -> SendReport {
        let identifier = try MessageIdentifier(identifier)
        try transiting.deleteMessage(identifier: identifier)
        return notify(identifier)
    }

    /// Removes every message of this wormhole and notifies each identifier that had one.
    @discardableResult
    public func clearAllMessages() throws -> [SendReport] {
        let identifiers = try transiting.storedIdentifiers()
        try transiting.deleteAllMessages()
        return identifiers.map(notify)
    }

    /// Posts the identifier's name with a fresh state; never throws.
    private func notify(_ identifier: MessageIdentifier) -> SendReport {
        let state = nextState()
        do {
            let center = try notificationCenter()
            try center.post(notificationName(for: identifier), state: state)
            return SendReport(state: state, notificationError: nil)
        } catch {
            logger.warning(
                "message stored but listeners were not notified",
                metadata: ["identifier": "\(identifier)", "error": "\(error)"])
            return SendReport(state: state, notificationError: error)
        }
    }

    /// Nanoseconds since 1970, made strictly increasing within the process.
    private func nextState() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        let now = UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
        while true {
            let last = lastState.load(ordering: .relaxed)
            let next = max(now, last &+ 1)
            if lastState.compareExchange(expected: last, desired: next, ordering: .relaxed).exchanged { return next }
        }
    }

    /// Blocks until pending notifications are written to the bus (call before exiting).
    public func flush() { centerBox.withLock { $0?.flush() } }

    // MARK: Reading

    /// The message stored for `identifier`, decoded, or `nil` when none is stored.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/decodingFailed`` when the stored
    ///   document does not decode as `T`, or a storage error.
    public func message<T: Decodable>(identifier: String, as type: T.Type = T.self) throws -> T? {
        let identifier = try MessageIdentifier(identifier)
        guard let data = try transiting.messageData(identifier: identifier) else { return nil }
        return try Self.decode(data, as: type, identifier: identifier)
    }

    /// The stored JSON document for `identifier`, or `nil`.
    public func messageData(identifier: MessageIdentifier) throws -> Data? {
        try transiting.messageData(identifier: identifier)
    }

    // MARK: Coding

    static func encode(_ message: some Encodable, identifier: MessageIdentifier) throws(WormholeError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        do {
            return try encoder.encode(message)
        } catch {
            throw WormholeError(
                .encodingFailed, value: identifier.rawValue,
                "message for '\(identifier)' cannot be encoded as JSON: \(error)")
        }
    }

    static func decode<T: Decodable>(_ data: Data, as type: T.Type, identifier: MessageIdentifier) throws(WormholeError) -> T {
        if T.self == JSONDocument.self {
            do {
                return try JSONDocument(data: data) as! T
            } catch {
                throw WormholeError(
                    .decodingFailed, value: identifier.rawValue,
                    "message for '\(identifier)' (\(data.count) bytes) is not a JSON document")
            }
        }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw WormholeError(
                .decodingFailed, value: identifier.rawValue,
                "message for '\(identifier)' (\(data.count) bytes) does not decode as \(T.self): \(describe(error))")
        }
    }

    /// Checks that `data` is exactly one JSON value (any type, surrounding whitespace allowed).
    static func validateJSON(_ data: Data, identifier: MessageIdentifier) throws(WormholeError) {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw WormholeError(
                .invalidJSON, value: identifier.rawValue,
                "message for '\(identifier)' is not a JSON document (\(data.count) bytes): \(describe(error))")
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): return "corrupt data: \(context.debugDescription)"
        case DecodingError.keyNotFound(let key, _): return "missing key '\(key.stringValue)'"
        case DecodingError.typeMismatch(let type, let context):
            return "expected \(type) at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.valueNotFound(let type, let context):
            return "no \(type) at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        default:
            let nsError = error as NSError
            return (nsError.userInfo[NSDebugDescriptionErrorKey] as? String) ?? "\(error)"
        }
    }
}

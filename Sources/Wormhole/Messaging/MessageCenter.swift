// SPDX-License-Identifier: Apache-2.0
public import FoundationEssentials
import Glibc
public import Logging
import Synchronization
public import WormholeDBus

/// MMWormhole for Linux: last-value mailboxes in an app-group container, with a D-Bus
/// notification per identifier that wakes listeners in other processes at once.
///
/// ```swift
/// let wormhole = try MessageCenter(applicationGroupIdentifier: "group.com.example.counter")
/// // The watch side:
/// try wormhole.passMessage(["buttonNumber": 3], identifier: "button")
/// // The app side, in another process (keep the listener: releasing it stops it):
/// let listener = try wormhole.listen(identifier: "button", as: [String: Int].self) { delivery in
///     if let message = try? delivery.result.get() { print(message["buttonNumber"]!) }
/// }
/// ```
///
/// Every messaging method takes the identifier as a ``MessageIdentifier`` or as a `String`
/// (checked, then forwarded; an invalid one throws ``WormholeError/Code/invalidIdentifier``
/// before anything is written).
///
/// A message is stored as `<root>/<group>/<directory>/<identifier>.json` (replaced atomically)
/// and then `Posted` is emitted with the name `<group>/<directory>/<identifier>` (contract §3).
/// Storing never depends on the bus: if the bus is down, `passMessage` still stores the
/// message and reports that nobody was told.
///
/// Listeners are `SubscriptionHandle`s: active until cancelled or released. Their handlers run
/// where their `DeliveryQueue` says (see <doc:ThreadingAndDelivery>).
public final class MessageCenter: Sendable {
    /// How messages are stored.
    public enum Transiting: Sendable {
        /// `FileTransiting`: atomic replace (the contract's layout; the default).
        case file
        /// `CoordinatedFileTransiting`: the same files, with cross-process advisory locks.
        case coordinatedFile
        /// Your own storage. Notifications still use the contract's names.
        case custom(any WormholeTransiting)
    }

    /// The app-group container.
    public let container: GroupContainer
    /// The wormhole directory inside the container.
    package let directory: WormholeDirectoryName
    /// The storage in use.
    package let transiting: any WormholeTransiting
    /// The bus the wormhole posts and listens on (`nil`: the session bus).
    package let busAddress: BusAddress?
    /// The largest message, in bytes, this wormhole sends or reads (default
    /// ``defaultMaximumMessageSize``, 64 MiB). A larger one is refused with
    /// `messageTooLarge` naming the identifier, its size and the limit: a send before anything
    /// is stored, a read (and a listener's delivery) from the file's size, before the file is read.
    package let maximumMessageSize: Int

    /// The default largest message: 64 MiB (67,108,864 bytes).
    public static let defaultMaximumMessageSize = 64 << 20
    let logger: Logger
    let centers: LazyNotificationCenter
    /// Where the listeners and journal readers are registered, and how they are woken (the bus,
    /// or the directories).
    let wakeups: WakeEngine
    /// The layout of the wormhole directory; nil for a custom transiting (no directory to watch).
    let files: MessageFiles?
    private let lastSentAt = Atomic<UInt64>(0)

    /// Opens a wormhole (like MMWormhole's `initWithApplicationGroupIdentifier:optionalDirectory:`).
    ///
    /// Nothing is written and no bus connection is made until the first message or listener.
    /// - Parameters:
    ///   - group: the app group, such as `group.com.example.lines` (a string literal is one).
    ///   - directory: the directory inside the container (``WormholeDirectoryName/default``, `wormhole`).
    ///   - transiting: how messages are stored.
    ///   - durability: for the built-in transitings: whether writes are `fsync`ed.
    ///   - containerRoot: the root of all group containers; `nil` resolves it from the
    ///     environment (`$WORMHOLE_CONTAINER_ROOT`, `$XDG_DATA_HOME/group-containers`,
    ///     `$HOME/.local/share/group-containers`).
    ///   - busAddress: the bus; `nil` for the session bus.
    ///   - maximumMessageSize: the largest message in bytes (see `maximumMessageSize`; a
    ///     negative limit counts as 0). A custom transiting must apply it when it reads;
    ///     sends are checked here for every transiting.
    ///   - sharedStateDirectory: see ``DarwinNotificationCenter/init(busAddress:sharedStateDirectory:wake:logger:)``.
    ///   - wake: whether sends ring this user's Wormhole listeners directly beside the bus signal,
    ///     and listeners are rung (``PeerWake/doorbell``, the default), or not (``PeerWake/busOnly``).
    ///   - logger: where the library logs (swift-log).
    /// - Throws: ``WormholeError`` naming an invalid container root, before touching disk or bus.
    public init(
        applicationGroupIdentifier group: GroupIdentifier, directory: WormholeDirectoryName = .default,
        transiting: Transiting = .file, durability: GroupContainer.Durability = .atomic, containerRoot: String? = nil,
        busAddress: BusAddress? = nil, maximumMessageSize: Int = MessageCenter.defaultMaximumMessageSize,
        sharedStateDirectory: String? = nil,
        wake: PeerWake = .doorbell, logger: Logger = Logger(label: "wormhole")
    ) throws {
        self.maximumMessageSize = max(0, maximumMessageSize)
        self.directory = directory
        container = try GroupContainer(group: group, root: containerRoot)
        switch transiting {
        case .file:
            self.transiting = FileTransiting(
                container: container, directory: self.directory, durability: durability,
                maximumMessageSize: self.maximumMessageSize)
        case .coordinatedFile:
            self.transiting = CoordinatedFileTransiting(
                container: container, directory: self.directory, durability: durability,
                maximumMessageSize: self.maximumMessageSize)
        case .custom(let custom): self.transiting = custom
        }
        self.busAddress = busAddress
        self.logger = logger
        centers = LazyNotificationCenter(
            busAddress: busAddress, sharedStateDirectory: sharedStateDirectory, wake: wake, logger: logger)
        files = (self.transiting as? FileTransiting)?.files ?? (self.transiting as? CoordinatedFileTransiting)?.files
        wakeups = WakeEngine(centers: centers, logger: logger)
    }

    /// The notification name for `identifier`: `<group>/<directory>/<identifier>`.
    package func notificationName(for identifier: MessageIdentifier) -> NotificationName {
        // At most 255 + 1 + 255 + 1 + 200 bytes of `A-Z a-z 0-9 . _ - /`: always a valid name, so
        // the checks (which build the match rule, costly on every send) are skipped.
        NotificationName(valid: "\(container.group.rawValue)/\(directory.rawValue)/\(identifier.rawValue)")
    }

    /// The prefix every notification of this wormhole starts with: `<group>/<directory>/`.
    package var notificationPrefix: NotificationName {
        try! NotificationName("\(container.group.rawValue)/\(directory.rawValue)/")
    }

    /// The notification center, connecting on first use; a failed connection is retried next time.
    ///
    /// The connection is made outside any lock, so a send on another thread never waits behind
    /// it; when two threads connect at once, the first to finish wins and the other's
    /// connection is closed.
    package func notificationCenter() throws -> DarwinNotificationCenter { try centers.get() }

    // MARK: Sending

    /// What happened to the notification after a message was stored.
    public struct SendReport: Sendable {
        /// When the message was written: nanoseconds since 1970 (`CLOCK_REALTIME`), strictly
        /// increasing within a process. The notification carries it as its state, so it
        /// differs for every write, and a listener's ``MessageDelivery/sentAt`` is this value.
        public var sentAt: UInt64
        /// Why listeners were not told, when they were not (the bus is down or unreachable).
        /// The message is stored either way; listeners catch up when they reconnect.
        public var notificationError: (any Error)?
        /// Whether the notification was sent.
        package var notified: Bool { notificationError == nil }
    }

    /// Stores `message` as the JSON document for `identifier` (replacing the previous one
    /// atomically) and notifies listeners.
    ///
    /// - Returns: whether listeners were notified. A bus that is down is not an error here: the
    ///   message is stored, the problem is logged and returned in the report.
    /// - Throws: ``WormholeError`` for a message that does not encode, or a storage failure.
    @discardableResult
    public func passMessage(_ message: some Encodable, identifier: MessageIdentifier) throws -> SendReport {
        // `Data` is `Encodable` as a base64 JSON string, almost never what is meant: refused
        // (JSON bytes go through `JSONDocument(data:)`).
        if message is Data { throw Self.refuseData(identifier.rawValue) }
        // JSONEncoder's output is one JSON document: no need to parse it again.
        let data = try Self.encode(message, identifier: identifier)
        try checkSize(data.count, identifier: identifier)
        try transiting.writeMessage(data, identifier: identifier)
        return notify(identifier)
    }

    /// Stores a JSON document exactly as given (its bytes, already checked to be one JSON
    /// value by ``JSONDocument/init(data:)``) and notifies listeners. This is how raw bytes
    /// are sent.
    @discardableResult
    public func passMessage(_ document: JSONDocument, identifier: MessageIdentifier) throws -> SendReport {
        try checkSize(document.data.count, identifier: identifier)
        try transiting.writeMessage(document.data, identifier: identifier)
        return notify(identifier)
    }

    static func refuseData(_ identifier: String) -> WormholeError {
        WormholeError(
            .encodingFailed, value: identifier,
            "message for '\(identifier)' is raw Data, which would be stored as a base64 string; "
                + "send JSON bytes as JSONDocument(data:)")
    }

    /// Wakes listeners of `identifier` without changing the stored message; they read and
    /// deliver what is stored (MMWormhole's nil message left them reading a stale file).
    @discardableResult
    public func passMessage(identifier: MessageIdentifier) -> SendReport {
        notify(identifier)
    }

    /// Removes the message for `identifier` and notifies, so listeners learn the mailbox is
    /// empty (they receive a ``WormholeError/Code/noMessage`` delivery).
    @discardableResult
    public func clearMessage(identifier: MessageIdentifier) throws -> SendReport {
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

    /// Throws ``WormholeError/Code/messageTooLarge`` for a message over `maximumMessageSize`.
    func checkSize(_ size: Int, identifier: MessageIdentifier) throws(WormholeError) {
        if size > maximumMessageSize {
            throw MessageFiles.tooLarge(identifier, size: size, limit: maximumMessageSize, path: nil)
        }
    }

    /// Posts the identifier's name with a fresh state; never throws.
    private func notify(_ identifier: MessageIdentifier) -> SendReport {
        let sentAt = nextSentAt()
        do {
            let center = try notificationCenter()
            try center.post(notificationName(for: identifier), state: sentAt)
            return SendReport(sentAt: sentAt, notificationError: nil)
        } catch {
            logger.warning(
                "message stored but listeners were not notified",
                metadata: ["identifier": "\(identifier)", "error": "\(error)"])
            return SendReport(sentAt: sentAt, notificationError: error)
        }
    }

    /// Nanoseconds since 1970, made strictly increasing within the process.
    private func nextSentAt() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        let now = UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
        while true {
            let last = lastSentAt.load(ordering: .relaxed)
            let next = max(now, last &+ 1)
            if lastSentAt.compareExchange(expected: last, desired: next, ordering: .relaxed).exchanged { return next }
        }
    }

    /// Blocks until the notifications of earlier sends are on the bus, at most `timeout`. Sends
    /// on other threads do not wait behind it.
    ///
    /// Not needed before exiting: a notification a send accepted (its ``SendReport`` carries no
    /// error) is on the bus before the process exits normally. See
    /// ``DarwinNotificationCenter/flush(timeout:)``.
    /// - Returns: `nil` when they are on the bus (or nothing was sent); else why not.
    @discardableResult
    public func flush(timeout: Duration = DarwinNotificationCenter.defaultFlushTimeout) -> (any Error)? {
        centers.existing()?.flush(timeout: timeout)
    }

    // MARK: Reading

    /// The message stored for `identifier`, decoded, or `nil` when none is stored.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/decodingFailed`` when the stored
    ///   document does not decode as `T`, or a storage error.
    public func message<T: Decodable>(identifier: MessageIdentifier, as type: T.Type = T.self) throws -> T? {
        guard let data = try transiting.messageData(identifier: identifier) else { return nil }
        return try Self.decode(data, as: type, identifier: identifier)
    }

    /// The stored JSON document for `identifier`, as stored, or `nil`.
    public func messageData(identifier: MessageIdentifier) throws -> Data? {
        try transiting.messageData(identifier: identifier)
    }

    // MARK: Coding

    /// `message` as one compact JSON document, with `encoder` (a journal keeps one); `subject`
    /// names where it goes in the error (`'inbox'`, `journal 'events'`), made only for one.
    static func encode(
        _ message: some Encodable, identifier: MessageIdentifier, with encoder: JSONEncoder,
        subject: @autoclosure () -> String
    ) throws(WormholeError) -> Data {
        do {
            return try encoder.encode(message)
        } catch {
            throw WormholeError(
                .encodingFailed, value: identifier.rawValue,
                "message for \(subject()) cannot be encoded as JSON: \(error)")
        }
    }

    /// `message` as one compact JSON document for the mailbox or transient message `identifier`.
    static func encode(_ message: some Encodable, identifier: MessageIdentifier) throws(WormholeError) -> Data {
        try encode(message, identifier: identifier, with: makeEncoder(), subject: quoted(identifier.rawValue))
    }

    /// The encoder of messages: compact, `/` as it is.
    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }

    static func decode<T: Decodable>(
        _ data: Data, as type: T.Type, identifier: MessageIdentifier
    ) throws(WormholeError) -> T {
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

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): return "corrupt data: \(context.debugDescription)"
        case DecodingError.keyNotFound(let key, _): return "missing key '\(key.stringValue)'"
        case DecodingError.typeMismatch(let type, let context):
            return "expected \(type) at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.valueNotFound(let type, let context):
            return "no \(type) at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        default:
            return "\(error)"
        }
    }
}

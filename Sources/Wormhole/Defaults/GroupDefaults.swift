public import Foundation
public import Logging
import Synchronization
public import WormholeDBus

/// The app group's shared settings suite, the counterpart of `UserDefaults(suiteName: "group.…")`:
/// safe across processes, never stale, with a D-Bus notification per changed key (contract §5).
///
/// ```swift
/// let defaults = try GroupDefaults(applicationGroupIdentifier: "group.com.example.lines")
/// try defaults.set("EUR", forKey: "currency")
/// print(defaults.string(forKey: "currency") ?? "none")
/// let observer = try defaults.observe("currency") { change in print(change.value ?? "removed") }
/// ```
///
/// The suite is one JSON object in `<root>/<group>/Preferences/<suite>.json` (mode 0600), replaced
/// atomically; writers serialise with `flock` on `<suite>.json.lock`, so `update(_:_:)` never
/// loses an increment and ``transaction(_:)`` changes several keys at once. Reads come from a cache
/// checked with one `lstat` of the file, so a read that starts after another process's write
/// returned sees it, with or without the bus. After each write that changed something, `Posted`
/// is emitted for every changed key with the name `<group>/Preferences/<suite>/<key>` and the
/// suite's new generation as state.
///
/// The reading methods of the `UserDefaults` vocabulary return nil (or 0, false) when the suite
/// cannot be read, and log why; ``value(forKey:)`` and ``values()`` throw instead.
public final class GroupDefaults: Sendable {
    /// The app-group container.
    public let container: GroupContainer
    /// The suite (the group identifier unless named).
    public let suite: SuiteName
    /// The bus changes are posted and observed on (`nil`: the session bus).
    public let busAddress: BusAddress?
    /// The suite file, `<root>/<group>/Preferences/<suite>.json`.
    public var path: String { store.path }
    /// The prefix of every key's notification name, `<group>/Preferences/<suite>/`.
    public let notificationPrefix: NotificationName

    let store: SuiteStore
    let logger: Logger
    let centers: LazyNotificationCenter
    private let registered = Mutex<[String: PropertyListValue]>([:])

    /// Opens a suite (like `UserDefaults(suiteName:)`). Nothing is written and no bus connection is
    /// made until the first write or observer.
    ///
    /// - Parameters:
    ///   - applicationGroupIdentifier: the app group, such as `group.com.example.lines`.
    ///   - suiteName: the suite; `nil` for the group's default suite, named like the group.
    ///   - durability: whether writes are `fsync`ed (``FileTransiting/Durability``).
    ///   - containerRoot: the root of all group containers; `nil` resolves it from the environment.
    ///   - busAddress: the bus; `nil` for the session bus.
    ///   - sharedStateDirectory: see ``DarwinNotificationCenter/init(busAddress:sharedStateDirectory:logger:)``.
    ///   - logger: where the library logs (swift-log).
    /// - Throws: ``WormholeError`` naming an invalid group or suite (a group identifier over 200
    ///   bytes has no default suite), before touching disk or bus.
    public init(
        applicationGroupIdentifier: String, suiteName: String? = nil, durability: FileTransiting.Durability = .atomic,
        containerRoot: String? = nil, busAddress: BusAddress? = nil, sharedStateDirectory: String? = nil,
        logger: Logger = Logger(label: "wormhole.defaults")
    ) throws {
        let group = try GroupIdentifier(applicationGroupIdentifier)
        suite = try suiteName.map(SuiteName.init) ?? SuiteName(defaultFor: group)
        container = try GroupContainer(group: group, root: containerRoot)
        self.busAddress = busAddress
        self.logger = logger
        // At most 255 + 13 + 200 + 1 bytes of ASCII: always a valid name.
        notificationPrefix = try NotificationName(
            "\(group.rawValue)/\(WormholeDirectoryName.reservedForDefaults)/\(suite.rawValue)/")
        store = SuiteStore(container: container, suite: suite, durability: durability, logger: logger)
        centers = LazyNotificationCenter(busAddress: busAddress, sharedStateDirectory: sharedStateDirectory, logger: logger)
    }

    /// The notification name of `key`, `<group>/Preferences/<suite>/<key>`.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/invalidKey`` for an empty key, a key with
    ///   NUL, or one that makes the name longer than 900 bytes (or its match rule too long).
    public func notificationName(forKey key: String) throws -> NotificationName {
        try DefaultsKeyRules.name(for: key, prefix: notificationPrefix.rawValue)
    }

    /// The notification center changes are posted on, connecting on first use.
    public func notificationCenter() throws -> DarwinNotificationCenter { try centers.get() }

    // MARK: Reading

    /// Every stored value (without the registered defaults).
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/corruptSuite`` when the file does not
    ///   parse (it has been moved aside), or a storage error.
    public func values() throws -> [String: PropertyListValue] { try store.snapshot().values }

    /// The stored value for `key`, else its registered default, else nil.
    ///
    /// A key that could never be stored (empty, too long) reads as absent.
    ///
    /// - Throws: as ``values()``.
    public func value(forKey key: String) throws -> PropertyListValue? {
        // One lstat and a dictionary lookup when the file has not changed since the last read.
        return try store.snapshot().values[key] ?? registered.withLock { $0[key] }
    }

    /// The stored suite as one line of compact JSON in the file's format (a plain object, keys
    /// sorted): what `wormhole defaults read` prints without a key.
    ///
    /// - Throws: as ``values()``.
    public func jsonText() throws -> String {
        var output: [UInt8] = []
        SuiteJSON.appendObject(try values(), to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// The value for `key` as Foundation types (`String`, `Int`, `Double`, `Bool`, `Date`, `Data`,
    /// `URL`, `[Any]`, `[String: Any]`), or nil.
    public func object(forKey key: String) -> Any? { lenient(key)?.object }

    /// The string for `key`, or nil when absent or not a string.
    public func string(forKey key: String) -> String? {
        if case .string(let value)? = lenient(key) { return value }
        return nil
    }

    /// The integer for `key` (a `Double` is truncated, a `Bool` is 0 or 1); 0 when absent.
    public func integer(forKey key: String) -> Int {
        switch lenient(key) {
        case .integer(let value)?: value
        case .double(let value)? where value.isFinite && abs(value) < 9.2e18: Int(value)
        case .bool(let value)?: value ? 1 : 0
        case .string(let text)?: Int(text) ?? 0
        default: 0
        }
    }

    /// The double for `key` (an `Int` is converted); 0 when absent.
    public func double(forKey key: String) -> Double {
        switch lenient(key) {
        case .double(let value)?: value
        case .integer(let value)?: Double(value)
        case .bool(let value)?: value ? 1 : 0
        case .string(let text)?: Double(text) ?? 0
        default: 0
        }
    }

    /// The Boolean for `key` (a nonzero number is true); false when absent.
    public func bool(forKey key: String) -> Bool {
        switch lenient(key) {
        case .bool(let value)?: value
        case .integer(let value)?: value != 0
        case .double(let value)?: value != 0
        case .string(let text)?: ["yes", "true", "1"].contains(text.lowercased())
        default: false
        }
    }

    /// The data for `key`, or nil.
    public func data(forKey key: String) -> Data? {
        if case .data(let value)? = lenient(key) { return value }
        return nil
    }

    /// The array for `key`, as Foundation types, or nil.
    public func array(forKey key: String) -> [Any]? {
        if case .array(let values)? = lenient(key) { return values.map(\.object) }
        return nil
    }

    /// The dictionary for `key`, as Foundation types, or nil.
    public func dictionary(forKey key: String) -> [String: Any]? {
        if case .dictionary(let values)? = lenient(key) { return values.mapValues(\.object) }
        return nil
    }

    /// The URL for `key` (a string is read as a file path, as `UserDefaults` does), or nil.
    public func url(forKey key: String) -> URL? {
        switch lenient(key) {
        case .url(let value)?: value
        case .string(let path)?: URL(fileURLWithPath: (path as NSString).expandingTildeInPath)
        default: nil
        }
    }

    /// Every stored value with the registered defaults under them, as Foundation types.
    public func dictionaryRepresentation() -> [String: Any] {
        let stored = (try? values()) ?? [:]
        return registered.withLock { $0 }.merging(stored) { _, new in new }.mapValues(\.object)
    }

    /// Registers defaults for keys that have no stored value, in this object only (they are never
    /// written to the suite), like `UserDefaults.register(defaults:)`.
    ///
    /// - Throws: ``WormholeError`` naming a key or value that is refused; nothing is registered then.
    public func register(defaults: [String: Any]) throws {
        var converted: [String: PropertyListValue] = [:]
        for (key, value) in defaults {
            _ = try notificationName(forKey: key)
            converted[key] = try PropertyListValue(value, key: key)
        }
        registered.withLock { $0.merge(converted) { _, new in new } }
    }

    /// The value for `key` for the non-throwing readers: a problem is logged and reads as absent.
    private func lenient(_ key: String) -> PropertyListValue? {
        do {
            return try value(forKey: key)
        } catch {
            logger.error("cannot read '\(key)' from \(path): \(error)")
            return nil
        }
    }

    // MARK: Writing

    /// What a write did.
    public struct WriteReport: Sendable {
        /// The keys whose stored value changed, sorted (empty when the write changed nothing:
        /// then nothing was written or posted).
        public var changedKeys: [String]
        /// The suite's generation after the write: the suite file's modification time in
        /// nanoseconds since 1970, strictly increasing with every write; the state of the posts.
        public var generation: UInt64
        /// Why observers were not told, when they were not (the bus is down or unreachable).
        /// The suite is written either way; observers catch up when they reconnect.
        public var notificationError: (any Error)?
    }

    /// Stores `value` for `key` (nil removes it), like `UserDefaults.set(_:forKey:)`.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/invalidValue`` for a value that is not
    ///   a property-list type, ``WormholeError/Code/invalidKey`` for a bad key (both before anything
    ///   is written), or a storage error.
    @discardableResult
    public func set(_ value: Any?, forKey key: String) throws -> WriteReport {
        _ = try notificationName(forKey: key)
        let converted = try value.map { try PropertyListValue($0, key: key) }
        return try write { $0[key] = converted }
    }

    /// Removes the value for `key`, like `UserDefaults.removeObject(forKey:)`.
    @discardableResult
    public func removeObject(forKey key: String) throws -> WriteReport {
        try set(nil, forKey: key)
    }

    /// Replaces the value for `key` with what `transform` returns for the current one (nil:
    /// absent, and returning nil removes it), holding the suite's lock throughout: no other
    /// process's write comes in between, so a counter never loses an increment.
    ///
    /// ```swift
    /// try defaults.update("launches") { .integer(($0?.intValue ?? 0) + 1) }
    /// ```
    @discardableResult
    public func update(
        _ key: String, _ transform: (PropertyListValue?) throws -> PropertyListValue?
    ) throws -> WriteReport {
        _ = try notificationName(forKey: key)
        return try write { values in values[key] = try transform(values[key]) }
    }

    /// Changes several keys at once under the suite's lock: the suite file is replaced once, so
    /// readers and observers see all of the changes or none of them. If `body` throws, nothing is
    /// written.
    ///
    /// ```swift
    /// try defaults.transaction { suite in
    ///     try suite.set("dark", forKey: "theme")
    ///     try suite.set(2, forKey: "themeVersion")
    /// }
    /// ```
    @discardableResult
    public func transaction(_ body: (inout Transaction) throws -> Void) throws -> WriteReport {
        let prefix = notificationPrefix.rawValue
        return try write { values in
            var transaction = Transaction(values: values, prefix: prefix)
            try body(&transaction)
            values = transaction.values
        }
    }

    /// The suite inside ``GroupDefaults/transaction(_:)``.
    public struct Transaction: Sendable {
        /// The values as they will be written.
        public private(set) var values: [String: PropertyListValue]
        let prefix: String

        /// The value for `key` (stored or set earlier in this transaction).
        public subscript(key: String) -> PropertyListValue? { values[key] }

        /// Sets `value` for `key` (nil removes it).
        ///
        /// - Throws: ``WormholeError`` for a bad key or a value that is not a property-list type.
        public mutating func set(_ value: Any?, forKey key: String) throws {
            _ = try DefaultsKeyRules.name(for: key, prefix: prefix)
            values[key] = try value.map { try PropertyListValue($0, key: key) }
        }

        /// Removes the value for `key`.
        public mutating func removeObject(forKey key: String) {
            values[key] = nil
        }
    }

    /// Runs `body` under the lock, writes, and posts one notification per changed key.
    func write(_ body: (inout [String: PropertyListValue]) throws -> Void) throws -> WriteReport {
        let outcome = try store.modify(body)
        var report = WriteReport(changedKeys: outcome.changes.map(\.key), generation: outcome.generation)
        guard !outcome.changes.isEmpty else { return report }
        do {
            let center = try centers.get()
            for change in outcome.changes {
                // Keys set here were checked at the call; a key only a foreign writer could have
                // made, and that makes no valid name, cannot be posted.
                guard let name = NotificationName(received: notificationPrefix.rawValue + change.key),
                    !change.key.utf8.contains(0)
                else {
                    logger.warning("key \(NameRules.quoted(change.key)) changed but makes no valid notification name")
                    continue
                }
                try center.post(name, state: outcome.generation)
            }
        } catch {
            logger.warning(
                "suite written but observers were not notified",
                metadata: ["suite": "\(suite)", "error": "\(error)"])
            report.notificationError = error
        }
        return report
    }

    /// Blocks until the notifications of earlier writes are on the bus, at most `timeout`.
    ///
    /// Not needed before exiting: a notification a write accepted is on the bus before the
    /// process exits normally. See ``DarwinNotificationCenter/flush(timeout:)``.
    /// - Returns: `nil` when they are on the bus (or nothing was posted); else why not.
    @discardableResult
    public func flush(timeout: Duration = DarwinNotificationCenter.defaultFlushTimeout) -> (any Error)? {
        centers.existing()?.flush(timeout: timeout)
    }
}

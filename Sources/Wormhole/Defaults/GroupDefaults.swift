public import FoundationEssentials
public import Logging
public import WormholeDBus
import WormholeSystem

/// The app group's shared settings suite, the counterpart of `UserDefaults(suiteName: "group.…")`:
/// safe across processes, never stale, with a D-Bus notification per changed key (contract §5).
///
/// ```swift
/// let defaults = try GroupDefaults(applicationGroupIdentifier: "group.com.example.lines")
/// try defaults.set("EUR", forKey: "currency")
/// print(defaults.string(forKey: "currency") ?? "none")
/// let observer = try defaults.listen(forKey: "currency") { change in print(change.value ?? "removed") }
/// ```
///
/// The suite is one JSON object in `<root>/<group>/Preferences/<suite>.json` (mode 0600), replaced
/// atomically; writers serialise with `flock` on `<suite>.json.lock`, so `update(_:_:)` never
/// loses an increment and ``transaction(_:)`` changes several keys at once. Reads come from a cache
/// checked with one `lstat` of the file, so a read that starts after another process's write
/// returned sees it, with or without the bus; with ``Freshness/changeCounter`` the check is one
/// load of the suite's shared change counter instead (no system call; see ``Freshness``). After each write that changed something, `Posted`
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
    /// The largest suite file this object writes, in bytes of JSON (contract §5, v1.2): a write
    /// that adds or changes a value and would leave the suite larger is refused with
    /// ``WormholeError/Code/suiteTooLarge``; removing keys is always allowed. Readers read
    /// suites of any size.
    public let maximumSuiteBytes: Int

    /// The default suite limit: 4 MiB of JSON.
    public static let defaultMaximumSuiteBytes = 4 << 20

    /// How a read checks that its cache is current.
    public enum Freshness: Sendable, Hashable {
        /// One `lstat` of the suite file per read (about 1.3 µs on a 2-core VM): sees the change of
        /// every writer, a script that replaces `<suite>.json` as contract §5 describes included.
        /// The default.
        case everyWriter
        /// One load of the suite's shared change counter per read, no system call (well under
        /// 0.2 µs): sees the change of every writer that increments the counter after its rename
        /// (every Wormhole writer, and a foreign writer that follows
        /// contract section 5, docs/shared-defaults.md). A writer that only follows contract 1.2 §5 (it
        /// replaces the file without counting) is seen at the next counting write of the suite,
        /// not before. Until the suite's first counting write, reads check with `lstat`.
        case changeCounter
    }

    /// How this object's reads check their cache (``Freshness``).
    public let freshness: Freshness

    let store: SuiteStore
    let logger: Logger
    let centers: LazyNotificationCenter
    /// Where the observers are registered, and how they are woken (the bus, or the
    /// `Preferences` directory while there is none).
    let wakeups: WakeEngine
    private let registered = Locked<[String: PropertyListValue]>([:])

    /// Opens a suite (like `UserDefaults(suiteName:)`). Nothing is written and no bus connection is
    /// made until the first write or observer.
    ///
    /// - Parameters:
    ///   - applicationGroupIdentifier: the app group, such as `group.com.example.lines`.
    ///   - suiteName: the suite; `nil` for the group's default suite, named like the group.
    ///   - durability: whether writes are `fsync`ed (``FileTransiting/Durability``).
    ///   - containerRoot: the root of all group containers; `nil` resolves it from the environment.
    ///   - busAddress: the bus; `nil` for the session bus.
    ///   - sharedStateDirectory: see ``DarwinNotificationCenter/init(busAddress:sharedStateDirectory:wake:logger:)``.
    ///   - maximumSuiteBytes: the largest suite this object writes (``maximumSuiteBytes``; 4 MiB
    ///     by default).
    ///   - freshness: how a read checks its cache (``Freshness``; one `lstat` by default).
    ///   - wake: whether writes ring this user's Wormhole observers directly beside the bus signal,
    ///     and observers are rung (``PeerWake/doorbell``, the default), or not (``PeerWake/busOnly``).
    ///   - logger: where the library logs (swift-log).
    /// - Throws: ``WormholeError`` naming an invalid group or suite (a group identifier over 200
    ///   bytes has no default suite) or a limit below 2 bytes, before touching disk or bus.
    public init(
        applicationGroupIdentifier: String, suiteName: String? = nil, durability: FileTransiting.Durability = .atomic,
        containerRoot: String? = nil, busAddress: BusAddress? = nil, sharedStateDirectory: String? = nil,
        maximumSuiteBytes: Int = GroupDefaults.defaultMaximumSuiteBytes, freshness: Freshness = .everyWriter,
        wake: PeerWake = .doorbell,
        logger: Logger = Logger(label: "wormhole.defaults")
    ) throws {
        guard maximumSuiteBytes >= 2 else {
            throw WormholeError(
                .invalidValue, value: String(maximumSuiteBytes),
                "suite limit \(maximumSuiteBytes) is too small; a suite is at least 2 bytes ({})")
        }
        self.maximumSuiteBytes = maximumSuiteBytes
        let group = try GroupIdentifier(applicationGroupIdentifier)
        suite = try suiteName.map(SuiteName.init) ?? SuiteName(defaultFor: group)
        container = try GroupContainer(group: group, root: containerRoot)
        self.busAddress = busAddress
        self.logger = logger
        // At most 255 + 13 + 200 + 1 bytes of ASCII: always a valid name.
        notificationPrefix = try NotificationName(
            "\(group.rawValue)/\(WormholeDirectoryName.reservedForDefaults)/\(suite.rawValue)/")
        self.freshness = freshness
        store = SuiteStore(container: container, suite: suite, durability: durability, freshness: freshness, logger: logger)
        centers = LazyNotificationCenter(
            busAddress: busAddress, sharedStateDirectory: sharedStateDirectory, wake: wake, logger: logger)
        wakeups = WakeEngine(centers: centers, logger: logger)
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

    /// Every stored value this version understands (without the registered defaults). A value
    /// it does not understand (an unknown `$` tag a newer version wrote) is left out; ``keys()``
    /// lists it and ``storedJSON(forKey:)`` returns it.
    ///
    /// Reading never changes the disk.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/corruptSuite`` when the file is not
    ///   one JSON object (naming the file and byte offset; the file is left as it is; see
    ///   ``repair()``), or a storage error.
    public func values() throws -> [String: PropertyListValue] { try store.snapshot().values }

    /// Every stored key, sorted, values this version does not understand included.
    ///
    /// - Throws: as ``values()``.
    public func keys() throws -> [String] { try store.snapshot().contents.keys.sorted() }

    /// The stored value for `key`, else its registered default, else nil.
    ///
    /// A key that could never be stored (empty, too long) reads as absent.
    ///
    /// - Throws: as ``values()``, and ``WormholeError/Code/typeMismatch`` for a value this
    ///   version does not understand (an unknown `$` tag: that key only; it is kept as it is).
    public func value(forKey key: String) throws -> PropertyListValue? {
        // One lstat and a dictionary lookup when the file has not changed since the last read.
        let contents = try store.snapshot().contents
        if let value = contents.values[key] { return value }
        if let raw = contents.unknown[key] { throw Self.unknownValue(key, raw) }
        return registered.withLock { $0[key] }
    }

    static func unknownValue(_ key: String, _ raw: [UInt8]) -> WormholeError {
        let shown = raw.count > 80 ? String(decoding: raw.prefix(80), as: UTF8.self) + "…" : String(decoding: raw, as: UTF8.self)
        return WormholeError(
            .typeMismatch, value: key,
            "the value of key \(NameRules.quoted(key)) is not one this version understands (\(shown)); it is kept as it is")
    }

    /// The stored JSON of `key` as one line (compact for values this version understands, as
    /// stored for the others), or nil when absent: what `wormhole defaults read KEY` prints.
    ///
    /// - Throws: as ``values()``.
    public func storedJSON(forKey key: String) throws -> String? {
        try store.snapshot().contents.jsonBytes(forKey: key).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The stored suite as one line of compact JSON in the file's format (a plain object, keys
    /// sorted; values this version does not understand as they are stored): what
    /// `wormhole defaults read` prints without a key.
    ///
    /// - Throws: as ``values()``.
    public func jsonText() throws -> String {
        String(decoding: SuiteJSON.compactSuite(try store.snapshot().contents), as: UTF8.self)
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
        case .string(let path)?: URL(fileURLWithPath: PathText.expandingTilde(path))
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
        if let converted { try checkFits(converted, forKey: key) }
        return try write { $0[key] = converted }
    }

    /// Refuses, before the suite is read or locked, a value that alone makes a suite over the
    /// limit (its key and value, in the file's JSON form, with the braces around them).
    func checkFits(_ value: PropertyListValue, forKey key: String) throws {
        let size = key.utf8.count + 2 + SuiteJSON.minimumSize(of: value) + 5
        if size > maximumSuiteBytes {
            throw WormholeError(
                .suiteTooLarge, value: key,
                "the value for key \(NameRules.quoted(key)) makes suite '\(suite)' at least \(size) bytes, over its limit of "
                    + "\(maximumSuiteBytes) bytes; nothing was written")
        }
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
    /// try defaults.update(forKey: "launches") { .integer(($0?.intValue ?? 0) + 1) }
    /// ```
    ///
    /// - Throws: what `transform` throws (nothing is written then), ``WormholeError/Code/typeMismatch``
    ///   when the stored value is one this version does not understand (it is kept), and the
    ///   errors of ``set(_:forKey:)``.
    @discardableResult
    public func update(
        forKey key: String, _ transform: (PropertyListValue?) throws -> PropertyListValue?
    ) throws -> WriteReport {
        _ = try notificationName(forKey: key)
        return try write { contents in
            if let raw = contents.unknown[key] { throw Self.unknownValue(key, raw) }
            let new = try transform(contents.values[key])?.normalized
            contents[key] = new
        }
    }

    /// The same as ``update(forKey:_:)``.
    @discardableResult
    public func update(
        _ key: String, _ transform: (PropertyListValue?) throws -> PropertyListValue?
    ) throws -> WriteReport {
        try update(forKey: key, transform)
    }

    /// Adds `amount` (which may be negative) to the integer stored for `key` under the suite's
    /// lock, an absent key counting as 0, and returns the new value: any number of processes
    /// incrementing at once lose nothing.
    ///
    /// - Throws: ``WormholeError/Code/typeMismatch`` naming the key and the stored type when the
    ///   value is not an `Int` (a `Double` included: `2.0` is not an integer), or an overflow;
    ///   nothing changes then.
    @discardableResult
    public func increment(forKey key: String, by amount: Int = 1) throws -> Int {
        var result = 0
        try update(forKey: key) { old in
            let current: Int
            switch old {
            case nil: current = 0
            case .integer(let value)?: current = value
            case let other?:
                throw WormholeError(
                    .typeMismatch, value: key,
                    "key \(NameRules.quoted(key)) holds \(other.typeName) \(other.jsonText), not an integer; nothing changed")
            }
            let (sum, overflow) = current.addingReportingOverflow(amount)
            if overflow {
                throw WormholeError(
                    .typeMismatch, value: key,
                    "key \(NameRules.quoted(key)) holds the integer \(current); adding \(amount) overflows a signed 64-bit Int; "
                        + "nothing changed")
            }
            result = sum
            return .integer(sum)
        }
        return result
    }

    /// Stores every value of `values` in one atomic write (observers are told once per changed
    /// key); with `replacingAll`, also removes every key `values` does not name. An empty
    /// dictionary changes nothing (with `replacingAll`: empties the suite).
    ///
    /// - Throws: ``WormholeError`` naming a bad key (before anything is written), or the errors
    ///   of ``set(_:forKey:)``.
    @discardableResult
    public func setValues(_ values: [String: PropertyListValue], replacingAll: Bool = false) throws -> WriteReport {
        for key in values.keys { _ = try notificationName(forKey: key) }
        let normalized = values.mapValues(\.normalized)
        return try write { contents in
            if replacingAll {
                for key in contents.keys where normalized[key] == nil { contents[key] = nil }
            }
            for (key, value) in normalized { contents[key] = value }
        }
    }

    /// Parses one JSON object of values in the suite file's format (what `wormhole defaults
    /// load` reads): duplicate keys, the last wins; `null`, an unknown tag or anything but an
    /// object is refused, naming the key or the byte offset.
    package static func parseValues(_ data: Data) throws -> [String: PropertyListValue] {
        let contents: SuiteJSON.Contents
        do throws(SuiteJSON.ParseError) {
            contents = try SuiteJSON.decodeSuite(data)
        } catch {
            throw WormholeError(.invalidValue, "the input is not one JSON object of values: \(error)")
        }
        if let key = contents.unknown.keys.sorted().first, let raw = contents.unknown[key] {
            let text = String(decoding: raw.prefix(80), as: UTF8.self)
            let reason = text == "null" ? "null is not a storable value (use 'wormhole defaults delete')" : "it is not a property-list value"
            throw WormholeError(.invalidValue, value: key, "value for key \(NameRules.quoted(key)) (\(text)) is refused: \(reason)")
        }
        return contents.values
    }

    /// Moves a suite file that is not one JSON object aside to `<suite>.json.corrupt-<n>` (never
    /// deleted) so that the suite starts again empty, and returns where it went; on a suite that
    /// reads, or none, it changes nothing and returns nil. The only call that moves a suite
    /// aside: reads and writes never do (`wormhole defaults repair`).
    @discardableResult
    public func repair() throws -> String? {
        try store.repair()
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
        return try write { contents in
            var transaction = Transaction(values: contents.values, prefix: prefix)
            let before = contents.values
            try body(&transaction)
            // Values a newer version wrote stay unless the transaction set or removed their key.
            for key in Set(before.keys).union(transaction.values.keys).union(transaction.touched)
            where transaction.touched.contains(key) || before[key] != transaction.values[key] {
                contents[key] = transaction.values[key]
            }
        }
    }

    /// The suite inside ``GroupDefaults/transaction(_:)``.
    public struct Transaction: Sendable {
        /// The values as they will be written.
        public private(set) var values: [String: PropertyListValue]
        let prefix: String
        /// The keys set or removed in this transaction.
        var touched: Set<String> = []

        init(values: [String: PropertyListValue], prefix: String) {
            self.values = values
            self.prefix = prefix
        }

        /// The value for `key` (stored or set earlier in this transaction).
        public subscript(key: String) -> PropertyListValue? { values[key] }

        /// Sets `value` for `key` (nil removes it).
        ///
        /// - Throws: ``WormholeError`` for a bad key or a value that is not a property-list type.
        public mutating func set(_ value: Any?, forKey key: String) throws {
            _ = try DefaultsKeyRules.name(for: key, prefix: prefix)
            values[key] = try value.map { try PropertyListValue($0, key: key).normalized }
            touched.insert(key)
        }

        /// Removes the value for `key`.
        public mutating func removeObject(forKey key: String) {
            values[key] = nil
            touched.insert(key)
        }
    }

    /// Runs `body` under the lock, writes, and posts one notification per changed key.
    func write(_ body: (inout SuiteJSON.Contents) throws -> Void) throws -> WriteReport {
        let outcome = try store.modify(maximumBytes: maximumSuiteBytes, body)
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

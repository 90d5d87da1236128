import FoundationEssentials
public import Logging
public import WormholeDBus
import WormholeSystem

/// The app group's shared settings suite, the counterpart of `UserDefaults(suiteName: "group.…")`:
/// safe across processes, never stale, with a D-Bus notification per changed key (contract §5).
///
/// ```swift
/// let defaults = try GroupDefaults(applicationGroupIdentifier: "group.com.example.lines")
/// try defaults.set("EUR", forKey: "currency")
/// print(try defaults.value(forKey: "currency")?.stringValue ?? "none")
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
/// Reads are ``value(forKey:)`` and ``values()`` (a ``PropertyListValue``; they throw when the
/// suite cannot be read) or a typed key, `defaults[key]` (``Key``).
public final class GroupDefaults: Sendable {
    /// The app-group container.
    package let container: GroupContainer
    /// The suite (the group identifier unless named).
    public let suite: SuiteName
    /// The bus changes are posted and observed on (`nil`: the session bus).
    package let busAddress: BusAddress?
    /// The suite file, `<root>/<group>/Preferences/<suite>.json`.
    public var path: String { store.path }
    /// The prefix of every key's notification name, `<group>/Preferences/<suite>/`.
    package let notificationPrefix: NotificationName
    /// The largest suite file this object writes, in bytes of JSON (its writer's limit).
    package var maximumSuiteBytes: Int { writer.maximumBytes }

    /// The default suite limit: 4 MiB of JSON.
    public static let defaultMaximumSuiteBytes = 4 << 20

    /// How a read checks that its cache is current.
    public enum Freshness: Sendable, Hashable {
        /// One `lstat` of the suite file per read (its cost: docs/performance.md, *Figures behind
        /// the design*): sees the change of every writer, a script that replaces `<suite>.json` as contract §5 describes included.
        /// The default.
        case everyWriter
        /// One load of the suite's shared change counter per read, no system call: sees the change of every writer that increments the counter after its rename
        /// (every Wormhole writer, and a foreign writer that follows
        /// contract section 5, docs/shared-defaults.md). A writer that only follows contract 1.2 §5 (it
        /// replaces the file without counting) is seen at the next counting write of the suite,
        /// not before. Until the suite's first counting write, reads check with `lstat`.
        case changeCounter
    }

    /// How this object's reads check their cache (``Freshness``).
    package var freshness: Freshness { store.freshness }

    let store: SuiteStore
    /// Every write goes through it: the checks, the suite's lock, the posts.
    let writer: SuiteWriter
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
    ///   - group: the app group, such as `group.com.example.lines` (a string literal is one).
    ///   - suiteName: the suite; `nil` for the group's default suite, named like the group.
    ///   - durability: whether writes are `fsync`ed (``GroupContainer/Durability``).
    ///   - containerRoot: the root of all group containers; `nil` resolves it from the environment.
    ///   - busAddress: the bus; `nil` for the session bus.
    ///   - sharedStateDirectory: see ``DarwinNotificationCenter/init(busAddress:sharedStateDirectory:wake:logger:)``.
    ///   - maximumSuiteBytes: the largest suite this object writes (`maximumSuiteBytes`; 4 MiB
    ///     by default).
    ///   - freshness: how a read checks its cache (``Freshness``; one `lstat` by default).
    ///   - wake: whether writes ring this user's Wormhole observers directly beside the bus signal,
    ///     and observers are rung (``PeerWake/doorbell``, the default), or not (``PeerWake/busOnly``).
    ///   - logger: where the library logs (swift-log).
    /// - Throws: ``WormholeError`` for a group without a default suite (a group identifier over 200
    ///   bytes), an invalid container root or a limit below 2 bytes, before touching disk or bus.
    public init(
        applicationGroupIdentifier group: GroupIdentifier, suiteName: SuiteName? = nil,
        durability: GroupContainer.Durability = .atomic,
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
        suite = try suiteName ?? SuiteName(defaultFor: group)
        container = try GroupContainer(group: group, root: containerRoot)
        self.busAddress = busAddress
        self.logger = logger
        // At most 255 + 13 + 200 + 1 bytes of ASCII: always a valid name.
        notificationPrefix = try NotificationName(
            "\(group.rawValue)/\(WormholeDirectoryName.reservedForDefaults)/\(suite.rawValue)/")
        store = SuiteStore(
            container: container, suite: suite, durability: durability, freshness: freshness, logger: logger)
        centers = LazyNotificationCenter(
            busAddress: busAddress, sharedStateDirectory: sharedStateDirectory, wake: wake, logger: logger)
        wakeups = WakeEngine(centers: centers, logger: logger)
        writer = SuiteWriter(
            store: store, prefix: notificationPrefix, maximumBytes: maximumSuiteBytes, centers: centers)
    }

    /// The notification name of `key`, `<group>/Preferences/<suite>/<key>`.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/invalidKey`` for an empty key, a key with
    ///   NUL, or one that makes the name longer than 900 bytes (or its match rule too long).
    package func notificationName(forKey key: String) throws -> NotificationName {
        try DefaultsKeyRules.name(for: key, prefix: notificationPrefix.rawValue)
    }

    /// The notification center changes are posted on, connecting on first use.
    package func notificationCenter() throws -> DarwinNotificationCenter { try centers.get() }

    // MARK: Reading

    /// Every stored value this version understands (without the registered defaults). A value
    /// it does not understand (an unknown `$` tag a newer version wrote) is left out; ``keys()``
    /// lists it and `storedJSON(forKey:)` returns it.
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
        try contents.requireUnderstood(key)
        return registered.withLock { $0[key] }
    }

    /// The stored JSON of `key` as one line (compact for values this version understands, as
    /// stored for the others), or nil when absent: what `wormholectl defaults read KEY` prints.
    ///
    /// - Throws: as ``values()``.
    package func storedJSON(forKey key: String) throws -> String? {
        try store.snapshot().contents.jsonBytes(forKey: key).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The stored suite as one line of compact JSON in the file's format (a plain object, keys
    /// sorted; values this version does not understand as they are stored): what
    /// `wormholectl defaults read` prints without a key.
    ///
    /// - Throws: as ``values()``.
    package func jsonText() throws -> String {
        String(decoding: SuiteJSON.compactSuite(try store.snapshot().contents), as: UTF8.self)
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
}

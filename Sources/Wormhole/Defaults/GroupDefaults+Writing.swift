// Writing a suite: single keys, read-modify-write under the suite's lock and transactions, each
// done by the suite's `SuiteWriter`.

extension GroupDefaults {
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
        try writer.set(value, forKey: key)
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
        try writer.update(forKey: key, transform)
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
        try writer.increment(forKey: key, by: amount)
    }

    /// Stores every value of `values` in one atomic write (observers are told once per changed
    /// key); with `replacingAll`, also removes every key `values` does not name. An empty
    /// dictionary changes nothing (with `replacingAll`: empties the suite).
    ///
    /// - Throws: ``WormholeError`` naming a bad key (before anything is written), or the errors
    ///   of ``set(_:forKey:)``.
    @discardableResult
    package func setValues(_ values: [String: PropertyListValue], replacingAll: Bool = false) throws -> WriteReport {
        try writer.setValues(values, replacingAll: replacingAll)
    }

    /// Copies every value of the suite `suiteName` that Foundation's `UserDefaults(suiteName:)`
    /// wrote on Linux (``FoundationSuite``, in `configDirectory` or where Foundation keeps it)
    /// into this suite, in one write (observers see all of it at once), and returns what changed.
    /// Keys already in this suite are overwritten; other keys are kept.
    ///
    /// - Throws: the errors of ``FoundationSuite``, and those of ``setValues(_:replacingAll:)``
    ///   (nothing is written then).
    @discardableResult
    package func importFoundationSuite(named suiteName: String, configDirectory: String? = nil) throws -> WriteReport {
        try setValues(FoundationSuite(named: suiteName, configDirectory: configDirectory).values())
    }

    /// Moves a suite file that is not one JSON object aside to `<suite>.json.corrupt-<n>` (never
    /// deleted) so that the suite starts again empty, and returns where it went; on a suite that
    /// reads, or none, it changes nothing and returns nil. The only call that moves a suite
    /// aside: reads and writes never do (`wormholectl defaults repair`).
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
        try writer.transaction(body)
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
        package subscript(key: String) -> PropertyListValue? { values[key] }

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

// Writing a suite: single keys, read-modify-write under the suite's lock, transactions, and the
// notification of every changed key.

package import FoundationEssentials
import Logging

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
                    "key \(NameRules.quoted(key)) holds \(other.typeName) \(other.jsonText), not an integer; nothing changed"
                )
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
    package func setValues(_ values: [String: PropertyListValue], replacingAll: Bool = false) throws -> WriteReport {
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
            let reason =
                text == "null"
                ? "null is not a storable value (use 'wormhole defaults delete')" : "it is not a property-list value"
            throw WormholeError(
                .invalidValue, value: key, "value for key \(NameRules.quoted(key)) (\(text)) is refused: \(reason)")
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

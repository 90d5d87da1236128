// SPDX-License-Identifier: Apache-2.0
import Logging

/// The writing side of a ``GroupDefaults``: checks keys and values before the suite is read or
/// locked, changes the suite under its writers' lock (``SuiteStore/modify(maximumBytes:_:)``),
/// and then posts `<group>/Preferences/<suite>/<key>`, with the suite's new generation as state,
/// for every key whose value changed (contract §5).
struct SuiteWriter: Sendable {
    let store: SuiteStore
    /// The prefix of every key's notification name, `<group>/Preferences/<suite>/`.
    let prefix: NotificationName
    /// The largest suite file this writer writes, in bytes of JSON (contract §5, v1.2): a write
    /// that adds or changes a value and would leave the suite larger is refused with
    /// ``WormholeError/Code/suiteTooLarge``; removing keys is always allowed. Readers read
    /// suites of any size.
    let maximumBytes: Int
    let centers: LazyNotificationCenter

    /// Refuses a key that makes no notification name (empty, with NUL, too long).
    func check(_ key: String) throws(WormholeError) {
        _ = try DefaultsKeyRules.name(for: key, prefix: prefix.rawValue)
    }

    /// Stores `value` for `key` (nil removes it): ``GroupDefaults/set(_:forKey:)``.
    func set(_ value: Any?, forKey key: String) throws -> GroupDefaults.WriteReport {
        try check(key)
        let converted = try value.map { try PropertyListValue($0, key: key) }
        if let converted { try checkFits(converted, forKey: key) }
        return try write { $0[key] = converted }
    }

    /// Stores a typed key's value: ``GroupDefaults/set(_:for:)``.
    func set<Value>(_ value: Value, for key: GroupDefaults.Key<Value>) throws -> GroupDefaults.WriteReport {
        try check(key.name)
        let encoded = try PropertyListValue.encoding(value, key: key.name)
        return try write { $0[key.name] = encoded }
    }

    /// Changes a typed key's value in place under the lock: `GroupDefaults.update(_:_:)` for a `Key`.
    func update<Value>(
        _ key: GroupDefaults.Key<Value>, _ body: (inout Value) throws -> Void
    ) throws -> GroupDefaults.WriteReport {
        try check(key.name)
        return try write { values in
            try values.requireUnderstood(key.name)
            var value = values[key.name]?.decoded(as: Value.self) ?? key.defaultValue
            try body(&value)
            values[key.name] = try PropertyListValue.encoding(value, key: key.name)
        }
    }

    /// Refuses, before the suite is read or locked, a value that alone makes a suite over the
    /// limit (its key and value, in the file's JSON form, with the braces around them).
    private func checkFits(_ value: PropertyListValue, forKey key: String) throws {
        let size = key.utf8.count + 2 + SuiteJSON.minimumSize(of: value) + 5
        if size > maximumBytes {
            throw WormholeError(
                .suiteTooLarge, value: key,
                "the value for key \(NameRules.quoted(key)) makes suite '\(store.suite)' at least \(size) bytes, over its limit of "
                    + "\(maximumBytes) bytes; nothing was written")
        }
    }

    /// Replaces the value for `key` with what `transform` returns for the current one, under the
    /// lock: ``GroupDefaults/update(forKey:_:)``.
    @discardableResult
    func update(
        forKey key: String, _ transform: (PropertyListValue?) throws -> PropertyListValue?
    ) throws -> GroupDefaults.WriteReport {
        try check(key)
        return try write { contents in
            try contents.requireUnderstood(key)
            let new = try transform(contents.values[key])?.normalized
            contents[key] = new
        }
    }

    /// Adds `amount` to the integer stored for `key` under the lock and returns the sum:
    /// ``GroupDefaults/increment(forKey:by:)``.
    func increment(forKey key: String, by amount: Int) throws -> Int {
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

    /// Stores every value of `values` in one write; with `replacingAll`, removes every other key.
    func setValues(_ values: [String: PropertyListValue], replacingAll: Bool) throws -> GroupDefaults.WriteReport {
        for key in values.keys { try check(key) }
        let normalized = values.mapValues(\.normalized)
        return try write { contents in
            if replacingAll {
                for key in contents.keys where normalized[key] == nil { contents[key] = nil }
            }
            for (key, value) in normalized { contents[key] = value }
        }
    }

    /// Runs `body` on the suite's values and writes what it set or removed, in one write:
    /// ``GroupDefaults/transaction(_:)``.
    func transaction(_ body: (inout GroupDefaults.Transaction) throws -> Void) throws -> GroupDefaults.WriteReport {
        let prefix = prefix.rawValue
        return try write { contents in
            var transaction = GroupDefaults.Transaction(values: contents.values, prefix: prefix)
            let before = contents.values
            try body(&transaction)
            // Values a newer version wrote stay unless the transaction set or removed their key.
            for key in Set(before.keys).union(transaction.values.keys).union(transaction.touched)
            where transaction.touched.contains(key) || before[key] != transaction.values[key] {
                contents[key] = transaction.values[key]
            }
        }
    }

    /// Runs `body` under the lock, writes, and posts one notification per changed key.
    func write(_ body: (inout SuiteJSON.Contents) throws -> Void) throws -> GroupDefaults.WriteReport {
        let outcome = try store.modify(maximumBytes: maximumBytes, body)
        var report = GroupDefaults.WriteReport(changedKeys: outcome.changes.map(\.key), generation: outcome.generation)
        guard !outcome.changes.isEmpty else { return report }
        do {
            let center = try centers.get()
            for change in outcome.changes {
                // Keys set here were checked at the call; a key only a foreign writer could have
                // made, and that makes no valid name, cannot be posted.
                guard let name = NotificationName(received: prefix.rawValue + change.key),
                    !change.key.utf8.contains(0)
                else {
                    store.logger.warning(
                        "key \(NameRules.quoted(change.key)) changed but makes no valid notification name")
                    continue
                }
                try center.post(name, state: outcome.generation)
            }
        } catch {
            store.logger.warning(
                "suite written but observers were not notified",
                metadata: ["suite": "\(store.suite)", "error": "\(error)"])
            report.notificationError = error
        }
        return report
    }
}

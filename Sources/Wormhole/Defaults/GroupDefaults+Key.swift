// SPDX-License-Identifier: Apache-2.0
// Typed keys, declared once with their default value.

import Logging

extension GroupDefaults {
    /// The namespace typed keys are declared in, so that `defaults[.currency]` finds them:
    ///
    /// ```swift
    /// extension GroupDefaults.Keys {
    ///     static let currency = GroupDefaults.Key<String>("currency", default: "EUR")
    /// }
    /// defaults[.currency] = "USD"
    /// ```
    ///
    /// `@unchecked Sendable`: the class has no state at all; it only exists to hold static keys.
    public class Keys: @unchecked Sendable {
        fileprivate init() {}
    }

    /// A key with a value type and a default: read as `defaults[key]` (the default when nothing is
    /// stored, or the stored value does not decode as `Value`), written as `defaults[key] = value`.
    ///
    /// Values that are property-list types already (`String`, `Int`, `Double`, `Bool`, `Date`,
    /// `Data`, `URL`, arrays and dictionaries of them) are stored as they are; any other `Codable`
    /// value is stored as what `PropertyListEncoder` makes of it (a `String`-backed enum as its
    /// string, a struct as a dictionary).
    public final class Key<Value: Codable & Sendable>: Keys, @unchecked Sendable {
        // @unchecked: both properties are immutable and Sendable.
        /// The key's name in the suite.
        public let name: String
        /// What a read returns when nothing usable is stored.
        package let defaultValue: Value

        /// A key named `name` with a default.
        public init(_ name: String, default defaultValue: Value) {
            self.name = name
            self.defaultValue = defaultValue
            super.init()
        }
    }

    /// The value for `key`, or its default. Setting stores it; a value that cannot be stored is
    /// logged and nothing is written (``set(_:for:)`` throws instead).
    public subscript<Value>(key: Key<Value>) -> Value {
        get {
            guard let stored = try? value(forKey: key.name) else { return key.defaultValue }
            return stored.decoded(as: Value.self) ?? key.defaultValue
        }
        set {
            do {
                try set(newValue, for: key)
            } catch {
                logger.error("cannot store '\(key.name)' in \(path): \(error)")
            }
        }
    }

    /// Stores `value` for `key`.
    ///
    /// - Throws: ``WormholeError`` for a bad key name or a value that does not encode as a
    ///   property list (nothing is written then), or a storage error.
    @discardableResult
    public func set<Value>(_ value: Value, for key: Key<Value>) throws -> WriteReport {
        try writer.set(value, for: key)
    }

    /// Removes the stored value, so that `key` reads as its default again.
    @discardableResult
    package func reset<Value>(_ key: Key<Value>) throws -> WriteReport {
        try removeObject(forKey: key.name)
    }

    /// Changes the value for `key` in place under the suite's lock (starting from the default
    /// when nothing is stored): no other process's write comes in between.
    ///
    /// ```swift
    /// static let launches = GroupDefaults.Key<Int>("launches", default: 0)
    /// try defaults.update(.launches) { $0 += 1 }
    /// ```
    @discardableResult
    public func update<Value>(_ key: Key<Value>, _ body: (inout Value) throws -> Void) throws -> WriteReport {
        try writer.update(key, body)
    }
}

// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// The name of a shared-defaults suite, such as `group.com.example.lines` (the group's default
/// suite) or `settings`: the suite is stored as `<container>/Preferences/<suite>.json`.
///
/// 1 to 200 bytes of `A-Z a-z 0-9 . _ -`, not starting with `.` (contract §5, the identifier rules
/// of §2).
public struct SuiteName: Hashable, Sendable, CustomStringConvertible {
    /// The name, exactly as given.
    public let rawValue: String

    /// The longest name allowed, in bytes.
    package static let maximumLength = 200

    /// Validates `string` as a suite name.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/invalidSuite`` naming the value and the
    ///   rule it breaks.
    public init(_ string: String) throws {
        try NameRules.validate(string, kind: "suite name", code: .invalidSuite, maximumLength: Self.maximumLength)
        rawValue = string
    }

    /// The default suite of `group`: the group identifier itself, as Apple apps write
    /// `UserDefaults(suiteName: "group.…")`.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/invalidSuite`` when the identifier is
    ///   longer than 200 bytes: such a group has no default suite, and a suite must be named.
    package init(defaultFor group: GroupIdentifier) throws {
        let length = group.rawValue.utf8.count
        guard length <= Self.maximumLength else {
            throw WormholeError(
                .invalidSuite, value: group.rawValue,
                "group identifier \(NameRules.quoted(group.rawValue)) is \(length) bytes long, over the "
                    + "\(Self.maximumLength)-byte limit of a suite name, so it has no default suite; name a suite")
        }
        rawValue = group.rawValue
    }

    /// The name itself.
    public var description: String { rawValue }

    /// `<suite>.json`.
    var fileName: String { rawValue + ".json" }
    /// `<suite>.json.lock`, the writers' lock file (contract §5).
    var lockName: String { rawValue + ".json.lock" }
    /// `<suite>.json.changes`, the suite's change counter (contract section 5, docs/shared-defaults.md).
    var counterName: String { rawValue + ".json.changes" }
    /// `<suite>.json.corrupt-<n>`.
    func corruptName(_ number: Int) -> String { rawValue + ".json.corrupt-\(number)" }
    /// `.<suite>.json.<pid>-<random>.tmp`: hidden, unique per writer, at most 239 bytes.
    var temporaryName: String {
        ".\(rawValue).json.\(Syscall.processID())-\(String(UInt64.random(in: .min ... .max), radix: 16)).tmp"
    }
}

/// Checks keys of shared defaults (contract §5).
enum DefaultsKeyRules {
    /// Validates `key` for a suite whose notification prefix is `prefix`
    /// (`<group>/Preferences/<suite>/`), returning the key's notification name.
    ///
    /// A key is 1 or more bytes of UTF-8 without NUL such that the name is at most 900 bytes and
    /// its exact-name match rule fits the daemon's limit (contract §1 v1.1).
    static func name(for key: String, prefix: String) throws(WormholeError) -> NotificationName {
        if key.isEmpty {
            throw WormholeError(.invalidKey, value: key, "key '' is empty; a key is 1 or more bytes of UTF-8")
        }
        if key.utf8.contains(0) {
            throw WormholeError(.invalidKey, value: key, "key \(NameRules.quoted(key)) contains a NUL byte")
        }
        let full = prefix + key
        let length = full.utf8.count
        if length > NotificationName.maximumLength {
            throw WormholeError(
                .invalidKey, value: key,
                "key \(NameRules.quoted(String(key.prefix(60))))… is \(key.utf8.count) bytes: its notification "
                    + "name '\(prefix)…' would be \(length) bytes, over the limit of \(NotificationName.maximumLength)")
        }
        let name: NotificationName
        do {
            name = try NotificationName(full)
            // A name of at most 900 bytes always fits its rule unless it holds `'`, which a rule
            // spells in 4 bytes: only then is the rule built and measured.
            if key.utf8.contains(UInt8(ascii: "'")) { _ = try NotifyContract.rules(observing: name) }
        } catch {
            let reason = (error as? WormholeError)?.message ?? "\(error)"
            throw WormholeError(
                .invalidKey, value: key, "key \(NameRules.quoted(String(key.prefix(60)))) is refused: \(reason)")
        }
        return name
    }
}

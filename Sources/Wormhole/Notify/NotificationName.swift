// SPDX-License-Identifier: Apache-2.0
import WormholeDBus

/// The name of a Darwin-style notification, such as `com.example.app.refresh`.
///
/// A name is 1 to 900 bytes of UTF-8 with no NUL (contract §1): the bus daemon refuses
/// match rules over 1024 bytes, and 900 leaves room for the rule around the name.
/// Reverse-DNS names are the convention; slashes group names into families that a
/// prefix observer can watch (`group.com.example/wormhole/`).
public struct NotificationName: Hashable, Sendable, CustomStringConvertible {
    /// The longest name, in UTF-8 bytes.
    package static let maximumLength = 900

    /// The name as written.
    public let rawValue: String

    /// Checks a name; throws ``WormholeError/Code/invalidName`` naming it when it is empty,
    /// longer than 900 bytes, contains NUL, or holds so many `'` that the match rule observing
    /// it would exceed the bus daemon's 1024 bytes (each `'` is spelled `'\''` there; contract
    /// §1 v1.1). Posting and observing apply this one rule, so a name that posts can be observed.
    public init(_ rawValue: String) throws {
        let length = rawValue.utf8.count
        if length == 0 {
            throw WormholeError(.invalidName, value: rawValue, "notification name is empty (it must be 1 to 900 bytes)")
        }
        if length > Self.maximumLength {
            throw WormholeError(
                .invalidName, value: rawValue,
                "notification name \(quoted(String(rawValue.prefix(40))))… is \(length) bytes, longer than the limit of 900"
            )
        }
        if rawValue.utf8.contains(0) {
            throw WormholeError(
                .invalidName, value: rawValue, "notification name \(quoted(rawValue)) contains a NUL byte")
        }
        let ruleLength = NotifyContract.exactRuleLength(of: rawValue)
        if ruleLength > MatchRule.maximumLength {
            throw WormholeError(
                .invalidName, value: rawValue,
                "notification name \(quoted(String(rawValue.prefix(40))))… cannot be observed: its match rule would be "
                    + "\(ruleLength) bytes, and the bus daemon accepts at most \(MatchRule.maximumLength) "
                    + "(each ' in a name takes 4 bytes there)")
        }
        self.rawValue = rawValue
    }

    /// Checks a name given as raw bytes; refuses bytes that are not valid UTF-8 as well.
    package init(utf8 bytes: some Collection<UInt8>) throws {
        guard let string = String(validating: bytes, as: UTF8.self) else {
            let hex = bytes.prefix(40).map { String($0, radix: 16) }.joined(separator: " ")
            throw WormholeError(.invalidName, value: hex, "notification name is not valid UTF-8 (bytes: \(hex))")
        }
        try self.init(string)
    }

    /// A name read off the bus from a route that only carries observed names: checked for
    /// length only (the bus never carries NUL, and a route's rule already matched it).
    init?(received rawValue: String) {
        let length = rawValue.utf8.count
        guard length > 0 && length <= Self.maximumLength else { return nil }
        self.rawValue = rawValue
    }

    /// A name known to be valid by construction (a wormhole's `<group>/<directory>/<identifier>`:
    /// at most 712 bytes of `A-Z a-z 0-9 . _ - /`, so no NUL, no `'`, and a short match rule).
    init(valid rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    /// Whether the name can be used as a prefix for ``DarwinNotificationCenter`` prefix observation.
    package var isPrefix: Bool { rawValue.hasSuffix("/") }

    /// The bucket interface the contract puts this name's signals on:
    /// `org.wormhole.Notify1.B` + four upper-case hex digits, the low 16 bits of FNV-1a-32.
    package var bucketInterface: String { NotifyContract.bucketInterface(for: rawValue) }
}

extension NotificationName: ExpressibleByStringLiteral {
    /// A name written in the source, such as `"com.example.app.refresh"` where a
    /// ``NotificationName`` is expected. An invalid literal is a programmer error, like an
    /// invalid static URL: it stops the program with a message naming it. Names from outside go
    /// through the throwing ``init(_:)`` (a closure, `{ try NotificationName($0) }`, not
    /// `NotificationName.init`, which picks this initializer).
    public init(stringLiteral value: String) {
        do {
            try self.init(value)
        } catch {
            preconditionFailure("invalid notification name literal: \(error)")
        }
    }
}

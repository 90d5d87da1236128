// SPDX-License-Identifier: Apache-2.0
// The validated names of the storage layer (contract §2): GroupIdentifier here,
// WormholeDirectoryName and MessageIdentifier beside it, with the rules they share in NameRules.
// Each is checked once, when it is made, before anything touches the disk or the bus; after that
// it can be used as a file name as it is.

/// An application-group identifier, such as `group.com.example.lines`: the name of a group container.
///
/// 1 to 255 bytes of `A-Z a-z 0-9 . _ -`, not starting with `.` (contract §2). The equivalent of the
/// identifier passed to Apple's `containerURL(forSecurityApplicationGroupIdentifier:)`.
///
/// ```swift
/// let group = try GroupIdentifier("group.com.example.lines")
/// ```
public struct GroupIdentifier: Hashable, Sendable, CustomStringConvertible {
    /// The identifier, exactly as given.
    public let rawValue: String

    /// The longest identifier allowed, in bytes.
    package static let maximumLength = 255

    /// Validates `string` as a group identifier.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/invalidGroup`` naming the value and the
    ///   rule it breaks.
    public init(_ string: String) throws {
        try NameRules.validate(string, kind: "group identifier", code: .invalidGroup, maximumLength: Self.maximumLength)
        rawValue = string
    }

    /// The identifier itself.
    public var description: String { rawValue }
}

extension GroupIdentifier: ExpressibleByStringLiteral {
    /// A group written in the source, such as `"group.com.example.lines"` where a
    /// ``GroupIdentifier`` is expected. An invalid literal is a programmer error: it stops the
    /// program with a message naming it. Values from outside (arguments, files, the user) go
    /// through the throwing ``init(_:)``.
    public init(stringLiteral value: String) {
        self = NameRules.literal(value, "group identifier") { try GroupIdentifier($0) }
    }
}

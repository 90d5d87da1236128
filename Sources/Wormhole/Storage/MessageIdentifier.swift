// SPDX-License-Identifier: Apache-2.0
/// The identifier of a message in a wormhole, such as `clip`: its file is `<identifier>.json`.
///
/// 1 to 200 bytes of `A-Z a-z 0-9 . _ -`, not starting with `.` (contract §2). The limit is lower
/// than a file name's 255 bytes because the files made for an identifier carry suffixes (temporary
/// and lock files).
public struct MessageIdentifier: Hashable, Sendable, CustomStringConvertible {
    /// The identifier, exactly as given.
    public let rawValue: String

    /// The longest identifier allowed, in bytes.
    package static let maximumLength = 200

    /// Validates `string` as a message identifier.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/invalidIdentifier`` naming the value
    ///   and the rule it breaks.
    public init(_ string: String) throws {
        try NameRules.validate(
            string, kind: "message identifier", code: .invalidIdentifier, maximumLength: Self.maximumLength)
        rawValue = string
    }

    /// The identifier itself.
    public var description: String { rawValue }

    /// The file name of the stored message, `<identifier>.json`.
    var fileName: String { rawValue + ".json" }

    /// The identifier whose message is stored in `fileName`, or nil when the name is not
    /// `<valid identifier>.json` (temporary files, lock files, anything else).
    init?(fileName: String) {
        guard fileName.hasSuffix(".json") else { return nil }
        let candidate = String(fileName.dropLast(5))
        guard let identifier = try? MessageIdentifier(candidate) else { return nil }
        self = identifier
    }
}

extension MessageIdentifier: ExpressibleByStringLiteral {
    /// An identifier written in the source, such as `"clip"` where a ``MessageIdentifier`` is
    /// expected. An invalid literal is a programmer error, like an invalid static URL: it stops
    /// the program with a message naming it. Values from outside (arguments, files, the user)
    /// go through the throwing ``init(_:)``: write `strings.map { try MessageIdentifier($0) }`,
    /// not `strings.map(MessageIdentifier.init)`, which picks this initializer.
    public init(stringLiteral value: String) {
        self = NameRules.literal(value, "message identifier") { try MessageIdentifier($0) }
    }
}

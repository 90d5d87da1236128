// The validated names of the storage layer (contract §2): group identifiers, wormhole directory
// names and message identifiers. Each is checked once, when it is made, before anything touches the
// disk or the bus; after that it can be used as a file name as it is.

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
    public static let maximumLength = 255

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

/// The name of a wormhole directory inside a group container (MMWormhole's `optionalDirectory`);
/// the default is `wormhole`.
///
/// 1 to 255 bytes of `A-Z a-z 0-9 . _ -`, not starting with `.` (contract §2).
public struct WormholeDirectoryName: Hashable, Sendable, CustomStringConvertible {
    /// The name, exactly as given.
    public let rawValue: String

    /// The longest name allowed, in bytes.
    public static let maximumLength = 255

    /// The directory name reserved for shared defaults (contract §5), `Preferences`: refused as
    /// a wormhole directory.
    public static let reservedForDefaults = "Preferences"

    /// The default directory, `wormhole`.
    public static let `default` = WormholeDirectoryName(validated: "wormhole")

    /// Validates `string` as a wormhole directory name.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/invalidDirectory`` naming the value and
    ///   the rule it breaks.
    public init(_ string: String) throws {
        try NameRules.validate(
            string, kind: "wormhole directory name", code: .invalidDirectory, maximumLength: Self.maximumLength)
        if string == Self.reservedForDefaults {
            throw WormholeError(
                .invalidDirectory, value: string,
                "wormhole directory name '\(string)' is reserved for shared defaults (GroupDefaults); choose another")
        }
        rawValue = string
    }

    private init(validated: String) { rawValue = validated }

    /// The name itself.
    public var description: String { rawValue }
}

/// The identifier of a message in a wormhole, such as `clip`: its file is `<identifier>.json`.
///
/// 1 to 200 bytes of `A-Z a-z 0-9 . _ -`, not starting with `.` (contract §2). The limit is lower
/// than a file name's 255 bytes because the files made for an identifier carry suffixes (temporary
/// and lock files).
public struct MessageIdentifier: Hashable, Sendable, CustomStringConvertible {
    /// The identifier, exactly as given.
    public let rawValue: String

    /// The longest identifier allowed, in bytes.
    public static let maximumLength = 200

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

/// The rules the three name types share.
enum NameRules {
    static let allowedDescription = "A-Z a-z 0-9 . _ -"

    static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "A"..."Z", "a"..."z", "0"..."9", ".", "_", "-": true
        default: false
        }
    }

    static func validate(
        _ string: String, kind: String, code: WormholeError.Code, maximumLength: Int
    ) throws(WormholeError) {
        let shown = quoted(string)
        let length = string.utf8.count
        if length == 0 {
            throw WormholeError(
                code, value: string,
                "\(kind) \(shown) is empty; it must be 1 to \(maximumLength) bytes of \(allowedDescription)")
        }
        if length > maximumLength {
            throw WormholeError(
                code, value: string,
                "\(kind) \(shown) is \(length) bytes long, over the limit of \(maximumLength) bytes")
        }
        if let bad = string.unicodeScalars.first(where: { !isAllowed($0) }) {
            let hex = String(bad.value, radix: 16, uppercase: true)
            let code4 = String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            throw WormholeError(
                code, value: string,
                "\(kind) \(shown) contains \(quoted(String(bad))) (U+\(code4)), which is not allowed "
                    + "(allowed: \(allowedDescription))")
        }
        if string.hasPrefix(".") {
            throw WormholeError(
                code, value: string,
                "\(kind) \(shown) starts with '.', which is not allowed "
                    + "(names starting with '.' are reserved for hidden, temporary and lock files)")
        }
    }

    /// `value` in single quotes, with control, format and other invisible characters escaped
    /// (`\0`, `\n`, `\u{200B}`), and cut after 256 characters.
    static func quoted(_ value: String) -> String {
        var result = "'"
        for (index, scalar) in value.unicodeScalars.enumerated() {
            if index == 256 {
                result += "…"
                break
            }
            switch scalar {
            case "\0": result += "\\0"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\\": result += "\\\\"
            case "'": result += "\\'"
            case " ": result += " "
            default:
                switch scalar.properties.generalCategory {
                case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator,
                    .paragraphSeparator, .spaceSeparator:
                    result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                default:
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "'"
    }
}

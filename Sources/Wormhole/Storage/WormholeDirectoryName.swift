// SPDX-License-Identifier: Apache-2.0
/// The name of a wormhole directory inside a group container (MMWormhole's `optionalDirectory`);
/// the default is `wormhole`.
///
/// 1 to 255 bytes of `A-Z a-z 0-9 . _ -`, not starting with `.` (contract §2).
public struct WormholeDirectoryName: Hashable, Sendable, CustomStringConvertible {
    /// The name, exactly as given.
    public let rawValue: String

    /// The longest name allowed, in bytes.
    package static let maximumLength = 255

    /// The directory name reserved for shared defaults (contract §5), `Preferences`: refused as
    /// a wormhole directory.
    package static let reservedForDefaults = "Preferences"

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

// SPDX-License-Identifier: Apache-2.0
import SystemPackage

/// An error from the notification center, a group container or a wormhole.
///
/// Every error carries a ``Code`` to switch on, the offending value (a name, an
/// identifier, a path) when there is one, and a message a person can act on:
///
/// Errors of the bus itself (unreachable, disconnected) are `BusError`s from `WormholeDBus`.
///
/// ```swift
/// do {
///     let identifier = try MessageIdentifier(userInput)  // "a/b"
///     try wormhole.passMessage(["n": 1], identifier: identifier)
/// } catch let error as WormholeError where error.code == .invalidIdentifier {
///     print(error)  // message identifier 'a/b' contains '/' ...
/// }
/// ```
public struct WormholeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A stable, lower-camel-case name for the code.
        public let rawValue: String

        init(_ rawValue: String) { self.rawValue = rawValue }

        public var description: String { rawValue }

        /// A notification name is empty, too long, not UTF-8 or contains NUL.
        public static let invalidName = Code("invalidName")
        /// An application-group identifier breaks the contract's rules.
        public static let invalidGroup = Code("invalidGroup")
        /// A wormhole directory name breaks the contract's rules.
        public static let invalidDirectory = Code("invalidDirectory")
        /// A message identifier breaks the contract's rules.
        public static let invalidIdentifier = Code("invalidIdentifier")
        /// A path is a symlink, owned by another user, or writable by group or others.
        public static let unsafePath = Code("unsafePath")
        /// The container root cannot be determined from the environment.
        public static let noContainerRoot = Code("noContainerRoot")
        /// A file-system call failed.
        public static let io = Code("io")
        /// No message is stored for the identifier.
        public static let noMessage = Code("noMessage")
        /// A message could not be encoded as JSON.
        public static let encodingFailed = Code("encodingFailed")
        /// A message given as JSON text is not one JSON document.
        public static let invalidJSON = Code("invalidJSON")
        /// A stored document is not valid JSON or does not decode as the requested type.
        public static let decodingFailed = Code("decodingFailed")
        /// A message is larger than the wormhole's maximum message size (the message's size is
        /// checked before it is read or written).
        public static let messageTooLarge = Code("messageTooLarge")
        /// A shared-defaults suite name breaks the contract's rules.
        public static let invalidSuite = Code("invalidSuite")
        /// A shared-defaults key is empty, contains NUL, or makes its notification name too long.
        public static let invalidKey = Code("invalidKey")
        /// A value given to shared defaults is not a property-list value.
        public static let invalidValue = Code("invalidValue")
        /// A shared-defaults suite file does not parse; it was moved aside.
        public static let corruptSuite = Code("corruptSuite")
        /// A transient message is over the 64 KiB limit (contract §7); nothing was sent.
        public static let transientTooLarge = Code("transientTooLarge")
        /// A transient message was received but not delivered: malformed on the bus (not
        /// `(s, s)`, over the limit, not JSON), or dropped because the listener fell more than
        /// its buffer behind (``MessageCenter/ListenOptions/transientBufferLimit``).
        public static let transientDropped = Code("transientDropped")
        /// A file lock (`flock`) was not granted within the lock timeout (10 s by default,
        /// `WORMHOLE_LOCK_TIMEOUT` seconds): another process holds it. The message names the
        /// lock file and, when it can be found, the holder's pid; nothing was changed. The CLI
        /// exits 75 (`EX_TEMPFAIL`).
        public static let lockTimeout = Code("lockTimeout")
        /// An app ID (contract §8: `/.flatpak-info`, `AppIdentity.setAppID(_:)`,
        /// `WORMHOLE_APP_ID`, `FLATPAK_ID`) is not a D-Bus well-known name of two or more
        /// elements of `A-Z a-z 0-9 _ -`, none starting with a digit, at most 255 bytes.
        public static let invalidAppID = Code("invalidAppID")
    }

    /// What kind of failure this is.
    public var code: Code
    /// The offending value (a name, an identifier, a path), when there is one.
    public var value: String?
    /// A message that says what went wrong and, where possible, what to do.
    public var message: String
    /// For ``Code/journalGap`` and ``Code/journalDamaged``: the records a journal reader cannot
    /// deliver, and why; nil for every other error.
    public var journalDamage: JournalDamage?

    /// Creates an error.
    public init(_ code: Code, value: String? = nil, _ message: String) {
        self.code = code
        self.value = value
        self.message = message
    }

    public var description: String { message }

}

extension WormholeError.Code {
    /// Lets `catch WormholeError.Code.invalidName` style patterns match.
    public static func ~= (code: WormholeError.Code, error: any Error) -> Bool {
        (error as? WormholeError)?.code == code
    }
}

/// The `io` error for a failed call on `path`: "cannot ACTION 'PATH': REASON (errno N)".
func ioError(_ error: Errno, _ action: String, _ path: String) -> WormholeError {
    WormholeError(.io, value: path, "cannot \(action) '\(path)': \(error) (errno \(error.rawValue))")
}

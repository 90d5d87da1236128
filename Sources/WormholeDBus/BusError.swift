// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// An error from the D-Bus layer.
///
/// Named `BusError` because libdbus already defines a C type `DBusError`. Every
/// error carries a ``Code``, the offending value when there is one (an address, a
/// name, a rule) and a message a person can act on.
public struct BusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A stable, lower-camel-case name for the code.
        public let rawValue: String

        init(_ rawValue: String) { self.rawValue = rawValue }

        public var description: String { rawValue }

        /// A bus address does not parse.
        public static let invalidAddress = Code("invalidAddress")
        /// No address was given and `DBUS_SESSION_BUS_ADDRESS` is not set.
        public static let noSessionBus = Code("noSessionBus")
        /// The bus could not be reached at the address, or refused the connection.
        public static let connectionFailed = Code("connectionFailed")
        /// The connection to the bus is closed (the daemon went away, or ``BusConnection/close()`` was called).
        public static let disconnected = Code("disconnected")
        /// An object path is not valid.
        public static let invalidObjectPath = Code("invalidObjectPath")
        /// An interface name is not valid.
        public static let invalidInterfaceName = Code("invalidInterfaceName")
        /// A member name is not valid.
        public static let invalidMemberName = Code("invalidMemberName")
        /// A string argument is not valid UTF-8 or contains NUL.
        public static let invalidString = Code("invalidString")
        /// A match rule is too long for the bus daemon or has an argument index outside 0...63.
        public static let invalidMatchRule = Code("invalidMatchRule")
        /// The bus daemon answered a request with an error (for example it refused a match rule).
        public static let requestFailed = Code("requestFailed")
        /// A signal argument is missing or has another type than the one asked for.
        public static let typeMismatch = Code("typeMismatch")
        /// libdbus could not allocate memory.
        public static let outOfMemory = Code("outOfMemory")
        /// A message was not sent: the connection's bounded outgoing queue could not take it
        /// (a receiver or the bus is not reading). Nothing of it was queued.
        public static let queueFull = Code("queueFull")
        /// The bus did not answer within the time allowed (a flush, or the drain at exit).
        public static let timedOut = Code("timedOut")
    }

    /// What kind of failure this is.
    public var code: Code
    /// The offending value, when there is one.
    public var value: String?
    /// The D-Bus error name, when the bus or libdbus reported one (`org.freedesktop.DBus.Error.…`).
    public var dbusName: String?
    /// A message that says what went wrong.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, value: String? = nil, dbusName: String? = nil, _ message: String) {
        self.code = code
        self.value = value
        self.dbusName = dbusName
        self.message = message
    }

    public var description: String { message }
}

extension BusError.Code {
    /// Lets `catch BusError.Code.disconnected` style patterns match.
    public static func ~= (code: BusError.Code, error: any Error) -> Bool {
        (error as? BusError)?.code == code
    }
}

extension BusError {
    /// A connection that could not be made because the process's machinery failed (no epoll,
    /// eventfd or loop to be had).
    init(_ failure: SystemFailure) {
        self.init(.connectionFailed, "cannot create the I/O loop: \(failure)")
    }
}

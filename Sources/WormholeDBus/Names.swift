// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import WormholeSystem

/// The address of a D-Bus bus, such as `unix:path=/run/user/1000/bus`.
///
/// Parsed and checked when created, so a bad address is reported by name before
/// anything tries to connect to it. The corresponding C function is `dbus_parse_address`.
public struct BusAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address as written.
    public let rawValue: String

    /// Parses an address; throws ``BusError/Code/invalidAddress`` naming it when it does not parse.
    public init(_ rawValue: String) throws {
        let entries = try Self.parse(rawValue)
        if entries.isEmpty {
            throw BusError(.invalidAddress, value: rawValue, "bus address \(quoted(rawValue)) has no entries")
        }
        self.rawValue = rawValue
    }

    /// The user's session bus, from `DBUS_SESSION_BUS_ADDRESS`.
    ///
    /// Throws ``BusError/Code/noSessionBus`` when the variable is unset or empty, and
    /// ``BusError/Code/invalidAddress`` when it does not parse.
    /// - Parameter environment: the environment to read; `nil` reads the process's own.
    public static func session(environment: [String: String]? = nil) throws -> BusAddress {
        // getenv, not ProcessInfo's environment, which copies the whole environment per call
        // (this runs on every send while no bus can be reached).
        let value =
            environment.map { $0["DBUS_SESSION_BUS_ADDRESS"] }
            ?? Syscall.environment("DBUS_SESSION_BUS_ADDRESS")
        guard let value, !value.isEmpty else {
            throw BusError(
                .noSessionBus,
                "DBUS_SESSION_BUS_ADDRESS is not set: there is no session bus to use; pass an explicit bus address")
        }
        return try BusAddress(value)
    }

    public var description: String { rawValue }

    /// The address without its `guid=` parts: what a reconnection uses, since a restarted bus
    /// daemon has a new guid and libdbus refuses a server whose guid differs from the address's.
    package var withoutGUID: BusAddress {
        let entries = rawValue.split(separator: ";", omittingEmptySubsequences: false).map { entry in
            entry.split(separator: ",", omittingEmptySubsequences: false).filter { !$0.hasPrefix("guid=") }
                .joined(separator: ",")
        }
        return (try? BusAddress(entries.joined(separator: ";"))) ?? self
    }

    /// The socket paths of the address's `unix:path=` entries, used to notice a
    /// restarted bus daemon without polling.
    package var unixSocketPaths: [String] {
        ((try? Self.parse(rawValue)) ?? []).compactMap { entry in
            entry.method == "unix" ? entry.values["path"] : nil
        }
    }

    /// The socket paths when every entry of the address is `unix:path=` (nothing else could
    /// answer); `nil` otherwise.
    package var onlyUnixSocketPaths: [String]? {
        let entries = (try? Self.parse(rawValue)) ?? []
        let paths = entries.compactMap { $0.method == "unix" ? $0.values["path"] : nil }
        return paths.count == entries.count && !paths.isEmpty ? paths : nil
    }

    private static func parse(_ rawValue: String) throws(BusError) -> [LibDBus.AddressEntry] {
        try LibDBus.parseAddress(rawValue)
    }
}

/// A D-Bus object path, such as `/org/wormhole/Notify1`.
public struct ObjectPath: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The path as written.
    public let rawValue: String

    /// Checks the path; throws ``BusError/Code/invalidObjectPath`` naming it when it is not valid.
    /// The corresponding C function is `dbus_validate_path`.
    public init(_ rawValue: String) throws {
        try LibDBus.validate(rawValue, as: .objectPath)
        self.rawValue = rawValue
    }

    /// A path libdbus has already validated (from a received message).
    package init(unchecked rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }
    public static func < (lhs: ObjectPath, rhs: ObjectPath) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A D-Bus interface name, such as `org.wormhole.Notify1`.
public struct InterfaceName: Hashable, Sendable, CustomStringConvertible {
    /// The name as written.
    public let rawValue: String

    /// Checks the name; throws ``BusError/Code/invalidInterfaceName`` naming it when it is not valid.
    /// The corresponding C function is `dbus_validate_interface`.
    public init(_ rawValue: String) throws {
        try LibDBus.validate(rawValue, as: .interface)
        self.rawValue = rawValue
    }

    /// A name already known to be valid (received from libdbus, or built by a checked format).
    package init(unchecked rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }
}

/// A D-Bus member (signal or method) name, such as `Posted`.
public struct MemberName: Hashable, Sendable, CustomStringConvertible {
    /// The name as written.
    public let rawValue: String

    /// Checks the name; throws ``BusError/Code/invalidMemberName`` naming it when it is not valid.
    /// The corresponding C function is `dbus_validate_member`.
    public init(_ rawValue: String) throws {
        try LibDBus.validate(rawValue, as: .member)
        self.rawValue = rawValue
    }

    /// A name libdbus has already validated (from a received message).
    package init(unchecked rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }
}

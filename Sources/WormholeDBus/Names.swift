internal import CWormholeDBus
import Foundation

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
        let environment = environment ?? ProcessInfo.processInfo.environment
        guard let value = environment["DBUS_SESSION_BUS_ADDRESS"], !value.isEmpty else {
            throw BusError(
                .noSessionBus,
                "DBUS_SESSION_BUS_ADDRESS is not set: there is no session bus to use; pass an explicit bus address")
        }
        return try BusAddress(value)
    }

    public var description: String { rawValue }

    /// The socket paths of the address's `unix:path=` entries, used to notice a
    /// restarted bus daemon without polling.
    package var unixSocketPaths: [String] {
        ((try? Self.parse(rawValue)) ?? []).compactMap { entry in
            entry.method == "unix" ? entry.values["path"] : nil
        }
    }

    private struct Entry {
        var method: String
        var values: [String: String]
    }

    private static func parse(_ rawValue: String) throws(BusError) -> [Entry] {
        try withCString(rawValue, what: "bus address", code: .invalidAddress) { address throws(BusError) in
            var entries: UnsafeMutablePointer<OpaquePointer?>?
            var count: Int32 = 0
            let ok = try withCError(.invalidAddress, value: rawValue, context: "bus address \(quoted(rawValue)) does not parse") {
                dbus_parse_address(address, &entries, &count, $0)
            }
            guard ok != 0, let entries else {
                throw BusError(.invalidAddress, value: rawValue, "bus address \(quoted(rawValue)) does not parse")
            }
            defer { dbus_address_entries_free(entries) }
            var result: [Entry] = []
            for index in 0..<Int(count) {
                guard let entry = entries[index] else { continue }
                let method = String(libdbus: dbus_address_entry_get_method(entry)) ?? ""
                var values: [String: String] = [:]
                for key in ["path", "abstract", "dir", "tmpdir", "runtime", "host", "port", "guid"] {
                    if let value = String(libdbus: dbus_address_entry_get_value(entry, key)) { values[key] = value }
                }
                result.append(Entry(method: method, values: values))
            }
            return result
        }
    }
}

/// A D-Bus object path, such as `/org/wormhole/Notify1`.
public struct ObjectPath: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The path as written.
    public let rawValue: String

    /// Checks the path; throws ``BusError/Code/invalidObjectPath`` naming it when it is not valid.
    /// The corresponding C function is `dbus_validate_path`.
    public init(_ rawValue: String) throws {
        try validateName(rawValue, what: "object path", code: .invalidObjectPath, dbus_validate_path)
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
        try validateName(rawValue, what: "interface name", code: .invalidInterfaceName, dbus_validate_interface)
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
        try validateName(rawValue, what: "member name", code: .invalidMemberName, dbus_validate_member)
        self.rawValue = rawValue
    }

    /// A name libdbus has already validated (from a received message).
    package init(unchecked rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }
}

/// Runs one of libdbus's `dbus_validate_*` functions on `rawValue`; a refusal (or a NUL byte)
/// becomes a `BusError` with `code` that names the value.
private func validateName(
    _ rawValue: String, what: String, code: BusError.Code,
    _ validate: (UnsafePointer<CChar>?, UnsafeMutablePointer<DBusError>?) -> dbus_bool_t
) throws(BusError) {
    try withCString(rawValue, what: what, code: code) { pointer throws(BusError) in
        _ = try withCError(code, value: rawValue, context: "\(what) \(quoted(rawValue)) is not valid") {
            validate(pointer, $0)
        }
    }
}

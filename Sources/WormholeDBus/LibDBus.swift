// SPDX-License-Identifier: Apache-2.0
internal import CWormholeDBus
import Glibc

// Every libdbus call of the module is in this file, LibDBusConnection.swift and
// MessageCoding.swift (the pattern of swift-system's Syscalls.swift): each C function has
// one call site, behind a small Swift function that speaks Swift types and turns the C
// error convention into a `BusError`. The rest of the module never imports the C module.
//
// Which thread may call what: the connection functions (`LibDBus.Connection`) are
// called only by the thread that owns the connection (its I/O thread, or the
// thread that opens it before handing it over); message building, message
// reading and validation are free functions of no connection and may run anywhere.

// MARK: - The error convention: a C `DBusError` is initialised, handed to the call,
// turned into a `BusError` if set, and freed.

/// Runs `body` with a fresh C `DBusError`; if the call set it, throws a `BusError`
/// with `code`, `value` and a message that starts with `context`.
func withCError<T>(
    _ code: BusError.Code,
    value: @autoclosure () -> String? = nil,
    context: @autoclosure () -> String,
    _ body: (UnsafeMutablePointer<DBusError>) -> T
) throws(BusError) -> T {
    var error = DBusError()
    dbus_error_init(&error)
    defer { dbus_error_free(&error) }
    let result = body(&error)
    if dbus_error_is_set(&error) != 0 {
        let name = error.name.map { String(cString: $0) }
        let detail = error.message.map { String(cString: $0) } ?? "no detail"
        throw BusError(code, value: value(), dbusName: name, "\(context()): \(detail)")
    }
    return result
}

/// Turns a Swift string into a C string for libdbus, refusing NUL (which would silently truncate it).
func withCString<T>(
    _ string: String,
    what: @autoclosure () -> String,
    code: BusError.Code = .invalidString,
    _ body: (UnsafePointer<CChar>) throws(BusError) -> T
) throws(BusError) -> T {
    // A native string hands out its own NUL-terminated storage (no copy); an interior NUL shows
    // as a C length shorter than the string's.
    let result = string.withCString { pointer -> Result<T, BusError> in
        guard strlen(pointer) == string.utf8.count else {
            return .failure(BusError(code, value: string, "\(what()) \(quoted(string)) contains a NUL byte"))
        }
        return Result { () throws(BusError) -> T in try body(pointer) }
    }
    return try result.get()
}

/// libdbus only accepts valid UTF-8 without NUL in string arguments (and refuses to send
/// anything else), so we check first and name the value.
func validateDBusString(_ string: String, what: @autoclosure () -> String) throws(BusError) {
    let valid = try withCString(string, what: what()) { pointer throws(BusError) in
        dbus_validate_utf8(pointer, nil) != 0
    }
    if !valid {
        throw BusError(.invalidString, value: string, "\(what()) \(quoted(string)) is not valid UTF-8 for D-Bus")
    }
}

extension String {
    /// Copies a C string that libdbus returned, tolerating NULL.
    init?(libdbus pointer: UnsafePointer<CChar>?) {
        guard let pointer else { return nil }
        self.init(cString: pointer)
    }
}

// MARK: - Names and addresses

enum LibDBus {
    /// One `key=value` entry list of a bus address (`unix:path=/run/user/1000/bus`).
    struct AddressEntry {
        var method: String
        var values: [String: String]
    }

    /// Parses a bus address into its entries. The corresponding C function is `dbus_parse_address`.
    static func parseAddress(_ rawValue: String) throws(BusError) -> [AddressEntry] {
        try withCString(rawValue, what: "bus address", code: .invalidAddress) { address throws(BusError) in
            var entries: UnsafeMutablePointer<OpaquePointer?>?
            var count: Int32 = 0
            let ok = try withCError(
                .invalidAddress, value: rawValue, context: "bus address \(quoted(rawValue)) does not parse"
            ) {
                dbus_parse_address(address, &entries, &count, $0)
            }
            guard ok != 0, let entries else {
                throw BusError(.invalidAddress, value: rawValue, "bus address \(quoted(rawValue)) does not parse")
            }
            defer { dbus_address_entries_free(entries) }
            var result: [AddressEntry] = []
            for index in 0..<Int(count) {
                guard let entry = entries[index] else { continue }
                let method = String(libdbus: dbus_address_entry_get_method(entry)) ?? ""
                var values: [String: String] = [:]
                for key in ["path", "abstract", "dir", "tmpdir", "runtime", "host", "port", "guid"] {
                    if let value = String(libdbus: dbus_address_entry_get_value(entry, key)) { values[key] = value }
                }
                result.append(AddressEntry(method: method, values: values))
            }
            return result
        }
    }

    /// The kinds of name libdbus validates.
    enum NameKind {
        case objectPath, interface, member

        var what: String {
            switch self {
            case .objectPath: "object path"
            case .interface: "interface name"
            case .member: "member name"
            }
        }

        var code: BusError.Code {
            switch self {
            case .objectPath: .invalidObjectPath
            case .interface: .invalidInterfaceName
            case .member: .invalidMemberName
            }
        }
    }

    /// Runs libdbus's validator for `kind` on `rawValue`; a refusal (or a NUL byte) is a
    /// `BusError` that names the value. The corresponding C functions are `dbus_validate_path`,
    /// `dbus_validate_interface` and `dbus_validate_member`.
    static func validate(_ rawValue: String, as kind: NameKind) throws(BusError) {
        try withCString(rawValue, what: kind.what, code: kind.code) { pointer throws(BusError) in
            _ = try withCError(kind.code, value: rawValue, context: "\(kind.what) \(quoted(rawValue)) is not valid") {
                switch kind {
                case .objectPath: dbus_validate_path(pointer, $0)
                case .interface: dbus_validate_interface(pointer, $0)
                case .member: dbus_validate_member(pointer, $0)
                }
            }
        }
    }

    /// Makes libdbus's global state thread-safe; once per process. The corresponding C function
    /// is `dbus_threads_init_default`.
    static let initialiseThreads: Void = { _ = dbus_threads_init_default() }()

    /// Frees memory libdbus allocated. The corresponding C function is `dbus_free`.
    static func free(_ pointer: UnsafeMutableRawPointer) { dbus_free(pointer) }
}

// MARK: - Messages as values

extension LibDBus {
    /// An owned reference to a libdbus message (released when the value goes). Messages belong
    /// to no connection: they are built on any thread and handed to the I/O thread to send.
    final class Message: @unchecked Sendable {
        // @unchecked: a message is built completely before it is shared, then only read or sent.
        let pointer: OpaquePointer

        init(taking pointer: OpaquePointer) { self.pointer = pointer }
        deinit { dbus_message_unref(pointer) }

        /// The message as it goes on the wire (header and body); `nil` when out of memory. The
        /// corresponding C function is `dbus_message_marshal`.
        var wireBytes: [UInt8]? {
            var bytes: UnsafeMutablePointer<CChar>?
            var length: Int32 = 0
            guard dbus_message_marshal(pointer, &bytes, &length) != 0, let bytes else { return nil }
            defer { dbus_free(bytes) }
            return Array(UnsafeRawBufferPointer(start: bytes, count: Int(length)))
        }
    }
}

/// What drives a connection's main loop: libdbus calls these on the owner's thread, from
/// inside the libdbus calls that owner makes.
class MainLoopOwner {
    /// The strings of the signals received lately, which the next ones reuse (owner-confined:
    /// only libdbus's filter, on the owner's thread, reads signals).
    final var receivedStrings = ReceivedStrings()

    /// libdbus wants to hear about a descriptor.
    func watchAdded(_ watch: LibDBus.Watch) {}
    /// A watch is gone (libdbus frees it after this returns).
    func watchRemoved(_ watch: LibDBus.Watch) {}
    /// A watch was enabled or disabled.
    func watchToggled(_ watch: LibDBus.Watch) {}
    /// A timeout was added, changed or (with `removed`) removed.
    func timeoutChanged(_ timeout: LibDBus.Timeout, removed: Bool) {}
    /// libdbus has work for the loop (data to dispatch, a message queued).
    func wakeUp() {}
    /// libdbus's local `Disconnected` signal: the bus went away.
    func disconnected() {}
    /// A signal arrived (after the daemon's filtering).
    func received(_ signal: Signal) {}
    /// Before a signal is decoded: whether it is a duplicate that every route it would reach
    /// has already handled (then it is not decoded nor dispatched).
    func absorbsDuplicate(serial: UInt32, sender: UnsafePointer<CChar>) -> Bool { false }
    /// A reply or error that no pending call was waiting for arrived: `serial` is the serial of
    /// the call it answers; `error` is set for an error reply.
    func receivedReply(serial: UInt32, error: (name: String, message: String)?) {}
}

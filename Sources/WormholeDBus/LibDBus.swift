internal import CWormholeDBus

// The libdbus error convention, in one place: a C `DBusError` is initialised,
// handed to the call, turned into a `BusError` if set, and freed.

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
    if string.utf8.contains(0) {
        throw BusError(code, value: string, "\(what()) \(quoted(string)) contains a NUL byte")
    }
    let terminated = Array(string.utf8CString)
    return try terminated.withUnsafeBufferPointer { buffer throws(BusError) -> T in
        try body(buffer.baseAddress!)
    }
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

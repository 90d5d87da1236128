internal import CWormholeDBus
import Glibc

// Every libdbus call of the module is in this file (the pattern of swift-system's
// Syscalls.swift): each C function has one call site, behind a small Swift function
// that speaks Swift types and turns the C error convention into a `BusError`. The
// rest of the module never imports the C module's functions directly.
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
            let ok = try withCError(.invalidAddress, value: rawValue, context: "bus address \(quoted(rawValue)) does not parse") {
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

// MARK: - Connections (called only by the connection's owner thread)

extension LibDBus {
    /// A libdbus connection handle. Not `Sendable`: it belongs to one thread at a time (the
    /// one that opened it until it hands it to its I/O thread, which owns it from then on).
    struct Connection: Hashable {
        let pointer: OpaquePointer

        /// Opens a private connection: connects the socket, nothing more. Authentication and the
        /// `Hello` call happen later, driven by the owner's loop (see ``setUniqueName(_:)``), so
        /// that a bus which accepts and never answers cannot block anybody. The corresponding
        /// C function is `dbus_connection_open_private` (not `dbus_bus_register`, which blocks
        /// with no deadline while authenticating).
        static func open(_ address: BusAddress) throws(BusError) -> Connection {
            let context = "cannot connect to the bus at \(quoted(address.rawValue))"
            let opened = try withCError(.connectionFailed, value: address.rawValue, context: context) {
                dbus_connection_open_private(address.rawValue, $0)
            }
            guard let opened else { throw BusError(.connectionFailed, value: address.rawValue, context) }
            dbus_connection_set_exit_on_disconnect(opened, 0)
            return Connection(pointer: opened)
        }

        /// Records the unique name the bus gave in its answer to `Hello`, as `dbus_bus_register`
        /// would. The corresponding C function is `dbus_bus_set_unique_name`.
        func setUniqueName(_ name: String) -> Bool { dbus_bus_set_unique_name(pointer, name) != 0 }

        /// The unique name the bus gave this connection (`:1.42`).
        var uniqueName: String { String(libdbus: dbus_bus_get_unique_name(pointer)) ?? "" }

        /// Whether libdbus still considers the connection open.
        var isConnected: Bool { dbus_connection_get_is_connected(pointer) != 0 }

        /// Closes the connection and drops our reference (libdbus calls the remove-watch and
        /// remove-timeout functions from inside, on this thread).
        func closeAndRelease() {
            dbus_connection_close(pointer)
            dbus_connection_unref(pointer)
        }

        /// Hands the connection's main loop to `owner`: libdbus calls its watch, timeout,
        /// wake-up and dispatch-status functions, and a filter passes every incoming signal to
        /// it. `owner` must stay alive (and be the connection's thread) until the connection is
        /// closed. The corresponding C functions are `dbus_connection_set_watch_functions`,
        /// `dbus_connection_set_timeout_functions`, `dbus_connection_set_wakeup_main_function`,
        /// `dbus_connection_set_dispatch_status_function` and `dbus_connection_add_filter`.
        func installMainLoop(_ owner: MainLoopOwner) {
            let data = Unmanaged.passUnretained(owner).toOpaque()
            dbus_connection_set_watch_functions(pointer, Trampolines.addWatch, Trampolines.removeWatch, Trampolines.toggleWatch, data, nil)
            dbus_connection_set_timeout_functions(
                pointer, Trampolines.addTimeout, Trampolines.removeTimeout, Trampolines.toggleTimeout, data, nil)
            dbus_connection_set_wakeup_main_function(pointer, Trampolines.wakeup, data, nil)
            dbus_connection_set_dispatch_status_function(pointer, Trampolines.dispatchStatus, data, nil)
            dbus_connection_add_filter(pointer, Trampolines.filter, data, nil)
        }

        /// Queues a message; libdbus writes what the socket takes at once. False when out of
        /// memory. The corresponding C function is `dbus_connection_send`.
        func send(_ message: Message) -> Bool { dbus_connection_send(pointer, message.pointer, nil) != 0 }

        /// Queues a message like ``send(_:)`` and returns the serial libdbus gave it (what a
        /// reply names as its reply serial), or `nil` when out of memory.
        func sendReturningSerial(_ message: Message) -> UInt32? {
            var serial: dbus_uint32_t = 0
            return dbus_connection_send(pointer, message.pointer, &serial) != 0 ? serial : nil
        }

        /// How many bytes of queued messages libdbus has not written yet (the socket did not
        /// take them). The corresponding C function is `dbus_connection_get_outgoing_size`.
        var outgoingSize: Int { Int(dbus_connection_get_outgoing_size(pointer)) }

        /// Whether queued outgoing data is waiting for the socket.
        var hasMessagesToSend: Bool { dbus_connection_has_messages_to_send(pointer) != 0 }

        /// Dispatches every message already read (filters run from inside, on this thread).
        func dispatchAll() {
            while dbus_connection_dispatch(pointer) == DBUS_DISPATCH_DATA_REMAINS {}
        }

        /// Sends a method call and calls `handler` with the reply (or `nil` when none came:
        /// timeout or disconnection) from inside a later dispatch, on this thread. False when
        /// the call could not be sent. The corresponding C function is `dbus_connection_send_with_reply`.
        ///
        /// `timeoutMilliseconds` bounds the wait (libdbus's default, 25 s, when `nil`); when it
        /// passes, the handler gets libdbus's `NoReply` error reply.
        func call(_ message: Message, timeoutMilliseconds: Int32? = nil, handler: @escaping (Message?) -> Void) -> Bool {
            var pending: OpaquePointer?
            let timeout = timeoutMilliseconds ?? cwormhole_timeout_use_default
            guard dbus_connection_send_with_reply(pointer, message.pointer, &pending, timeout) != 0,
                let pending
            else { return false }
            let box = Unmanaged.passRetained(ReplyBox(handler))
            let notify: DBusPendingCallNotifyFunction = { pending, data in
                guard let pending, let data else { return }
                let box = Unmanaged<ReplyBox>.fromOpaque(data).takeUnretainedValue()
                let reply = dbus_pending_call_steal_reply(pending).map(Message.init(taking:))
                box.handler(reply)
            }
            let free: DBusFreeFunction = { data in
                guard let data else { return }
                Unmanaged<ReplyBox>.fromOpaque(data).release()
            }
            dbus_pending_call_set_notify(pending, notify, box.toOpaque(), free)
            dbus_pending_call_unref(pending)
            return true
        }

        /// Sends a method call and waits for its reply on this thread, at most
        /// `timeoutMilliseconds`: the reply, or `nil` when none came in time or the connection
        /// closed. For the owner of a connection that cannot wait through its own loop (an exit
        /// on the I/O thread). The corresponding C function is
        /// `dbus_connection_send_with_reply_and_block`.
        func callBlocking(_ message: Message, timeoutMilliseconds: Int32) -> Message? {
            var error = DBusError()
            dbus_error_init(&error)
            defer { dbus_error_free(&error) }
            return dbus_connection_send_with_reply_and_block(pointer, message.pointer, max(1, timeoutMilliseconds), &error)
                .map(Message.init(taking:))
        }
    }

    /// The C callbacks of the main-loop integration: no captures, the owner comes through `data`.
    private enum Trampolines {
        static func owner(_ data: UnsafeMutableRawPointer?) -> MainLoopOwner? {
            data.map { Unmanaged<MainLoopOwner>.fromOpaque($0).takeUnretainedValue() }
        }

        static let addWatch: DBusAddWatchFunction = { watch, data in
            if let watch { owner(data)?.watchAdded(Watch(pointer: watch)) }
            return 1
        }
        static let removeWatch: DBusRemoveWatchFunction = { watch, data in
            if let watch { owner(data)?.watchRemoved(Watch(pointer: watch)) }
        }
        static let toggleWatch: DBusWatchToggledFunction = { watch, data in
            if let watch { owner(data)?.watchToggled(Watch(pointer: watch)) }
        }
        static let addTimeout: DBusAddTimeoutFunction = { timeout, data in
            if let timeout { owner(data)?.timeoutChanged(Timeout(pointer: timeout), removed: false) }
            return 1
        }
        static let removeTimeout: DBusRemoveTimeoutFunction = { timeout, data in
            if let timeout { owner(data)?.timeoutChanged(Timeout(pointer: timeout), removed: true) }
        }
        static let toggleTimeout: DBusTimeoutToggledFunction = { timeout, data in
            if let timeout { owner(data)?.timeoutChanged(Timeout(pointer: timeout), removed: false) }
        }
        static let wakeup: DBusWakeupMainFunction = { data in
            owner(data)?.wakeUp()
        }
        static let dispatchStatus: DBusDispatchStatusFunction = { _, status, data in
            if status == DBUS_DISPATCH_DATA_REMAINS { owner(data)?.wakeUp() }
        }
        static let filter: DBusHandleMessageFunction = { _, message, data in
            guard let message, let owner = owner(data) else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
            let type = dbus_message_get_type(message)
            if type == cwormhole_message_type_method_return || type == cwormhole_message_type_error {
                // A reply that no pending call claimed (libdbus hands those their replies first):
                // the answer to a call sent with `sendReturningSerial`, or a late one.
                let serial = dbus_message_get_reply_serial(message)
                if serial != 0 { owner.receivedReply(serial: serial, error: MessageCoding.readError(message)) }
            } else if dbus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
                owner.disconnected()
            } else if type == cwormhole_message_type_signal, let sender = MessageCoding.sender(of: message),
                owner.absorbsDuplicate(serial: MessageCoding.serial(of: message), sender: sender)
            {
                // A signal whose every receiver here was already woken by a doorbell ring: dropped
                // by its sender and serial, before it is decoded.
            } else if let signal = MessageCoding.readSignal(message) {
                owner.received(signal)
            }
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    /// Carries a reply handler through libdbus's `void *` user data.
    private final class ReplyBox {
        let handler: (Message?) -> Void
        init(_ handler: @escaping (Message?) -> Void) { self.handler = handler }
    }

    /// A watch: a file descriptor libdbus wants to hear about.
    struct Watch: Hashable {
        let pointer: OpaquePointer

        var fd: Int32 { dbus_watch_get_unix_fd(pointer) }
        var isEnabled: Bool { dbus_watch_get_enabled(pointer) != 0 }
        var wantsReadable: Bool { dbus_watch_get_flags(pointer) & DBUS_WATCH_READABLE.rawValue != 0 }
        var wantsWritable: Bool { dbus_watch_get_flags(pointer) & DBUS_WATCH_WRITABLE.rawValue != 0 }

        /// Tells libdbus what the descriptor is ready for; it reads or writes from inside.
        func handle(readable: Bool, writable: Bool, error: Bool, hangup: Bool) {
            var condition: UInt32 = 0
            if readable { condition |= DBUS_WATCH_READABLE.rawValue }
            if writable { condition |= DBUS_WATCH_WRITABLE.rawValue }
            if error { condition |= DBUS_WATCH_ERROR.rawValue }
            if hangup { condition |= DBUS_WATCH_HANGUP.rawValue }
            if condition != 0 { dbus_watch_handle(pointer, condition) }
        }
    }

    /// A timeout: libdbus wants to be called back after an interval (reply deadlines).
    struct Timeout: Hashable {
        let pointer: OpaquePointer

        var intervalMilliseconds: Int { Int(dbus_timeout_get_interval(pointer)) }
        var isEnabled: Bool { dbus_timeout_get_enabled(pointer) != 0 }
        func handle() { dbus_timeout_handle(pointer) }
    }
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
    }
}

/// What drives a connection's main loop: libdbus calls these on the owner's thread, from
/// inside the libdbus calls that owner makes.
class MainLoopOwner {
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


// MARK: - Messages: conversion between `Signal` / `DBusValue` and libdbus messages

enum MessageCoding {
    /// Builds a signal message.
    static func makeSignal(_ signal: Signal) throws(BusError) -> LibDBus.Message {
        for (index, argument) in signal.arguments.enumerated() {
            try validate(argument, index: index)
        }
        guard
            let message = dbus_message_new_signal(
                signal.path.rawValue, signal.interface.rawValue, signal.member.rawValue)
        else { throw BusError(.outOfMemory, "libdbus could not allocate a signal message") }
        let owned = LibDBus.Message(taking: message)
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(message, &iterator)
        for argument in signal.arguments where !append(argument, to: &iterator) {
            throw BusError(.outOfMemory, "libdbus could not append \(argument) to a signal")
        }
        // A serial set before sending is kept by libdbus (it numbers only messages without one).
        if let serial = signal.serial, serial != 0 { dbus_message_set_serial(message, serial) }
        return owned
    }

    /// Builds `AddMatch(rule)` for the bus daemon, with the no-reply flag when `noReply`: then
    /// dbus-daemon answers only when it refuses the rule (a connection checks once that its
    /// daemon does, see `BusIO`). `rule` must already be valid UTF-8 without NUL
    /// (``MatchRule/validate()``). `nil` when libdbus is out of memory.
    static func makeAddMatch(_ rule: String, noReply: Bool) -> LibDBus.Message? {
        guard
            let message = dbus_message_new_method_call(
                "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch")
        else { return nil }
        let owned = LibDBus.Message(taking: message)
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(message, &iterator)
        guard appendString(rule, type: cwormhole_type_string, to: &iterator) else { return nil }
        if noReply { dbus_message_set_no_reply(message, 1) }
        return owned
    }

    /// Builds a method call to the bus daemon, on its own interface `org.freedesktop.DBus` unless
    /// another of its interfaces is named (such as `org.freedesktop.DBus.Debug.Stats`).
    static func makeBusCall(
        _ method: String, interface: String = "org.freedesktop.DBus", arguments: [DBusValue]
    ) throws(BusError) -> LibDBus.Message {
        for (index, argument) in arguments.enumerated() {
            try validate(argument, index: index)
        }
        guard
            let message = dbus_message_new_method_call(
                "org.freedesktop.DBus", "/org/freedesktop/DBus", interface, method)
        else { throw BusError(.outOfMemory, "libdbus could not allocate a method call") }
        let owned = LibDBus.Message(taking: message)
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(message, &iterator)
        for argument in arguments where !append(argument, to: &iterator) {
            throw BusError(.outOfMemory, "libdbus could not append \(argument) to a method call")
        }
        return owned
    }

    private static func validate(_ value: DBusValue, index: Int) throws(BusError) {
        switch value {
        case .string(let string): try validateDBusString(string, what: "string argument \(index)")
        case .strings(let strings):
            for string in strings { try validateDBusString(string, what: "string in argument \(index)") }
        case .unsupported(let signature):
            throw BusError(.typeMismatch, value: signature, "cannot send a value of unsupported type '\(signature)'")
        default: break
        }
    }

    private static func appendBasic<T: BitwiseCopyable>(_ value: T, type: Int32, to iterator: inout DBusMessageIter) -> Bool {
        var copy = value
        return withUnsafeMutablePointer(to: &copy) { dbus_message_iter_append_basic(&iterator, type, $0) != 0 }
    }

    private static func append(_ value: DBusValue, to iterator: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(let v): return appendBasic(v, type: cwormhole_type_byte, to: &iterator)
        case .boolean(let v): return appendBasic(dbus_bool_t(v ? 1 : 0), type: cwormhole_type_boolean, to: &iterator)
        case .int16(let v): return appendBasic(v, type: cwormhole_type_int16, to: &iterator)
        case .uint16(let v): return appendBasic(v, type: cwormhole_type_uint16, to: &iterator)
        case .int32(let v): return appendBasic(v, type: cwormhole_type_int32, to: &iterator)
        case .uint32(let v): return appendBasic(v, type: cwormhole_type_uint32, to: &iterator)
        case .int64(let v): return appendBasic(v, type: cwormhole_type_int64, to: &iterator)
        case .uint64(let v): return appendBasic(v, type: cwormhole_type_uint64, to: &iterator)
        case .double(let v): return appendBasic(v, type: cwormhole_type_double, to: &iterator)
        case .string(let v): return appendString(v, type: cwormhole_type_string, to: &iterator)
        case .objectPath(let v): return appendString(v.rawValue, type: cwormhole_type_object_path, to: &iterator)
        case .bytes(let bytes):
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(&iterator, cwormhole_type_array, "y", &sub) != 0 else { return false }
            let ok = bytes.withUnsafeBufferPointer { buffer -> Bool in
                var base: UnsafePointer<UInt8>? = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)
                return withUnsafeMutablePointer(to: &base) { pointer in
                    dbus_message_iter_append_fixed_array(&sub, cwormhole_type_byte, pointer, Int32(buffer.count)) != 0
                }
            }
            return dbus_message_iter_close_container(&iterator, &sub) != 0 && ok
        case .strings(let strings):
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(&iterator, cwormhole_type_array, "s", &sub) != 0 else { return false }
            var ok = true
            for string in strings where ok { ok = appendString(string, type: cwormhole_type_string, to: &sub) }
            return dbus_message_iter_close_container(&iterator, &sub) != 0 && ok
        case .unsupported: return false
        }
    }

    private static func appendString(_ string: String, type: Int32, to iterator: inout DBusMessageIter) -> Bool {
        string.withCString { pointer in
            var base: UnsafePointer<CChar>? = pointer
            return dbus_message_iter_append_basic(&iterator, type, &base) != 0
        }
    }

    /// The unique name of a received message's sender, as libdbus holds it (no copy).
    static func sender(of message: OpaquePointer) -> UnsafePointer<CChar>? { dbus_message_get_sender(message) }

    /// A message's serial (the one its sender gave it).
    static func serial(of message: OpaquePointer) -> UInt32 { dbus_message_get_serial(message) }

    /// Reads a signal message; `nil` when it is not a signal or its header is incomplete.
    static func readSignal(_ message: OpaquePointer) -> Signal? {
        guard dbus_message_get_type(message) == cwormhole_message_type_signal,
            let pathString = String(libdbus: dbus_message_get_path(message)),
            let interfaceString = String(libdbus: dbus_message_get_interface(message)),
            let memberString = String(libdbus: dbus_message_get_member(message))
        else { return nil }
        // libdbus validated the header fields when it read the message.
        var signal = Signal(
            path: ObjectPath(unchecked: pathString), interface: InterfaceName(unchecked: interfaceString),
            member: MemberName(unchecked: memberString), arguments: readArguments(message))
        signal.sender = String(libdbus: sender(of: message))
        signal.serial = serial(of: message)
        return signal
    }

    /// Reads every argument of a reply.
    static func readArguments(_ message: LibDBus.Message) -> [DBusValue] { readArguments(message.pointer) }

    /// Reads every argument of a message.
    private static func readArguments(_ message: OpaquePointer) -> [DBusValue] {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message, &iterator) != 0 else { return [] }
        var values: [DBusValue] = []
        repeat {
            values.append(read(&iterator))
        } while dbus_message_iter_next(&iterator) != 0
        return values
    }

    /// Reads a reply whose one argument is a dictionary of strings to string arrays (`a{sas}`,
    /// the reply of `org.freedesktop.DBus.Debug.Stats.GetAllMatchRules`); `nil` when it has
    /// another signature.
    static func readStringArrayDictionary(_ message: LibDBus.Message) -> [String: [String]]? {
        guard let raw = dbus_message_get_signature(message.pointer), String(cString: raw) == "a{sas}" else {
            return nil
        }
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message.pointer, &iterator) != 0 else { return nil }
        var entries = DBusMessageIter()
        dbus_message_iter_recurse(&iterator, &entries)
        var result: [String: [String]] = [:]
        while dbus_message_iter_get_arg_type(&entries) == cwormhole_type_dict_entry {
            var entry = DBusMessageIter()
            dbus_message_iter_recurse(&entries, &entry)
            let key = readString(&entry)
            dbus_message_iter_next(&entry)
            if case .strings(let values) = read(&entry) { result[key] = values }
            dbus_message_iter_next(&entries)
        }
        return result
    }

    /// Reads an error reply's name and message.
    static func readError(_ message: LibDBus.Message) -> (name: String, message: String)? { readError(message.pointer) }

    /// Reads an error reply's name and message (`nil` for anything but an error).
    static func readError(_ message: OpaquePointer) -> (name: String, message: String)? {
        guard dbus_message_get_type(message) == cwormhole_message_type_error else { return nil }
        let name = String(libdbus: dbus_message_get_error_name(message)) ?? "unknown error"
        var detail = ""
        if case .string(let text)? = readArguments(message).first { detail = text }
        return (name, detail)
    }

    private static func basic<T: BitwiseCopyable>(_ iterator: inout DBusMessageIter, _ initial: T) -> T {
        var value = initial
        withUnsafeMutablePointer(to: &value) { dbus_message_iter_get_basic(&iterator, $0) }
        return value
    }

    private static func read(_ iterator: inout DBusMessageIter) -> DBusValue {
        let type = dbus_message_iter_get_arg_type(&iterator)
        switch type {
        case cwormhole_type_byte: return .byte(basic(&iterator, UInt8(0)))
        case cwormhole_type_boolean: return .boolean(basic(&iterator, dbus_bool_t(0)) != 0)
        case cwormhole_type_int16: return .int16(basic(&iterator, Int16(0)))
        case cwormhole_type_uint16: return .uint16(basic(&iterator, UInt16(0)))
        case cwormhole_type_int32: return .int32(basic(&iterator, Int32(0)))
        case cwormhole_type_uint32: return .uint32(basic(&iterator, UInt32(0)))
        case cwormhole_type_int64: return .int64(basic(&iterator, Int64(0)))
        case cwormhole_type_uint64: return .uint64(basic(&iterator, UInt64(0)))
        case cwormhole_type_double: return .double(basic(&iterator, Double(0)))
        case cwormhole_type_string:
            return .string(readString(&iterator))
        case cwormhole_type_object_path:
            return .objectPath(ObjectPath(unchecked: readString(&iterator)))
        case cwormhole_type_array:
            let element = dbus_message_iter_get_element_type(&iterator)
            var sub = DBusMessageIter()
            if element == cwormhole_type_byte {
                dbus_message_iter_recurse(&iterator, &sub)
                var pointer: UnsafePointer<UInt8>?
                var count: Int32 = 0
                withUnsafeMutablePointer(to: &pointer) { dbus_message_iter_get_fixed_array(&sub, $0, &count) }
                guard let pointer, count > 0 else { return .bytes([]) }
                return .bytes(Array(UnsafeBufferPointer(start: pointer, count: Int(count))))
            }
            if element == cwormhole_type_string {
                dbus_message_iter_recurse(&iterator, &sub)
                var strings: [String] = []
                while dbus_message_iter_get_arg_type(&sub) == cwormhole_type_string {
                    strings.append(readString(&sub))
                    dbus_message_iter_next(&sub)
                }
                return .strings(strings)
            }
            return .unsupported(signature: signature(of: &iterator))
        default:
            return .unsupported(signature: signature(of: &iterator))
        }
    }

    private static func readString(_ iterator: inout DBusMessageIter) -> String {
        var pointer: UnsafePointer<CChar>?
        dbus_message_iter_get_basic(&iterator, &pointer)
        return String(libdbus: pointer) ?? ""
    }

    private static func signature(of iterator: inout DBusMessageIter) -> String {
        guard let raw = dbus_message_iter_get_signature(&iterator) else { return "?" }
        defer { LibDBus.free(raw) }
        return String(cString: raw)
    }
}

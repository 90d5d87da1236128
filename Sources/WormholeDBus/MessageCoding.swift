// SPDX-License-Identifier: Apache-2.0
internal import CWormholeDBus
import Glibc

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

    private static func appendBasic<T: BitwiseCopyable>(_ value: T, type: Int32, to iterator: inout DBusMessageIter)
        -> Bool
    {
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
            guard dbus_message_iter_open_container(&iterator, cwormhole_type_array, "y", &sub) != 0 else {
                return false
            }
            let ok = bytes.withUnsafeBufferPointer { buffer -> Bool in
                var base: UnsafePointer<UInt8>? = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)
                return withUnsafeMutablePointer(to: &base) { pointer in
                    dbus_message_iter_append_fixed_array(&sub, cwormhole_type_byte, pointer, Int32(buffer.count)) != 0
                }
            }
            return dbus_message_iter_close_container(&iterator, &sub) != 0 && ok
        case .strings(let strings):
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(&iterator, cwormhole_type_array, "s", &sub) != 0 else {
                return false
            }
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

    /// Reads a signal message; `nil` when it is not a signal or its header is incomplete. Its
    /// header fields and string arguments reuse the connection's recent strings (`strings`).
    static func readSignal(_ message: OpaquePointer, strings: inout ReceivedStrings) -> Signal? {
        guard dbus_message_get_type(message) == cwormhole_message_type_signal,
            let pathString = strings.string(dbus_message_get_path(message), as: .path),
            let interfaceString = strings.string(dbus_message_get_interface(message), as: .interface),
            let memberString = strings.string(dbus_message_get_member(message), as: .member)
        else { return nil }
        // libdbus validated the header fields when it read the message.
        return Signal(
            path: ObjectPath(unchecked: pathString), interface: InterfaceName(unchecked: interfaceString),
            member: MemberName(unchecked: memberString), sender: strings.string(sender(of: message), as: .sender),
            serial: serial(of: message), arguments: readArguments(message, strings: &strings))
    }

    /// Reads a signal message, keeping no strings for the next (``readSignal(_:strings:)``).
    static func readSignal(_ message: OpaquePointer) -> Signal? {
        var strings = ReceivedStrings()
        return readSignal(message, strings: &strings)
    }

    /// Reads every argument of a received signal, its strings from `strings` (a signal's
    /// arguments are few: room for four is made at once).
    private static func readArguments(_ message: OpaquePointer, strings: inout ReceivedStrings) -> [DBusValue] {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message, &iterator) != 0 else { return [] }
        var values: [DBusValue] = []
        values.reserveCapacity(4)
        repeat {
            if dbus_message_iter_get_arg_type(&iterator) == cwormhole_type_string {
                var pointer: UnsafePointer<CChar>?
                dbus_message_iter_get_basic(&iterator, &pointer)
                values.append(.string(strings.string(pointer, as: .argument) ?? ""))
            } else {
                values.append(read(&iterator))
            }
        } while dbus_message_iter_next(&iterator) != 0
        return values
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

// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: signal argument decoding. The input is taken as a D-Bus wire message
// (dbus_message_demarshal, as the bus would hand it over); every message libdbus accepts is
// decoded with MessageCoding.readArguments (and readSignal, readError), the decoders every
// received signal and reply goes through. Built with the whole WormholeDBus module (libdbus,
// swift-log) by Tests/fuzz.sh.
// Invariants: decoding never crashes, whatever the message's signature and values; the decoded
// values' signatures, one after the other, are the message's signature; values of the supported
// types encode (MessageCoding.makeSignal) and decode back to the same values, bit for bit.
internal import CWormholeDBus
import Glibc

/// Equal, doubles bit for bit (a NaN is not == itself).
private func same(_ a: [DBusValue], _ b: [DBusValue]) -> Bool {
    a.count == b.count
        && zip(a, b).allSatisfy { pair in
            if case .double(let x) = pair.0, case .double(let y) = pair.1 { return x.bitPattern == y.bitPattern }
            return pair.0 == pair.1
        }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSignalDecoding(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var error = DBusError()
    dbus_error_init(&error)
    defer { dbus_error_free(&error) }
    let message = data.withMemoryRebound(to: CChar.self, capacity: size) {
        dbus_message_demarshal($0, Int32(clamping: size), &error)
    }
    guard let message else { return 0 }
    let owned = LibDBus.Message(taking: message)
    let values = MessageCoding.readArguments(owned)
    _ = MessageCoding.readError(owned)
    if let signal = MessageCoding.readSignal(message), !same(signal.arguments, values) {
        fatalError("readSignal and readArguments disagree: \(signal.arguments) and \(values)")
    }
    let signature = String(cString: dbus_message_get_signature(message))
    guard values.map(\.signature).joined() == signature else {
        fatalError("decoded \(values) from a message of signature '\(signature)'")
    }
    if !values.contains(where: { if case .unsupported = $0 { true } else { false } }) {
        let signal = Signal(path: path, interface: interface, member: member, arguments: values)
        let encoded: LibDBus.Message
        do {
            encoded = try MessageCoding.makeSignal(signal)
        } catch {
            fatalError("decoded values \(values) do not encode: \(error)")
        }
        let again = MessageCoding.readArguments(encoded)
        guard same(again, values) else { fatalError("\(values) encoded and decoded as \(again)") }
    }
    return 0
}

private let path = try! ObjectPath("/org/wormhole/Notify1")
private let interface = try! InterfaceName("org.wormhole.Notify1.BE6A2")
private let member = try! MemberName("Posted")

/// With WORMHOLE_FUZZ_SEEDS=DIR, writes marshalled signals of every argument type to DIR (the
/// seed corpus) and exits.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzSignalDecodingInitialize(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    guard let directory = getenv("WORMHOLE_FUZZ_SEEDS").map({ String(cString: $0) }) else { return 0 }
    let samples: [[DBusValue]] = [
        [.string("com.example.app.refresh"), .uint64(42)],
        [.string("it's/a \\ name")],
        [.uint64(1)],
        [.string("a"), .uint64(.max), .string("extra")],
        [
            .bytes([1, 2, 3]), .boolean(true), .int32(-7), .double(2.5), .strings(["a", "b"]), .objectPath(path),
            .byte(9),
        ],
        [.int16(-2), .uint16(3), .uint32(4), .int64(-5), .double(-.nan), .bytes([]), .strings([])],
        [],
    ]
    for (index, arguments) in samples.enumerated() {
        let message = try! MessageCoding.makeSignal(
            Signal(path: path, interface: interface, member: member, arguments: arguments))
        // A message on the wire has a serial (libdbus refuses serial 0 when it reads one).
        dbus_message_set_serial(message.pointer, UInt32(index + 1))
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        guard dbus_message_marshal(message.pointer, &bytes, &length) != 0, let bytes else { continue }
        let file = fopen("\(directory)/signal-\(index)", "wb")
        fwrite(bytes, 1, Int(length), file)
        fclose(file)
        dbus_free(bytes)
    }
    exit(0)
}

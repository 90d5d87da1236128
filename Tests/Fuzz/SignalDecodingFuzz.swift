// libFuzzer target: signal argument decoding. The input is taken as a D-Bus wire message
// (dbus_message_demarshal, as the bus would hand it over); every message libdbus accepts is
// decoded with MessageCoding.readArguments, the decoder every received signal goes through.
// Invariant: decoding never crashes, whatever the message's signature and values. Built with
// the whole WormholeDBus module (libdbus, swift-log) by Tests/fuzz.sh.
internal import CWormholeDBus
import Glibc

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
    _ = MessageCoding.readArguments(owned)
    _ = MessageCoding.readError(owned)
    return 0
}

/// With WORMHOLE_FUZZ_SEEDS=DIR, writes marshalled signals of every argument type to DIR (the
/// seed corpus) and exits.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzSignalDecodingInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    guard let directory = getenv("WORMHOLE_FUZZ_SEEDS").map({ String(cString: $0) }) else { return 0 }
    let path = try! ObjectPath("/org/wormhole/Notify1")
    let interface = try! InterfaceName("org.wormhole.Notify1.BE6A2")
    let member = try! MemberName("Posted")
    let samples: [[DBusValue]] = [
        [.string("com.example.app.refresh"), .uint64(42)],
        [.string("it's/a \\ name")],
        [.uint64(1)],
        [.string("a"), .uint64(.max), .string("extra")],
        [.bytes([1, 2, 3]), .boolean(true), .int32(-7), .double(2.5), .strings(["a", "b"]), .objectPath(path), .byte(9)],
        [],
    ]
    for (index, arguments) in samples.enumerated() {
        let message = try! MessageCoding.makeSignal(Signal(path: path, interface: interface, member: member, arguments: arguments))
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

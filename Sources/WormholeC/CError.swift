// SPDX-License-Identifier: Apache-2.0
import Glibc
import Wormhole
import WormholeDBus

// The error object of the C API (wh_error) and the status codes of wormhole.h.

/// `wh_status`, as wormhole.h numbers it (the numbers are ABI: never renumber one).
enum CStatus: Int32 {
    case ok = 0
    case invalidArgument = 1
    case invalidName = 2
    case invalidGroup = 3
    case invalidIdentifier = 4
    case invalidDirectory = 5
    case invalidSuite = 6
    case invalidKey = 7
    case invalidJSON = 8
    case invalidValue = 9
    case invalidAppID = 10
    case invalidAddress = 11
    case messageTooLarge = 12
    case suiteTooLarge = 13
    case typeMismatch = 14
    case corruptSuite = 15
    case unsafePath = 16
    case noContainerRoot = 17
    case io = 18
    case lockTimeout = 19
    case bus = 20
    case notSent = 21
    case mismatch = 22
    case timedOut = 23
    case closed = 24
    case decodingFailed = 25
    case noMessage = 26
    case recordTooLarge = 27
    case journalCorrupt = 28
    case journalDamaged = 29
    case journalGap = 30
    case journalVersion = 31
    case invalidPosition = 32
    case invalidConsumer = 33
    case invalidCursor = 34
    case consumerBusy = 35
    case transientTooLarge = 36
    case transientDropped = 37
    case encodingFailed = 38
    case queueFull = 39
    case other = 99

    /// The status of a Swift library code (`WormholeError.Code.rawValue`).
    static let byWormholeCode: [String: CStatus] = [
        "invalidName": .invalidName, "invalidGroup": .invalidGroup, "invalidIdentifier": .invalidIdentifier,
        "invalidDirectory": .invalidDirectory, "invalidSuite": .invalidSuite, "invalidKey": .invalidKey,
        "invalidJSON": .invalidJSON, "invalidValue": .invalidValue, "invalidAppID": .invalidAppID,
        "messageTooLarge": .messageTooLarge, "suiteTooLarge": .suiteTooLarge, "typeMismatch": .typeMismatch,
        "corruptSuite": .corruptSuite, "unsafePath": .unsafePath, "noContainerRoot": .noContainerRoot, "io": .io,
        "lockTimeout": .lockTimeout, "decodingFailed": .decodingFailed, "noMessage": .noMessage,
        "recordTooLarge": .recordTooLarge, "journalCorrupt": .journalCorrupt, "journalDamaged": .journalDamaged,
        "journalGap": .journalGap, "journalVersion": .journalVersion, "invalidPosition": .invalidPosition,
        "invalidConsumer": .invalidConsumer, "invalidCursor": .invalidCursor, "consumerBusy": .consumerBusy,
        "transientTooLarge": .transientTooLarge, "transientDropped": .transientDropped,
        "encodingFailed": .encodingFailed,
    ]
}

/// A failure of a C API call: what `wh_error` holds, and the status the call returns.
struct CFailure: Error {
    var status: CStatus
    /// The Swift library's name of the code (`invalidName`, `bus.noSessionBus`).
    var name: String
    var message: String
    var value: String?

    init(_ status: CStatus, name: String, _ message: String, value: String? = nil) {
        self.status = status
        self.name = name
        self.message = message
        self.value = value
    }

    /// A bad argument of the C call itself (a NULL pointer, an unknown flag).
    static func argument(_ message: String, value: String? = nil) -> CFailure {
        CFailure(.invalidArgument, name: "invalidArgument", message, value: value)
    }

    /// The failure that `error` reports.
    init(_ error: any Error) {
        switch error {
        case let failure as CFailure:
            self = failure
        case let error as WormholeError:
            self.init(
                CStatus.byWormholeCode[error.code.rawValue] ?? .other, name: error.code.rawValue, error.message,
                value: error.value)
        case let error as BusError:
            let status: CStatus =
                switch error.code {
                case .invalidAddress: .invalidAddress
                case .timedOut: .timedOut
                case .queueFull: .queueFull
                default: .bus
                }
            self.init(status, name: "bus.\(error.code.rawValue)", error.message, value: error.value)
        default:
            self.init(.other, name: "other", "\(error)")
        }
    }
}

/// `wh_error`: owns its strings as C strings, freed with it.
final class CErrorObject {
    let status: CStatus
    let name: UnsafeMutablePointer<CChar>
    let message: UnsafeMutablePointer<CChar>
    let value: UnsafeMutablePointer<CChar>?

    init(_ failure: CFailure) {
        status = failure.status
        name = strdup(failure.name)
        message = strdup(failure.message)
        value = failure.value.map { strdup($0) }
    }

    deinit {
        free(name)
        free(message)
        free(value)
    }
}

/// Runs one C API call's body: its failure becomes the returned status and, when the caller
/// asked for one, a new `wh_error`.
func cCall(_ out: UnsafeMutablePointer<OpaquePointer?>?, _ body: () throws -> Void) -> Int32 {
    do {
        try body()
        return CStatus.ok.rawValue
    } catch {
        let failure = CFailure(error)
        if let out { out.pointee = OpaquePointer(Unmanaged.passRetained(CErrorObject(failure)).toOpaque()) }
        return failure.status.rawValue
    }
}

/// Runs one C API call's body on the object behind its handle argument `handle` (NULL fails,
/// naming `argument`).
func cCall<T: AnyObject>(
    _ out: UnsafeMutablePointer<OpaquePointer?>?, _ handle: OpaquePointer?, _ type: T.Type, _ argument: String,
    _ body: (T) throws -> Void
) -> Int32 {
    cCall(out) { try body(object(handle, type, argument)) }
}

/// The object behind a handle the C API gave out, or a failure naming the argument when NULL.
func object<T: AnyObject>(_ handle: OpaquePointer?, _ type: T.Type, _ argument: String) throws -> T {
    guard let handle else { throw CFailure.argument("\(argument) is NULL") }
    return Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue()
}

/// The object behind a handle, or nil for NULL (for functions that cannot report a failure).
func object<T: AnyObject>(_ handle: OpaquePointer?, _ type: T.Type) -> T? {
    handle.map { Unmanaged<T>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

/// A new handle for `object` (one reference, released by the handle's free function).
func handle(_ object: AnyObject) -> OpaquePointer {
    OpaquePointer(Unmanaged.passRetained(object).toOpaque())
}

/// Releases a handle's reference.
func release<T: AnyObject>(_ handle: OpaquePointer?, _ type: T.Type) {
    guard let handle else { return }
    Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle)).release()
}

/// A C string argument as a Swift string: NULL and invalid UTF-8 are refused, naming the
/// argument (and the bytes), with `code`'s status for invalid UTF-8.
func text(_ pointer: UnsafePointer<CChar>?, _ argument: String) throws -> String {
    guard let pointer else { throw CFailure.argument("\(argument) is NULL") }
    return try text(UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)), argument)
}

/// Bytes as a Swift string, refusing invalid UTF-8 with an error that shows them.
func text(_ bytes: UnsafeRawBufferPointer, _ argument: String) throws -> String {
    if let string = String(validating: bytes, as: UTF8.self) { return string }
    let hex = bytes.prefix(40).map { String($0, radix: 16) }.joined(separator: " ")
    throw CFailure.argument("\(argument) is not valid UTF-8 (bytes: \(hex))", value: hex)
}

/// An optional C string argument (NULL: nil).
func optionalText(_ pointer: UnsafePointer<CChar>?, _ argument: String) throws -> String? {
    try pointer.map { try text($0, argument) }
}

/// A payload with an explicit length: NULL with a non-zero length is refused.
func bytes(_ pointer: UnsafePointer<CChar>?, _ length: Int, _ argument: String) throws -> UnsafeRawBufferPointer {
    guard let pointer else {
        if length == 0 { return UnsafeRawBufferPointer(start: nil, count: 0) }
        throw CFailure.argument("\(argument) is NULL")
    }
    return UnsafeRawBufferPointer(start: pointer, count: length)
}

/// Stores a new malloc'd, NUL-terminated copy of `bytes` (freed with wh_free) and its length.
func give(
    _ bytes: some Collection<UInt8>, _ out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ length: UnsafeMutablePointer<Int>?
) {
    let buffer = malloc(bytes.count + 1)!.assumingMemoryBound(to: UInt8.self)
    _ = UnsafeMutableBufferPointer(start: buffer, count: bytes.count).initialize(from: bytes)
    buffer[bytes.count] = 0
    out?.pointee = UnsafeMutableRawPointer(buffer).assumingMemoryBound(to: CChar.self)
    length?.pointee = bytes.count
    if out == nil { free(buffer) }
}

/// `give` for a read: NULL and a length of 0 when nothing was found.
func give(
    found bytes: (some Collection<UInt8>)?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
    _ length: UnsafeMutablePointer<Int>?
) {
    if let bytes {
        give(bytes, out, length)
    } else {
        out.pointee = nil
        length?.pointee = 0
    }
}

/// The JSON text a delivered message, record or change owns: a malloc'd, NUL-terminated copy,
/// freed with its owner.
final class CJSONText {
    let pointer: UnsafeMutablePointer<CChar>?
    let length: Int

    init(_ bytes: some Collection<UInt8>) {
        var pointer: UnsafeMutablePointer<CChar>?
        var length = 0
        give(bytes, &pointer, &length)
        self.pointer = pointer
        self.length = length
    }

    deinit { free(pointer) }

    /// What `wh_message_json`, `wh_record_json` and `wh_change_value` return: the text, valid
    /// while its owner is, and its length (NULL and 0 when there is none).
    static func lend(_ text: CJSONText?, _ length: UnsafeMutablePointer<Int>?) -> UnsafePointer<CChar>? {
        length?.pointee = text?.length ?? 0
        return text?.pointer.map { UnsafePointer($0) }
    }
}

/// Checks that `flags` has no bit outside `known`.
func checkFlags(_ flags: UInt32, known: UInt32) throws {
    if flags & ~known != 0 {
        throw CFailure.argument(
            "unknown flags 0x\(String(flags & ~known, radix: 16))", value: "0x\(String(flags, radix: 16))")
    }
}

@_cdecl("wh_error_code")
public func whErrorCode(_ error: OpaquePointer?) -> Int32 {
    object(error, CErrorObject.self)?.status.rawValue ?? CStatus.invalidArgument.rawValue
}

@_cdecl("wh_error_name")
public func whErrorName(_ error: OpaquePointer?) -> UnsafePointer<CChar>? {
    object(error, CErrorObject.self).map { UnsafePointer($0.name) }
}

@_cdecl("wh_error_message")
public func whErrorMessage(_ error: OpaquePointer?) -> UnsafePointer<CChar>? {
    object(error, CErrorObject.self).map { UnsafePointer($0.message) }
}

@_cdecl("wh_error_value")
public func whErrorValue(_ error: OpaquePointer?) -> UnsafePointer<CChar>? {
    object(error, CErrorObject.self)?.value.map { UnsafePointer($0) }
}

@_cdecl("wh_error_free")
public func whErrorFree(_ error: OpaquePointer?) {
    release(error, CErrorObject.self)
}

@_cdecl("wh_free")
public func whFree(_ buffer: UnsafeMutableRawPointer?) {
    free(buffer)
}

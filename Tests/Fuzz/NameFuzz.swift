// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the contract's name rules (§2) on arbitrary strings: group identifiers,
// directory names, message identifiers. Built with the Storage name files and WormholeError.
// Invariants: validation never crashes; it accepts exactly the strings of 1 to N bytes of
// A-Z a-z 0-9 . _ - not starting with '.' (and a directory name is never "Preferences"); a
// refusal names the value; an accepted identifier's file name round-trips, and a file name
// parses exactly when it is `<valid identifier>.json`.

/// The reference rule, on the UTF-8 of the string (as the contract states it): nil when some
/// byte is outside the allowed set or it starts with '.', else the length in bytes.
private func allowedLength(_ utf8: some Sequence<UInt8>) -> Int? {
    var count = 0
    for byte in utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            break
        case UInt8(ascii: "."):
            if count == 0 { return nil }
        default:
            return nil
        }
        count += 1
    }
    return count
}

private func expected(_ allowed: Int?, maximum: Int) -> Bool {
    guard let allowed else { return false }
    return (1...maximum).contains(allowed)
}

/// Makes `T` from `string`; checks acceptance against the reference and that a refusal names the value.
private func check<T>(_ string: String, _ shouldAccept: Bool, _ make: (String) throws -> T) -> T? {
    let made: T?
    do {
        made = try make(string)
    } catch let error as WormholeError {
        if error.value != string { fatalError("refusal does not name the value: \(error)") }
        made = nil
    } catch {
        fatalError("unexpected error \(error)")
    }
    if (made != nil) != shouldAccept {
        fatalError("\(made != nil ? "accepted" : "refused") \(Array(string.utf8)) (expected the opposite)")
    }
    return made
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNames(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let string = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let allowed = allowedLength(string.utf8)
    _ = check(string, expected(allowed, maximum: 255), { try GroupIdentifier($0) })
    _ = check(string, expected(allowed, maximum: 255) && string != "Preferences", WormholeDirectoryName.init)
    if let identifier = check(string, expected(allowed, maximum: 200), { try MessageIdentifier($0) }) {
        guard MessageIdentifier(fileName: identifier.fileName) == identifier else { fatalError("file name round trip") }
    }
    // As a file name: `<identifier>.json` parses to the identifier; anything else does not parse.
    let parsed = MessageIdentifier(fileName: string)
    let isFileName =
        string.utf8.reversed().starts(with: ".json".utf8.reversed())
        && expected(allowedLength(string.utf8.dropLast(5)), maximum: 200)
    if (parsed != nil) != isFileName { fatalError("fileName parse of \(Array(string.utf8))") }
    if let parsed, parsed.fileName != string { fatalError("fileName parse") }
    return 0
}

// libFuzzer target: the contract's name rules (§2) on arbitrary strings: group identifiers,
// directory names, message identifiers. Built with the Storage name files and WormholeError.
// Invariants: validation never crashes; it accepts exactly the strings of 1 to N bytes of
// A-Z a-z 0-9 . _ - not starting with '.'; a refusal names the value; an accepted identifier's
// file name round-trips.

private func expected(_ string: String, maximum: Int) -> Bool {
    let bytes = Array(string.utf8)
    guard (1...maximum).contains(bytes.count), bytes.first != UInt8(ascii: ".") else { return false }
    return bytes.allSatisfy { byte in
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
        default: false
        }
    }
}

private func check<T>(_ string: String, maximum: Int, _ make: (String) throws -> T) {
    let accepted: Bool
    do {
        _ = try make(string)
        accepted = true
    } catch let error as WormholeError {
        if error.value != string { fatalError("refusal does not name the value: \(error)") }
        accepted = false
    } catch {
        fatalError("unexpected error \(error)")
    }
    if accepted != expected(string, maximum: maximum) && string != "Preferences" {
        fatalError("\(accepted ? "accepted" : "refused") \(Array(string.utf8)) (maximum \(maximum))")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNames(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let string = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    check(string, maximum: 255, GroupIdentifier.init)
    check(string, maximum: 255, WormholeDirectoryName.init)
    check(string, maximum: 200, MessageIdentifier.init)
    if let identifier = try? MessageIdentifier(string) {
        guard MessageIdentifier(fileName: identifier.fileName) == identifier else { fatalError("file name round trip") }
    }
    if let parsed = MessageIdentifier(fileName: string), parsed.fileName != string { fatalError("fileName parse") }
    return 0
}

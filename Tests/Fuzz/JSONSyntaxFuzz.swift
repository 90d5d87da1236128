// libFuzzer target: the one-pass JSON validator (JSONSyntax.check) on arbitrary bytes.
// Built with Sources/Wormhole/Messaging/JSONSyntax.swift by Tests/fuzz.sh.
// Invariants: it returns (no crash, no hang, no overflow); a failure's offset lies within the
// input; an accepted text stays accepted with white space around it, and is refused with a
// stray byte after it.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONSyntax(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let failure = JSONSyntax.check(bytes)
    if let failure, !(0...size).contains(failure.offset) {
        fatalError("failure offset \(failure.offset) outside 0...\(size)")
    }
    if failure == nil {
        let spaced = [0x20, 0x0A] + Array(bytes) + [0x09, 0x0D]
        if spaced.withUnsafeBytes({ JSONSyntax.check($0) }) != nil { fatalError("accepted text refused with white space") }
        let trailing = Array(bytes) + [UInt8(ascii: "x")]
        if trailing.withUnsafeBytes({ JSONSyntax.check($0) }) == nil { fatalError("accepted text plus 'x' accepted") }
    }
    return 0
}

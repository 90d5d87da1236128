// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the one-pass JSON validator (JSONSyntax.check) on arbitrary bytes.
// Built with Sources/Wormhole/Messaging/JSONSyntax.swift by Tests/fuzz.sh.
// Invariants: it returns (no crash, no hang, no overflow); it accepts exactly what a reference
// recursive-descent checker written here from RFC 8259's grammar accepts (strings of valid UTF-8:
// no overlong forms, no encoded surrogates, nothing above U+10FFFF; escapes as the grammar allows,
// `\uD800` included); a failure's offset lies within the input; an accepted text stays accepted
// with white space around it, and is refused with a stray byte after it.

/// RFC 8259, section by section, recursively: a second opinion, not fast.
private struct Reference {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    static func accepts(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var reference = Reference(bytes: bytes)
        reference.space()
        guard reference.value() else { return false }
        reference.space()
        return reference.index == bytes.count
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard current == byte else { return false }
        index += 1
        return true
    }

    /// ws = *( %x20 / %x09 / %x0A / %x0D )
    mutating func space() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    mutating func value() -> Bool {
        switch current {
        case UInt8(ascii: "{"): return members()
        case UInt8(ascii: "["): return elements()
        case UInt8(ascii: "\""): return string()
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        default: return number()
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        word.withUTF8Buffer { word in word.allSatisfy { take($0) } }
    }

    /// object = { [ member *( , member ) ] }, member = string : value
    private mutating func members() -> Bool {
        index += 1
        space()
        if take(UInt8(ascii: "}")) { return true }
        while true {
            guard current == UInt8(ascii: "\""), string() else { return false }
            space()
            guard take(UInt8(ascii: ":")) else { return false }
            space()
            guard value() else { return false }
            space()
            if take(UInt8(ascii: "}")) { return true }
            guard take(UInt8(ascii: ",")) else { return false }
            space()
        }
    }

    /// array = [ [ value *( , value ) ] ]
    private mutating func elements() -> Bool {
        index += 1
        space()
        if take(UInt8(ascii: "]")) { return true }
        while true {
            guard value() else { return false }
            space()
            if take(UInt8(ascii: "]")) { return true }
            guard take(UInt8(ascii: ",")) else { return false }
            space()
        }
    }

    private static func isDigit(_ byte: UInt8?) -> Bool { byte.map { (0x30...0x39).contains($0) } ?? false }

    /// number = [ - ] int [ frac ] [ exp ]
    private mutating func number() -> Bool {
        _ = take(UInt8(ascii: "-"))
        if !take(UInt8(ascii: "0")) {
            guard let first = current, (0x31...0x39).contains(first) else { return false }
            while Self.isDigit(current) { index += 1 }
        }
        if take(UInt8(ascii: ".")) {
            guard Self.isDigit(current) else { return false }
            while Self.isDigit(current) { index += 1 }
        }
        if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
            if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
            guard Self.isDigit(current) else { return false }
            while Self.isDigit(current) { index += 1 }
        }
        return true
    }

    /// string = " *char ", in valid UTF-8 (RFC 3629's table, section 4).
    private mutating func string() -> Bool {
        index += 1
        while let byte = current {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return true
            case UInt8(ascii: "\\"):
                guard let escaped = current else { return false }
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    for _ in 0..<4 {
                        guard let hex = current,
                            (0x30...0x39).contains(hex) || (0x41...0x46).contains(hex) || (0x61...0x66).contains(hex)
                        else { return false }
                        index += 1
                    }
                default:
                    return false
                }
            case 0x00..<0x20:
                return false
            case 0x20..<0x80:
                continue
            default:
                // The first byte decides the length and the range of the second.
                let (count, second): (Int, ClosedRange<UInt8>)
                switch byte {
                case 0xC2...0xDF: (count, second) = (1, 0x80...0xBF)
                case 0xE0: (count, second) = (2, 0xA0...0xBF)
                case 0xE1...0xEC, 0xEE...0xEF: (count, second) = (2, 0x80...0xBF)
                case 0xED: (count, second) = (2, 0x80...0x9F)
                case 0xF0: (count, second) = (3, 0x90...0xBF)
                case 0xF1...0xF3: (count, second) = (3, 0x80...0xBF)
                case 0xF4: (count, second) = (3, 0x80...0x8F)
                default: return false
                }
                guard let next = current, second.contains(next) else { return false }
                index += 1
                for _ in 1..<count {
                    guard let next = current, (0x80...0xBF).contains(next) else { return false }
                    index += 1
                }
            }
        }
        return false
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONSyntax(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let failure = JSONSyntax.check(bytes)
    if let failure, !(0...size).contains(failure.offset) {
        fatalError("failure offset \(failure.offset) outside 0...\(size)")
    }
    if (failure == nil) != Reference.accepts(bytes) {
        fatalError(
            "JSONSyntax \(failure.map { "refuses (\($0))" } ?? "accepts") what RFC 8259 \(failure == nil ? "refuses" : "accepts")"
        )
    }
    if failure == nil {
        let spaced = [0x20, 0x0A] + Array(bytes) + [0x09, 0x0D]
        if spaced.withUnsafeBytes({ JSONSyntax.check($0) }) != nil {
            fatalError("accepted text refused with white space")
        }
        let trailing = Array(bytes) + [UInt8(ascii: "x")]
        if trailing.withUnsafeBytes({ JSONSyntax.check($0) }) == nil { fatalError("accepted text plus 'x' accepted") }
    }
    return 0
}

/// Checks that bytes are exactly one JSON text as RFC 8259 defines it, in UTF-8: one value of
/// any type with optional white space around it, strings of valid UTF-8 without raw control
/// characters, numbers as the grammar spells them (any size: `1e400` and 40-digit integers are
/// JSON), no byte-order mark (contract §3, v1.1).
///
/// One pass over the bytes, no values built, no allocation unless containers nest (the stack of
/// open containers). This is what ``JSONDocument`` checks, so forwarding a stored message (the
/// `wormhole listen` path) costs a scan, not a parse into Foundation objects.
enum JSONSyntax {
    /// Why the bytes are not one JSON text, and where.
    struct Failure: Error, CustomStringConvertible {
        var offset: Int
        var reason: String
        var description: String { "\(reason) at byte \(offset)" }
    }

    private enum Expecting {
        case value, key, afterValue
    }

    /// `nil` when `bytes` is one JSON text; otherwise the first problem.
    static func check(_ bytes: UnsafeRawBufferPointer) -> Failure? {
        var scanner = Scanner(bytes: bytes)
        do {
            try scanner.text()
            return nil
        } catch {
            return error
        }
    }

    private struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        private func fail(_ reason: String) -> Failure { Failure(offset: index, reason: reason) }

        private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        private mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func text() throws(Failure) {
            if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF {
                throw fail("a byte-order mark (JSON text is UTF-8 without one)")
            }
            skipWhitespace()
            if index == bytes.count { throw fail("no value (empty or only white space)") }
            // true: an object is open; false: an array.
            var open: [Bool] = []
            var expecting = Expecting.value
            while true {
                skipWhitespace()
                switch expecting {
                case .value:
                    guard let byte = current else { throw fail("the text ends where a value should be") }
                    switch byte {
                    case UInt8(ascii: "{"):
                        index += 1
                        skipWhitespace()
                        if current == UInt8(ascii: "}") {
                            index += 1
                            expecting = .afterValue
                        } else {
                            open.append(true)
                            expecting = .key
                        }
                    case UInt8(ascii: "["):
                        index += 1
                        skipWhitespace()
                        if current == UInt8(ascii: "]") {
                            index += 1
                            expecting = .afterValue
                        } else {
                            open.append(false)
                            expecting = .value
                        }
                    case UInt8(ascii: "\""):
                        try string()
                        expecting = .afterValue
                    case UInt8(ascii: "t"):
                        try literal("true")
                        expecting = .afterValue
                    case UInt8(ascii: "f"):
                        try literal("false")
                        expecting = .afterValue
                    case UInt8(ascii: "n"):
                        try literal("null")
                        expecting = .afterValue
                    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                        try number()
                        expecting = .afterValue
                    default:
                        throw fail("unexpected byte 0x\(String(byte, radix: 16)) where a value should be")
                    }
                case .key:
                    guard current == UInt8(ascii: "\"") else { throw fail("an object key must be a string") }
                    try string()
                    skipWhitespace()
                    guard current == UInt8(ascii: ":") else { throw fail("expected ':' after an object key") }
                    index += 1
                    expecting = .value
                case .afterValue:
                    guard let inObject = open.last else {
                        if index != bytes.count { throw fail("more after the value (one JSON value only)") }
                        return
                    }
                    guard let byte = current else { throw fail("the text ends inside \(inObject ? "an object" : "an array")") }
                    if byte == UInt8(ascii: ",") {
                        index += 1
                        expecting = inObject ? .key : .value
                    } else if byte == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                        index += 1
                        open.removeLast()
                    } else {
                        throw fail("expected ',' or '\(inObject ? "}" : "]")'")
                    }
                }
            }
        }

        private mutating func literal(_ word: StaticString) throws(Failure) {
            let count = word.utf8CodeUnitCount
            let matches = word.withUTF8Buffer { expected in
                index + count <= bytes.count && (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
            }
            guard matches else { throw fail("expected \(word)") }
            index += count
        }

        private mutating func digits() -> Int {
            let start = index
            while let byte = current, byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") { index += 1 }
            return index - start
        }

        private mutating func number() throws(Failure) {
            if current == UInt8(ascii: "-") { index += 1 }
            if current == UInt8(ascii: "0") {
                index += 1
            } else if digits() == 0 {
                throw fail("a number needs digits")
            }
            if current == UInt8(ascii: ".") {
                index += 1
                if digits() == 0 { throw fail("a fraction needs digits after '.'") }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                if digits() == 0 { throw fail("an exponent needs digits") }
            }
        }

        private mutating func string() throws(Failure) {
            index += 1  // the opening quote
            while true {
                // Eight plain bytes at a time (printable ASCII other than '"' and '\\'): a 1 MB
                // string is checked in a fraction of the byte-at-a-time loop's time.
                while index + 8 <= bytes.count, Self.isPlain(bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)) {
                    index += 8
                }
                guard let byte = current else { throw fail("the text ends inside a string") }
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escaped = current else { throw fail("the text ends inside an escape") }
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        index += 1
                        for _ in 0..<4 {
                            guard let hex = current, Self.isHexDigit(hex) else { throw fail("\\u needs four hex digits") }
                            index += 1
                        }
                    default: throw fail("invalid escape '\\\(Character(Unicode.Scalar(escaped)))'")
                    }
                case 0..<0x20:
                    throw fail("a control character (0x\(String(byte, radix: 16))) inside a string must be escaped")
                case 0..<0x80:
                    index += 1
                default:
                    try utf8Sequence(byte)
                }
            }
        }

        /// Whether all eight bytes of `word` are printable ASCII other than '"' and '\\' (no
        /// false "yes": each test below finds every byte it looks for).
        private static func isPlain(_ word: UInt64) -> Bool {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            func hasZeroByte(_ value: UInt64) -> Bool { (value &- ones) & ~value & highs != 0 }
            let nonASCII = word & highs != 0
            let control = (word &- ones &* 0x20) & ~word & highs != 0  // a byte below 0x20
            return !nonASCII && !control && !hasZeroByte(word ^ (ones &* 0x22)) && !hasZeroByte(word ^ (ones &* 0x5C))
        }

        private static func isHexDigit(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                UInt8(ascii: "A")...UInt8(ascii: "F"): true
            default: false
            }
        }

        /// One multi-byte UTF-8 sequence starting with `lead` (Unicode 15, table 3-7: no
        /// overlong forms, no surrogates, nothing above U+10FFFF).
        private mutating func utf8Sequence(_ lead: UInt8) throws(Failure) {
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0:
                length = 3
                low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED:
                length = 3
                high = 0x9F
            case 0xF0:
                length = 4
                low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4:
                length = 4
                high = 0x8F
            default: throw fail("invalid UTF-8 (byte 0x\(String(lead, radix: 16)))")
            }
            guard index + length <= bytes.count else { throw fail("invalid UTF-8 (the text ends inside a character)") }
            for offset in 1..<length {
                let byte = bytes[index + offset]
                let (min, max) = offset == 1 ? (low, high) : (0x80, 0xBF)
                guard byte >= min && byte <= max else { throw fail("invalid UTF-8 (byte 0x\(String(byte, radix: 16)))") }
            }
            index += length
        }
    }
}

/// Checks that bytes are exactly one JSON text as RFC 8259 defines it, in UTF-8: one value of
/// any type with optional white space around it, strings of valid UTF-8 without raw control
/// characters, numbers as the grammar spells them (any size: `1e400` and 40-digit integers are
/// JSON), no byte-order mark (contract §3, v1.1).
///
/// One pass over the bytes, no values built, no allocation unless containers nest (the stack of
/// open containers). This is what ``JSONDocument`` checks, so forwarding a stored message (the
/// `wormholectl listen` path) costs a scan, not a parse into Foundation objects.
///
/// Its ``Scanner`` is the package's one JSON grammar: the suite file's reader (`SuiteJSONReader`)
/// builds its values from the same tokens, so a text is JSON to both or to neither.
enum JSONSyntax {
    /// Why the bytes are not one JSON text, and where.
    struct Failure: Error, CustomStringConvertible {
        var offset: Int
        var reason: Reason
        var description: String { "\(reason) at byte \(offset)" }
    }

    /// What is wrong with a text that is not JSON.
    enum Reason: Equatable, Sendable, CustomStringConvertible {
        case byteOrderMark
        case noValue
        case endWhereValueShouldBe
        case unexpectedByte(UInt8)
        case keyNotString
        case colonMissing
        case moreAfterValue
        /// The text ends inside an object (true) or an array (false).
        case endInsideContainer(object: Bool)
        /// Neither ',' nor the closing bracket after a member of an object (true) or an array.
        case separatorMissing(object: Bool)
        case literalExpected(String)
        case numberWithoutDigits
        case fractionWithoutDigits
        case exponentWithoutDigits
        case endInsideString
        case endInsideEscape
        case hexDigitsMissing
        case invalidEscape(UInt8)
        case controlCharacter(UInt8)
        case invalidUTF8(UInt8)
        case endInsideCharacter

        var description: String {
            switch self {
            case .byteOrderMark: "a byte-order mark (JSON text is UTF-8 without one)"
            case .noValue: "no value (empty or only white space)"
            case .endWhereValueShouldBe: "the text ends where a value should be"
            case .unexpectedByte(let byte): "unexpected byte 0x\(String(byte, radix: 16)) where a value should be"
            case .keyNotString: "an object key must be a string"
            case .colonMissing: "expected ':' after an object key"
            case .moreAfterValue: "more after the value (one JSON value only)"
            case .endInsideContainer(let object): "the text ends inside \(object ? "an object" : "an array")"
            case .separatorMissing(let object): "expected ',' or '\(object ? "}" : "]")'"
            case .literalExpected(let word): "expected \(word)"
            case .numberWithoutDigits: "a number needs digits"
            case .fractionWithoutDigits: "a fraction needs digits after '.'"
            case .exponentWithoutDigits: "an exponent needs digits"
            case .endInsideString: "the text ends inside a string"
            case .endInsideEscape: "the text ends inside an escape"
            case .hexDigitsMissing: "\\u needs four hex digits"
            case .invalidEscape(let byte): "invalid escape '\\\(Character(Unicode.Scalar(byte)))'"
            case .controlCharacter(let byte):
                "a control character (0x\(String(byte, radix: 16))) inside a string must be escaped"
            case .invalidUTF8(let byte): "invalid UTF-8 (byte 0x\(String(byte, radix: 16)))"
            case .endInsideCharacter: "invalid UTF-8 (the text ends inside a character)"
            }
        }
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

    /// The tokens of JSON over UTF-8 bytes: each call checks one token at ``index`` and moves
    /// past it, or throws where the text stops being JSON.
    struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        func fail(_ reason: Reason) -> Failure { Failure(offset: index, reason: reason) }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        var startsWithByteOrderMark: Bool {
            bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// One whole JSON text: one value with optional white space around it.
        mutating func text() throws(Failure) {
            if startsWithByteOrderMark { throw fail(.byteOrderMark) }
            skipWhitespace()
            if index == bytes.count { throw fail(.noValue) }
            // true: an object is open; false: an array.
            var open: [Bool] = []
            var expectingValue = true
            while true {
                if expectingValue {
                    skipWhitespace()
                    let opening = current
                    if try scalar() == nil {
                        if try openContainer() {
                            open.append(opening == UInt8(ascii: "{"))
                            if open.last == true { try key() }
                            continue
                        }
                    }
                }
                guard let inObject = open.last else {
                    try end()
                    return
                }
                if try nextMember(inObject: inObject) {
                    if inObject { try key() }
                    expectingValue = true
                } else {
                    open.removeLast()
                    expectingValue = false
                }
            }
        }

        /// At a value: checks a string, number or literal and returns its first byte; nil (moving
        /// nothing) when the value is an object or an array.
        mutating func scalar() throws(Failure) -> UInt8? {
            guard let byte = current else { throw fail(.endWhereValueShouldBe) }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["): return nil
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try number()
            default: throw fail(.unexpectedByte(byte))
            }
            return byte
        }

        /// At `{` or `[`: moves past it and returns true when a member follows; false when the
        /// container is empty (and moves past its closing bracket too).
        mutating func openContainer() throws(Failure) -> Bool {
            let close = current == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
            index += 1
            skipWhitespace()
            if current == close {
                index += 1
                return false
            }
            return true
        }

        /// An object member's key and the ':' after it; returns the key's content (see ``string()``).
        @discardableResult
        mutating func key() throws(Failure) -> (content: Range<Int>, escaped: Bool) {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw fail(.keyNotString) }
            let key = try string()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw fail(.colonMissing) }
            index += 1
            skipWhitespace()
            return key
        }

        /// After a member of an object (`inObject`) or an array: true after a ',' (another member
        /// follows), false after the closing bracket.
        mutating func nextMember(inObject: Bool) throws(Failure) -> Bool {
            skipWhitespace()
            guard let byte = current else { throw fail(.endInsideContainer(object: inObject)) }
            if byte == UInt8(ascii: ",") {
                index += 1
                skipWhitespace()
                return true
            }
            guard byte == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else {
                throw fail(.separatorMissing(object: inObject))
            }
            index += 1
            return false
        }

        /// The end of the text: only white space may follow the value.
        mutating func end() throws(Failure) {
            skipWhitespace()
            if index != bytes.count { throw fail(.moreAfterValue) }
        }

        mutating func literal(_ word: StaticString) throws(Failure) {
            let count = word.utf8CodeUnitCount
            let matches = word.withUTF8Buffer { expected in
                index + count <= bytes.count && (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
            }
            guard matches else { throw fail(.literalExpected("\(word)")) }
            index += count
        }

        private mutating func digits() -> Int {
            let start = index
            while let byte = current, byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") { index += 1 }
            return index - start
        }

        /// A number; returns its bytes and whether it is an integer (no fraction, no exponent).
        mutating func number() throws(Failure) -> (text: Range<Int>, isInteger: Bool) {
            let start = index
            var isInteger = true
            if current == UInt8(ascii: "-") { index += 1 }
            if current == UInt8(ascii: "0") {
                index += 1
            } else if digits() == 0 {
                throw fail(.numberWithoutDigits)
            }
            if current == UInt8(ascii: ".") {
                index += 1
                isInteger = false
                if digits() == 0 { throw fail(.fractionWithoutDigits) }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                isInteger = false
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                if digits() == 0 { throw fail(.exponentWithoutDigits) }
            }
            return (start..<index, isInteger)
        }

        /// A string; returns the bytes between its quotes and whether they hold an escape (without
        /// one they are the string's UTF-8, already checked).
        mutating func string() throws(Failure) -> (content: Range<Int>, escaped: Bool) {
            index += 1  // the opening quote
            let start = index
            var escaped = false
            while true {
                // Eight plain bytes at a time (printable ASCII other than '"' and '\\'): a 1 MB
                // string is checked in a fraction of the byte-at-a-time loop's time.
                while index + 8 <= bytes.count,
                    Self.isPlain(bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                {
                    index += 8
                }
                guard let byte = current else { throw fail(.endInsideString) }
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return (start..<index - 1, escaped)
                case UInt8(ascii: "\\"):
                    escaped = true
                    index += 1
                    guard let escape = current else { throw fail(.endInsideEscape) }
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        index += 1
                        for _ in 0..<4 {
                            guard let hex = current, Self.hexValue(hex) != nil else { throw fail(.hexDigitsMissing) }
                            index += 1
                        }
                    default: throw fail(.invalidEscape(escape))
                    }
                case 0..<0x20:
                    throw fail(.controlCharacter(byte))
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

        /// The value of the hex digit `byte`; nil when it is not one.
        static func hexValue(_ byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
            default: nil
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
            default: throw fail(.invalidUTF8(lead))
            }
            guard index + length <= bytes.count else { throw fail(.endInsideCharacter) }
            for offset in 1..<length {
                let byte = bytes[index + offset]
                let (min, max) = offset == 1 ? (low, high) : (0x80, 0xBF)
                guard byte >= min && byte <= max else { throw fail(.invalidUTF8(byte)) }
            }
            index += length
        }
    }
}

import FoundationEssentials

/// The suite file's JSON form of property-list values (the "File format" table of docs/shared-defaults.md):
///
/// | type | JSON |
/// | --- | --- |
/// | String, Bool | a JSON string, `true` / `false` |
/// | Int | a number without `.` or exponent: `1`, `-42` |
/// | Double | a number with `.` or an exponent: `1.0`, `0.25`, `1e-05`; `{"$double":"nan"}`, `"inf"`, `"-inf"` |
/// | Date | `{"$date":S}`, S = seconds since 1970-01-01 UTC as a number |
/// | Data | `{"$data":"<base64>"}` |
/// | URL | `{"$url":"<absolute URL>"}` |
/// | array | a JSON array |
/// | dictionary | a JSON object; one whose only key starts with `$` is written `{"$dict":{…}}` |
///
/// Inside a value, an object with exactly one member whose name starts with `$` is always a tag;
/// any other object is a dictionary. The suite's own top-level object is never a tag (its keys
/// are the suite's keys, whatever they are). `null` is not a property-list value and is refused.
enum SuiteJSON {
    // MARK: Encoding

    /// The compact JSON of `value`, keys sorted.
    static func encode(_ value: PropertyListValue) -> [UInt8] {
        var output: [UInt8] = []
        append(value, to: &output)
        return output
    }

    /// The suite file: one JSON object, keys sorted, one member per line, ending with a newline.
    static func encodeSuite(_ suite: [String: PropertyListValue]) -> Data {
        encodeSuite(Contents(values: suite))
    }

    /// The suite file, unknown values written back exactly as they were read.
    static func encodeSuite(_ suite: Contents) -> Data {
        var copy = suite
        return encodeSuite(&copy)
    }

    /// The suite file; values not changed since the contents were read are copied as they are
    /// in the file (unknown values included), the others encoded. `suite` then describes the new
    /// file (its bytes and spans).
    static func encodeSuite(_ suite: inout Contents) -> Data {
        var output: [UInt8] = []
        output.reserveCapacity(suite.source.count + 4096)
        output.append(UInt8(ascii: "{"))
        var spans: [String: Range<Int>] = [:]
        spans.reserveCapacity(suite.values.count + suite.unknown.count)
        let keys = suite.sortedKeys ?? suite.keys.sorted()
        for (index, key) in keys.enumerated() {
            output.append(contentsOf: index == 0 ? [0x0A] : [UInt8(ascii: ","), 0x0A])
            appendString(key, to: &output)
            output.append(UInt8(ascii: ":"))
            let start = output.count
            if let span = suite.spans[key] {
                output.append(contentsOf: suite.source[span])
            } else if let raw = suite.unknown[key] {
                output.append(contentsOf: raw)
            } else if let value = suite.values[key] {
                append(value, to: &output)
            }
            spans[key] = start..<output.count
        }
        output.append(contentsOf: Array((suite.isEmpty ? "}\n" : "\n}\n").utf8))
        suite.source = output
        suite.spans = spans
        suite.sortedKeys = keys
        return Data(output)
    }

    /// A lower bound of the bytes `value` takes in the file, without encoding it (a string is
    /// at least its UTF-8 bytes and two quotes): refuses a value that alone is over a suite's
    /// limit at almost no cost.
    static func minimumSize(of value: PropertyListValue) -> Int {
        switch value {
        case .string(let string): string.utf8.count + 2
        case .data(let data): (data.count + 2) / 3 * 4 + 12
        case .array(let values): values.reduce(2) { $0 + minimumSize(of: $1) + 1 }
        case .dictionary(let values): values.reduce(2) { $0 + $1.key.utf8.count + 4 + minimumSize(of: $1.value) }
        default: 1
        }
    }

    /// The suite as one line of compact JSON (a plain object, keys sorted), unknown values as
    /// they are stored: what `wormhole defaults read` prints without a key.
    static func compactSuite(_ suite: Contents) -> [UInt8] {
        var output: [UInt8] = [UInt8(ascii: "{")]
        for (index, key) in suite.keys.sorted().enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            appendString(key, to: &output)
            output.append(UInt8(ascii: ":"))
            if let raw = suite.unknown[key] {
                output.append(contentsOf: raw)
            } else if let value = suite.values[key] {
                append(value, to: &output)
            }
        }
        output.append(UInt8(ascii: "}"))
        return output
    }

    static func append(_ value: PropertyListValue, to output: inout [UInt8]) {
        switch value {
        case .string(let string): appendString(string, to: &output)
        case .integer(let integer): output.append(contentsOf: Array(String(integer).utf8))
        case .bool(let bool): output.append(contentsOf: Array((bool ? "true" : "false").utf8))
        case .double(let double):
            if double.isNaN {
                appendTag("$double", to: &output) { appendString("nan", to: &$0) }
            } else if double.isInfinite {
                appendTag("$double", to: &output) { appendString(double < 0 ? "-inf" : "inf", to: &$0) }
            } else {
                // Swift's shortest round-trip form always has a '.' or an exponent: 1.0, 1e-05, 1e+16.
                output.append(contentsOf: Array(double.description.utf8))
            }
        case .date(let date):
            appendTag("$date", to: &output) { $0.append(contentsOf: Array(date.timeIntervalSince1970.description.utf8)) }
        case .data(let data):
            appendTag("$data", to: &output) { appendString(data.base64EncodedString(), to: &$0) }
        case .url(let url):
            appendTag("$url", to: &output) { appendString(url.absoluteString, to: &$0) }
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                append(element, to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .dictionary(let values):
            if values.count == 1, let only = values.keys.first, only.hasPrefix("$") {
                appendTag("$dict", to: &output) { appendObject(values, to: &$0) }
            } else {
                appendObject(values, to: &output)
            }
        }
    }

    /// A plain JSON object of `values` (never a tag), keys sorted, compact.
    static func appendObject(_ values: [String: PropertyListValue], to output: inout [UInt8]) {
        output.append(UInt8(ascii: "{"))
        for (index, key) in values.keys.sorted().enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            appendString(key, to: &output)
            output.append(UInt8(ascii: ":"))
            append(values[key]!, to: &output)
        }
        output.append(UInt8(ascii: "}"))
    }

    private static func appendTag(_ tag: String, to output: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        output.append(UInt8(ascii: "{"))
        appendString(tag, to: &output)
        output.append(UInt8(ascii: ":"))
        body(&output)
        output.append(UInt8(ascii: "}"))
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, … or `\u00XX`,
    /// everything else (`/` and non-ASCII included) as it is.
    static func appendString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\")); output.append(byte)
            case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let digits = Array("0123456789abcdef".utf8)
                output.append(contentsOf: Array("\\u00".utf8))
                output.append(digits[Int(byte >> 4)])
                output.append(digits[Int(byte & 0xF)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    // MARK: Decoding

    /// Why a text is not a suite or a value by the book.
    struct ParseError: Error, CustomStringConvertible {
        var offset: Int
        var reason: String
        var description: String { "\(reason) at byte \(offset)" }
    }

    /// The deepest nesting of arrays and objects a suite file (and a value written to it) may
    /// have (contract §5: at least 64).
    static let maximumDepth = 512

    /// A parsed suite file: the values this version understands, and the ones it does not (an
    /// unknown `$` tag, a tag whose content is not what this version expects, `null`, an integer
    /// past 64 bits), kept as their exact bytes so that writers keep them byte for byte.
    struct Contents: Sendable, Equatable {
        fileprivate(set) var values: [String: PropertyListValue] = [:]
        fileprivate(set) var unknown: [String: [UInt8]] = [:]
        /// The file these contents were read from (or last written as), and where each key's
        /// value is in it: a writer copies the values it did not change as they are (a 4 MiB
        /// suite is rewritten at the cost of a copy, not of encoding every value again).
        fileprivate(set) var source: [UInt8] = []
        fileprivate(set) var spans: [String: Range<Int>] = [:]
        /// Every key, sorted, as last written (nil once a key was added or removed): a write that
        /// changes values only does not sort the keys again.
        fileprivate(set) var sortedKeys: [String]?

        init(values: [String: PropertyListValue] = [:]) { self.values = values }

        /// The value for `key` as a writer sees it: setting it (nil removes it) replaces an
        /// unknown value of that key too.
        subscript(key: String) -> PropertyListValue? {
            get { values[key] }
            set {
                let present = values[key] != nil || unknown[key] != nil
                if present != (newValue != nil) { sortedKeys = nil }
                unknown[key] = nil
                spans[key] = nil
                values[key] = newValue
            }
        }

        static func == (left: Contents, right: Contents) -> Bool {
            left.values == right.values && left.unknown == right.unknown
        }

        var isEmpty: Bool { values.isEmpty && unknown.isEmpty }
        var keys: Set<String> { Set(values.keys).union(unknown.keys) }

        /// The stored JSON of `key` (compact for known values, as stored for unknown ones).
        func jsonBytes(forKey key: String) -> [UInt8]? {
            if let raw = unknown[key] { return raw }
            return values[key].map(SuiteJSON.encode)
        }
    }

    /// Parses a whole suite file: one JSON object of values. Duplicate keys: the last one wins.
    ///
    /// - Throws: ``ParseError`` (with the byte offset) when the text is not one JSON object
    ///   (not JSON, a byte-order mark, invalid UTF-8, nesting past ``maximumDepth``). A member
    ///   whose value is JSON but not a value this version understands is not an error: it is
    ///   kept in ``Contents/unknown``.
    static func decodeSuite(_ data: Data) throws(ParseError) -> Contents {
        var parser = Parser(bytes: [UInt8](data))
        if parser.bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw ParseError(offset: 0, reason: "the file starts with a UTF-8 byte-order mark (JSON text has none)")
        }
        parser.skipSpace()
        guard parser.peek == UInt8(ascii: "{") else {
            throw parser.error(parser.peek == nil ? "the file is empty, not a JSON object" : "the suite is not a JSON object")
        }
        var contents = Contents()
        parser.index += 1
        parser.skipSpace()
        if parser.peek == UInt8(ascii: "}") {
            parser.index += 1
        } else {
            while true {
                parser.skipSpace()
                guard parser.peek == UInt8(ascii: "\"") else { throw parser.error("expected a string key in an object") }
                let key = try parser.parseString()
                parser.skipSpace()
                guard parser.peek == UInt8(ascii: ":") else { throw parser.error("expected ':' after an object key") }
                parser.index += 1
                parser.skipSpace()
                let start = parser.index
                do throws(ParseError) {
                    contents[key] = try parser.parseValue(depth: 1)
                } catch {
                    // JSON, but not a value this version reads: kept as it is. Not JSON: the error.
                    var syntax = Parser(bytes: parser.bytes, index: start)
                    try syntax.skipValue(depth: 1)
                    contents.values[key] = nil
                    contents.unknown[key] = Array(parser.bytes[start..<syntax.index])
                    parser.index = syntax.index
                }
                contents.spans[key] = start..<parser.index
                parser.skipSpace()
                if parser.peek == UInt8(ascii: ",") { parser.index += 1; continue }
                if parser.peek == UInt8(ascii: "}") { parser.index += 1; break }
                throw parser.error("expected ',' or '}' in an object")
            }
        }
        try parser.expectEnd()
        contents.source = parser.bytes
        return contents
    }

    /// How deep `value` nests arrays and dictionaries (a scalar is 0).
    static func depth(of value: PropertyListValue) -> Int {
        switch value {
        case .array(let values): 1 + (values.map(depth).max() ?? 0)
        case .dictionary(let values): 1 + (values.values.map(depth).max() ?? 0)
        default: 0
        }
    }

    /// Parses one value (the command line's `defaults write KEY JSON`).
    static func decodeValue(_ data: Data) throws(ParseError) -> PropertyListValue {
        var parser = Parser(bytes: [UInt8](data))
        let value = try parser.parseValue()
        try parser.expectEnd()
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        func error(_ reason: String) -> ParseError { ParseError(offset: index, reason: reason) }

        mutating func skipSpace() {
            while let byte = peek, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
        }

        mutating func expectEnd() throws(ParseError) {
            skipSpace()
            if index != bytes.count { throw error("unexpected text after the JSON value") }
        }

        mutating func expect(_ literal: String) throws(ParseError) {
            for byte in literal.utf8 {
                guard peek == byte else { throw error("expected '\(literal)'") }
                index += 1
            }
        }

        mutating func parseValue(depth: Int = 0) throws(ParseError) -> PropertyListValue {
            if depth > SuiteJSON.maximumDepth { throw error("nested deeper than \(SuiteJSON.maximumDepth) levels") }
            skipSpace()
            guard let byte = peek else { throw error("unexpected end of the text") }
            switch byte {
            case UInt8(ascii: "{"): return try parseObject(depth: depth)
            case UInt8(ascii: "["):
                index += 1
                var values: [PropertyListValue] = []
                skipSpace()
                if peek == UInt8(ascii: "]") {
                    index += 1
                    return .array(values)
                }
                while true {
                    values.append(try parseValue(depth: depth + 1))
                    skipSpace()
                    if peek == UInt8(ascii: ",") { index += 1; continue }
                    if peek == UInt8(ascii: "]") { index += 1; return .array(values) }
                    throw error("expected ',' or ']' in an array")
                }
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "n"): throw error("null is not a property-list value (remove the key instead)")
            default: return try parseNumber()
            }
        }

        /// The object at `index`. With `plain` it is a dictionary whatever its keys (the suite
        /// itself, or the object inside `$dict`); otherwise an object with one member whose name
        /// starts with `$` is a tag.
        mutating func parseObject(depth: Int, plain: Bool = false) throws(ParseError) -> PropertyListValue {
            let start = index
            index += 1  // {
            var members: [(key: String, value: PropertyListValue)] = []
            // Where the value of a leading "$dict" member starts, when it was read as an escape.
            var escapeStart: Int?
            skipSpace()
            if peek == UInt8(ascii: "}") {
                index += 1
                return .dictionary([:])
            }
            while true {
                skipSpace()
                guard peek == UInt8(ascii: "\"") else { throw error("expected a string key in an object") }
                let key = try parseString()
                skipSpace()
                guard peek == UInt8(ascii: ":") else { throw error("expected ':' after an object key") }
                index += 1
                skipSpace()
                if !plain && members.isEmpty && key == "$dict" && peek == UInt8(ascii: "{") {
                    escapeStart = index
                    members.append((key, try parseObject(depth: depth + 1, plain: true)))
                } else {
                    members.append((key, try parseValue(depth: depth + 1)))
                }
                skipSpace()
                if peek == UInt8(ascii: ",") { index += 1; continue }
                if peek == UInt8(ascii: "}") { index += 1; break }
                throw error("expected ',' or '}' in an object")
            }
            if plain { return try plainDictionary(members, at: start) }
            if members.count == 1 && members[0].key == "$dict" {
                guard escapeStart != nil else { throw ParseError(offset: start, reason: "$dict needs an object") }
                return members[0].value
            }
            if let escapeStart {
                // "$dict" was one key among others: its value is an ordinary value after all.
                var again = Parser(bytes: bytes, index: escapeStart)
                members[0].value = try again.parseValue(depth: depth + 1)
            }
            if members.count == 1, members[0].key.hasPrefix("$") {
                return try tagged(members[0].key, members[0].value, at: start)
            }
            return try plainDictionary(members, at: start)
        }

        func plainDictionary(
            _ members: [(key: String, value: PropertyListValue)], at start: Int
        ) throws(ParseError) -> PropertyListValue {
            // Duplicate keys: the last one wins (contract §5, v1.2).
            var dictionary: [String: PropertyListValue] = [:]
            for (key, value) in members { dictionary[key] = value }
            return .dictionary(dictionary)
        }

        func tagged(_ tag: String, _ value: PropertyListValue, at start: Int) throws(ParseError) -> PropertyListValue {
            func bad(_ what: String) -> ParseError { ParseError(offset: start, reason: "\(tag) needs \(what)") }
            switch (tag, value) {
            case ("$date", .double(let seconds)): return .date(Date(timeIntervalSince1970: seconds))
            case ("$date", .integer(let seconds)): return .date(Date(timeIntervalSince1970: Double(seconds)))
            case ("$date", _): throw bad("a number of seconds since 1970")
            case ("$data", .string(let text)):
                guard let data = Data(base64Encoded: text) else { throw bad("a base64 string") }
                return .data(data)
            case ("$data", _): throw bad("a base64 string")
            case ("$url", .string(let text)):
                guard let url = URL(string: text) else { throw bad("a URL string") }
                return .url(url)
            case ("$url", _): throw bad("a URL string")
            case ("$double", .string("nan")): return .double(.nan)
            case ("$double", .string("inf")): return .double(.infinity)
            case ("$double", .string("-inf")): return .double(-.infinity)
            case ("$double", .double(let double)): return .double(double)
            case ("$double", .integer(let integer)): return .double(Double(integer))
            case ("$double", _): throw bad("\"nan\", \"inf\", \"-inf\" or a number")
            default:
                throw ParseError(
                    offset: start,
                    reason: "unknown tag \(NameRules.quoted(tag)) (a dictionary whose only key starts with '$' "
                        + "is written {\"$dict\":{…}})")
            }
        }

        mutating func parseString() throws(ParseError) -> String {
            index += 1  // opening quote
            var output: [UInt8] = []
            while true {
                guard let byte = peek else { throw error("unterminated string") }
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let string = String(validating: output, as: UTF8.self) else {
                        throw error("a string is not valid UTF-8")
                    }
                    return string
                case UInt8(ascii: "\\"):
                    guard let escape = peek else { throw error("unterminated escape") }
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(escape)
                    case UInt8(ascii: "b"): output.append(0x08)
                    case UInt8(ascii: "f"): output.append(0x0C)
                    case UInt8(ascii: "n"): output.append(0x0A)
                    case UInt8(ascii: "r"): output.append(0x0D)
                    case UInt8(ascii: "t"): output.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try parseHex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            try expect("\\u")
                            let low = try parseHex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw error("unpaired surrogate") }
                        output.append(contentsOf: Array(String(Character(unicode)).utf8))
                    default: throw error("invalid escape")
                    }
                case 0..<0x20: throw error("control character in a string")
                default: output.append(byte)
                }
            }
        }

        /// Checks the JSON value at `index` for syntax only (any JSON, `null` and unknown tags
        /// included) and moves past it.
        mutating func skipValue(depth: Int) throws(ParseError) {
            if depth > SuiteJSON.maximumDepth { throw error("nested deeper than \(SuiteJSON.maximumDepth) levels") }
            skipSpace()
            guard let byte = peek else { throw error("unexpected end of the text") }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                index += 1
                skipSpace()
                if peek == close {
                    index += 1
                    return
                }
                while true {
                    skipSpace()
                    if close == UInt8(ascii: "}") {
                        guard peek == UInt8(ascii: "\"") else { throw error("expected a string key in an object") }
                        _ = try parseString()
                        skipSpace()
                        guard peek == UInt8(ascii: ":") else { throw error("expected ':' after an object key") }
                        index += 1
                    }
                    try skipValue(depth: depth + 1)
                    skipSpace()
                    if peek == UInt8(ascii: ",") { index += 1; continue }
                    if peek == close { index += 1; return }
                    throw error(close == UInt8(ascii: "}") ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array")
                }
            case UInt8(ascii: "\""): _ = try parseString()
            case UInt8(ascii: "t"): try expect("true")
            case UInt8(ascii: "f"): try expect("false")
            case UInt8(ascii: "n"): try expect("null")
            default:
                let start = index
                do throws(ParseError) {
                    _ = try parseNumber()
                } catch {
                    // Grammar only: an integer past 64 bits is still JSON.
                    if index == start || error.reason.hasPrefix("not a JSON value") || error.reason.contains("digits")
                        || error.reason.contains("leading zero")
                    {
                        throw error
                    }
                }
            }
        }

        mutating func parseHex4() throws(ParseError) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = peek, let digit = Int(String(UnicodeScalar(byte)), radix: 16) else {
                    throw error("expected 4 hex digits")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        mutating func parseNumber() throws(ParseError) -> PropertyListValue {
            let start = index
            func digits(_ parser: inout Parser) -> Int {
                var count = 0
                while let byte = parser.peek, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                    parser.index += 1
                    count += 1
                }
                return count
            }
            if peek == UInt8(ascii: "-") { index += 1 }
            let intStart = index
            let intDigits = digits(&self)
            if intDigits == 0 { throw ParseError(offset: start, reason: "not a JSON value") }
            if intDigits > 1 && bytes[intStart] == UInt8(ascii: "0") { throw error("a number has a leading zero") }
            var isInteger = true
            if peek == UInt8(ascii: ".") {
                index += 1
                isInteger = false
                if digits(&self) == 0 { throw error("expected digits after '.'") }
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                index += 1
                isInteger = false
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
                if digits(&self) == 0 { throw error("expected digits in an exponent") }
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if isInteger {
                guard let integer = Int(text) else {
                    throw ParseError(
                        offset: start, reason: "the integer \(text) does not fit a signed 64-bit Int (write it as \(text).0 for a Double)")
                }
                return .integer(integer)
            }
            guard let double = Double(text) else { throw ParseError(offset: start, reason: "bad number \(text)") }
            return .double(double)
        }
    }
}

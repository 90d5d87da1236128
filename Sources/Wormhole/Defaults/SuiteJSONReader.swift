// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// Reads the suite file's JSON form (``SuiteJSON``) into property-list values, on the tokens of
/// ``JSONSyntax/Scanner``: the grammar is JSONSyntax's, this reader only says what each value
/// means. A text that is not JSON is refused (``SuiteJSON/ParseError`` with its offset); a value
/// that is JSON but not one this version reads (`null`, an unknown `$` tag, a tag whose content
/// is not what it expects, an integer past 64 bits) is unreadable: read as nil, the first such
/// problem kept in ``problem``, and a value with an unreadable part anywhere is unreadable.
struct SuiteJSONReader {
    typealias ParseError = SuiteJSON.ParseError

    private var scanner: JSONSyntax.Scanner
    /// The first value found unreadable since it was last cleared.
    private var problem: ParseError?

    private init(_ bytes: UnsafeRawBufferPointer) { scanner = JSONSyntax.Scanner(bytes: bytes) }

    /// A whole suite file: one JSON object of values (duplicate keys: the last one wins).
    static func suite(_ data: Data) throws(ParseError) -> SuiteJSON.Contents {
        let bytes = [UInt8](data)
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(ParseError) in
                var reader = SuiteJSONReader(buffer)
                var contents = SuiteJSON.Contents(source: bytes)
                try reader.suite(into: &contents)
                return contents
            }
        }
        return try result.get()
    }

    /// One value (the command line's `defaults write KEY JSON`); an unreadable one is refused.
    static func value(_ data: Data) throws(ParseError) -> PropertyListValue {
        let result = [UInt8](data).withUnsafeBytes { buffer in
            Result { () throws(ParseError) -> PropertyListValue in
                var reader = SuiteJSONReader(buffer)
                do throws(ParseError) {
                    let value = try reader.value(depth: 0)
                    if let problem = reader.problem { throw problem }
                    try reader.syntax { scanner throws(JSONSyntax.Failure) in try scanner.end() }
                    return value!
                } catch {
                    // An unreadable value before the text stops being JSON is what is wrong with it.
                    throw reader.problem ?? error
                }
            }
        }
        return try result.get()
    }

    private mutating func suite(into contents: inout SuiteJSON.Contents) throws(ParseError) {
        if scanner.startsWithByteOrderMark { throw ParseError(offset: 0, reason: .syntax(.byteOrderMark)) }
        scanner.skipWhitespace()
        guard scanner.current == UInt8(ascii: "{") else {
            throw ParseError(offset: scanner.index, reason: scanner.current == nil ? .emptyFile : .notAnObject)
        }
        if try syntax({ scanner throws(JSONSyntax.Failure) in try scanner.openContainer() }) {
            repeat {
                let key = try string(try syntax { scanner throws(JSONSyntax.Failure) in try scanner.key() })
                let start = scanner.index
                problem = nil
                let value = try value(depth: 1)
                // Unreadable when any part of it was, even one read again as something else.
                contents.read(key, problem == nil ? value : nil, at: start..<scanner.index)
            } while try syntax { scanner throws(JSONSyntax.Failure) in try scanner.nextMember(inObject: true) }
        }
        try syntax { scanner throws(JSONSyntax.Failure) in try scanner.end() }
    }

    /// Runs one step of the grammar; its failure is the text's.
    private mutating func syntax<Token>(
        _ step: (inout JSONSyntax.Scanner) throws(JSONSyntax.Failure) -> Token
    ) throws(ParseError) -> Token {
        do throws(JSONSyntax.Failure) {
            return try step(&scanner)
        } catch {
            throw ParseError(offset: error.offset, reason: .syntax(error.reason))
        }
    }

    /// Notes the first unreadable value; returns nil.
    private mutating func unreadable(at offset: Int, _ reason: ParseError.Reason) -> PropertyListValue? {
        if problem == nil { problem = ParseError(offset: offset, reason: reason) }
        return nil
    }

    /// The value at the scanner's index, `depth` arrays and objects deep; nil when unreadable.
    private mutating func value(depth: Int) throws(ParseError) -> PropertyListValue? {
        if depth > SuiteJSON.maximumDepth { throw ParseError(offset: scanner.index, reason: .tooDeep) }
        scanner.skipWhitespace()
        let start = scanner.index
        switch scanner.current ?? 0 {  // 0: the end of the text, refused by `scalar()` below
        case UInt8(ascii: "{"):
            return try object(depth: depth, plain: false)
        case UInt8(ascii: "["):
            var values: [PropertyListValue] = []
            var readable = true
            if try syntax({ scanner throws(JSONSyntax.Failure) in try scanner.openContainer() }) {
                repeat {
                    if let element = try value(depth: depth + 1) { values.append(element) } else { readable = false }
                } while try syntax { scanner throws(JSONSyntax.Failure) in try scanner.nextMember(inObject: false) }
            }
            return readable ? .array(values) : nil
        case UInt8(ascii: "\""):
            return .string(try string(try syntax { scanner throws(JSONSyntax.Failure) in try scanner.string() }))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let number = try syntax { scanner throws(JSONSyntax.Failure) in try scanner.number() }
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: scanner.bytes[number.text]), as: UTF8.self)
            if number.isInteger {
                guard let integer = Int(text) else { return unreadable(at: start, .integerTooLarge(text)) }
                return .integer(integer)
            }
            guard let double = Double(text) else { return unreadable(at: start, .badNumber(text)) }
            return .double(double)
        default:
            // A literal, or the failure of what is not a value.
            switch try syntax({ scanner throws(JSONSyntax.Failure) in try scanner.scalar() }) {
            case UInt8(ascii: "t"): return .bool(true)
            case UInt8(ascii: "f"): return .bool(false)
            default: return unreadable(at: start, .null)
            }
        }
    }

    /// The object at the scanner's index. With `plain` it is a dictionary whatever its keys (the
    /// object inside `$dict`); otherwise an object with one member whose name starts with `$` is
    /// a tag.
    private mutating func object(depth: Int, plain: Bool) throws(ParseError) -> PropertyListValue? {
        let start = scanner.index
        var members: [(key: String, value: PropertyListValue?)] = []
        // Where the value of a leading "$dict" member starts, when it was read as an escape.
        var escapeStart: Int?
        guard try syntax({ scanner throws(JSONSyntax.Failure) in try scanner.openContainer() }) else {
            return .dictionary([:])
        }
        repeat {
            let key = try string(try syntax { scanner throws(JSONSyntax.Failure) in try scanner.key() })
            if !plain && members.isEmpty && key == "$dict" && scanner.current == UInt8(ascii: "{") {
                escapeStart = scanner.index
                members.append((key, try object(depth: depth + 1, plain: true)))
            } else {
                members.append((key, try value(depth: depth + 1)))
            }
        } while try syntax { scanner throws(JSONSyntax.Failure) in try scanner.nextMember(inObject: true) }
        if plain { return dictionary(members) }
        if members.count == 1 && members[0].key == "$dict" {
            guard escapeStart != nil else { return unreadable(at: start, .tagNeeds(tag: "$dict", what: "an object")) }
            return members[0].value
        }
        if let escapeStart {
            // "$dict" was one key among others: its value is an ordinary value after all.
            var again = self
            again.scanner.index = escapeStart
            members[0].value = try again.value(depth: depth + 1)
            if problem == nil { problem = again.problem }
        }
        if members.count == 1, members[0].key.hasPrefix("$") {
            return members[0].value.flatMap { tagged(members[0].key, $0, at: start) }
        }
        return dictionary(members)
    }

    /// The members as a dictionary (duplicate keys: the last one wins, contract §5 v1.2); nil
    /// when one is unreadable.
    private func dictionary(_ members: [(key: String, value: PropertyListValue?)]) -> PropertyListValue? {
        var dictionary: [String: PropertyListValue] = [:]
        for (key, value) in members {
            guard let value else { return nil }
            dictionary[key] = value
        }
        return .dictionary(dictionary)
    }

    private mutating func tagged(_ tag: String, _ value: PropertyListValue, at start: Int) -> PropertyListValue? {
        func needs(_ what: String) -> PropertyListValue? { unreadable(at: start, .tagNeeds(tag: tag, what: what)) }
        switch (tag, value) {
        case ("$date", .double(let seconds)): return .date(Date(timeIntervalSince1970: seconds))
        case ("$date", .integer(let seconds)): return .date(Date(timeIntervalSince1970: Double(seconds)))
        case ("$date", _): return needs("a number of seconds since 1970")
        case ("$data", .string(let text)):
            return Data(base64Encoded: text).map { .data($0) } ?? needs("a base64 string")
        case ("$data", _): return needs("a base64 string")
        case ("$url", .string(let text)): return URL(string: text).map { .url($0) } ?? needs("a URL string")
        case ("$url", _): return needs("a URL string")
        case ("$double", .string("nan")): return .double(.nan)
        case ("$double", .string("inf")): return .double(.infinity)
        case ("$double", .string("-inf")): return .double(-.infinity)
        case ("$double", .double(let double)): return .double(double)
        case ("$double", .integer(let integer)): return .double(Double(integer))
        case ("$double", _): return needs("\"nan\", \"inf\", \"-inf\" or a number")
        default: return unreadable(at: start, .unknownTag(tag))
        }
    }

    /// The string whose content (between its quotes, checked by the scanner) is `token`.
    private func string(_ token: (content: Range<Int>, escaped: Bool)) throws(ParseError) -> String {
        let bytes = scanner.bytes
        if !token.escaped {
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[token.content]), as: UTF8.self)
        }
        var output: [UInt8] = []
        output.reserveCapacity(token.content.count)
        var index = token.content.lowerBound
        func hex4(_ at: Int) -> UInt32 {
            (at..<at + 4).reduce(0) { $0 << 4 | JSONSyntax.Scanner.hexValue(bytes[$1])! }
        }
        while index < token.content.upperBound {
            let byte = bytes[index]
            index += 1
            guard byte == UInt8(ascii: "\\") else {
                output.append(byte)
                continue
            }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "b"): output.append(0x08)
            case UInt8(ascii: "f"): output.append(0x0C)
            case UInt8(ascii: "n"): output.append(0x0A)
            case UInt8(ascii: "r"): output.append(0x0D)
            case UInt8(ascii: "t"): output.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(index)
                index += 4
                if (0xD800..<0xDC00).contains(scalar) {
                    // A high surrogate: the low one must follow, as an escape of its own.
                    guard index + 6 <= token.content.upperBound, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u"), (0xDC00..<0xE000).contains(hex4(index + 2))
                    else { throw ParseError(offset: index - 6, reason: .unpairedSurrogate) }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (hex4(index + 2) - 0xDC00)
                    index += 6
                }
                guard let unicode = Unicode.Scalar(scalar) else {
                    throw ParseError(offset: index - 6, reason: .unpairedSurrogate)
                }
                output.append(contentsOf: String(Character(unicode)).utf8)
            default: output.append(escape)  // '"', '\\' or '/'
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}

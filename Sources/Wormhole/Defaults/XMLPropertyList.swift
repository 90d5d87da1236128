// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The XML property-list format (what Foundation's `UserDefaults` writes on Linux), read into
/// ``PropertyListValue``: the part of `PropertyListSerialization` that importing a Foundation
/// suite needs, so that the core does not load all of Foundation.
///
/// It reads `<plist>` around one value of `<dict>` (`<key>` then a value, repeated), `<array>`,
/// `<string>`, `<integer>`, `<real>`, `<true/>`, `<false/>`, `<date>` (ISO 8601, UTC) and
/// `<data>` (base64); the XML declaration, the doctype, comments, CDATA sections and the
/// character references `&lt; &gt; &amp; &quot; &apos; &#N; &#xN;`.
enum XMLPropertyList {
    /// Why bytes are not an XML property list this reader takes; `offset` is the byte.
    struct Malformed: Error, CustomStringConvertible {
        var reason: String
        var offset: Int
        var description: String { "\(reason) at byte \(offset)" }
    }

    static let maximumDepth = 512

    /// The value inside `<plist>` (or the first value, when there is no `<plist>` element).
    static func read(_ data: Data) throws(Malformed) -> PropertyListValue {
        var parser = Parser(bytes: Array(data))
        try parser.skipProlog()
        var tag = try parser.openingTag()
        let wrapped = tag.name == "plist"
        if wrapped { tag = try parser.openingTag() }
        let value = try parser.value(tag, depth: 0)
        if wrapped { try parser.closingTag("plist") }
        return value
    }

    private struct Tag {
        var name: String
        var empty: Bool
        var offset: Int
    }

    private struct Parser {
        let bytes: [UInt8]
        var position = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        func fail(_ reason: String) -> Malformed { Malformed(reason: reason, offset: position) }

        func starts(with text: String) -> Bool { bytes[position...].starts(with: text.utf8) }

        mutating func skipBlanks() {
            while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
        }

        /// Skips up to and past `end`.
        mutating func skip(past end: String) throws(Malformed) {
            let pattern = Array(end.utf8)
            while position < bytes.count {
                if bytes[position...].starts(with: pattern) {
                    position += pattern.count
                    return
                }
                position += 1
            }
            throw fail("'\(end)' is missing")
        }

        /// Blanks, the XML declaration, processing instructions, the doctype and comments.
        mutating func skipProlog() throws(Malformed) {
            while true {
                skipBlanks()
                if starts(with: "<?") {
                    try skip(past: "?>")
                } else if starts(with: "<!--") {
                    try skip(past: "-->")
                } else if starts(with: "<!DOCTYPE") {
                    try skip(past: ">")
                } else {
                    return
                }
            }
        }

        /// The next element's opening tag (attributes skipped), after blanks and comments.
        mutating func openingTag() throws(Malformed) -> Tag {
            try skipProlog()
            let start = position
            guard position < bytes.count, bytes[position] == UInt8(ascii: "<"), !starts(with: "</") else {
                throw fail("an element is expected")
            }
            position += 1
            let nameStart = position
            while position < bytes.count, !" \t\r\n/>".utf8.contains(bytes[position]) { position += 1 }
            let name = String(decoding: bytes[nameStart..<position], as: UTF8.self)
            guard let close = bytes[position...].firstIndex(of: UInt8(ascii: ">")) else {
                throw fail("the tag <\(name)> is not closed")
            }
            let empty = close > position && bytes[close - 1] == UInt8(ascii: "/")
            position = close + 1
            return Tag(name: name, empty: empty, offset: start)
        }

        mutating func closingTag(_ name: String) throws(Malformed) {
            try skipProlog()
            guard starts(with: "</\(name)") else { throw fail("</\(name)> is expected") }
            position += 2 + name.utf8.count
            skipBlanks()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ">") else {
                throw fail("</\(name)> is not closed")
            }
            position += 1
        }

        /// The text up to the closing tag of `tag`, with references and CDATA resolved.
        mutating func text(of tag: Tag) throws(Malformed) -> String {
            if tag.empty { return "" }
            var result: [UInt8] = []
            while position < bytes.count {
                if starts(with: "</") {
                    try closingTag(tag.name)
                    guard let text = String(validating: result, as: UTF8.self) else {
                        throw Malformed(reason: "the text of <\(tag.name)> is not UTF-8", offset: tag.offset)
                    }
                    return text
                } else if starts(with: "<![CDATA[") {
                    position += 9
                    let start = position
                    try skip(past: "]]>")
                    result += bytes[start..<(position - 3)]
                } else if starts(with: "<!--") {
                    try skip(past: "-->")
                } else if bytes[position] == UInt8(ascii: "<") {
                    throw fail("<\(tag.name)> holds an element; text is expected")
                } else if bytes[position] == UInt8(ascii: "&") {
                    result += Array(try reference().utf8)
                } else {
                    result.append(bytes[position])
                    position += 1
                }
            }
            throw Malformed(reason: "<\(tag.name)> is not closed", offset: tag.offset)
        }

        mutating func reference() throws(Malformed) -> String {
            guard let end = bytes[position...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
                throw fail("an '&' starts no character reference")
            }
            let name = String(decoding: bytes[(position + 1)..<end], as: UTF8.self)
            let named = ["lt": "<", "gt": ">", "amp": "&", "quot": "\"", "apos": "'"]
            var resolved = named[name]
            if resolved == nil, name.hasPrefix("#") {
                let number = name.hasPrefix("#x") ? UInt32(name.dropFirst(2), radix: 16) : UInt32(name.dropFirst())
                resolved = number.flatMap(Unicode.Scalar.init).map { String(Character($0)) }
            }
            guard let resolved else { throw fail("'&\(name);' is not a character reference this reader knows") }
            position = end + 1
            return resolved
        }

        mutating func value(_ tag: Tag, depth: Int) throws(Malformed) -> PropertyListValue {
            guard depth < maximumDepth else { throw fail("the property list nests deeper than \(maximumDepth) levels") }
            switch tag.name {
            case "true", "false":
                if !tag.empty { try closingTag(tag.name) }
                return .bool(tag.name == "true")
            case "string":
                return .string(try text(of: tag))
            case "integer":
                let text = PathText.trimmingBlanks(try text(of: tag))
                guard let integer = Int(text.hasPrefix("+") ? String(text.dropFirst()) : text) else {
                    throw Malformed(
                        reason: "<integer>\(text)</integer> is not a signed 64-bit integer", offset: tag.offset)
                }
                return .integer(integer)
            case "real":
                let text = PathText.trimmingBlanks(try text(of: tag))
                let words = [
                    "nan": Double.nan, "+infinity": .infinity, "infinity": .infinity, "-infinity": -.infinity,
                    "inf": .infinity, "+inf": .infinity, "-inf": -.infinity,
                ]
                guard let real = words[text.lowercased()] ?? Double(text) else {
                    throw Malformed(reason: "<real>\(text)</real> is not a number", offset: tag.offset)
                }
                return .double(real)
            case "date":
                let text = PathText.trimmingBlanks(try text(of: tag))
                guard let seconds = Self.seconds(iso8601: text) else {
                    throw Malformed(reason: "<date>\(text)</date> is not an ISO 8601 date in UTC", offset: tag.offset)
                }
                return .date(Date(timeIntervalSince1970: seconds))
            case "data":
                let text = try text(of: tag)
                guard let data = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
                    throw Malformed(reason: "<data> is not base64", offset: tag.offset)
                }
                return .data(data)
            case "array":
                var values: [PropertyListValue] = []
                if tag.empty { return .array(values) }
                while true {
                    try skipProlog()
                    if starts(with: "</") { break }
                    values.append(try value(try openingTag(), depth: depth + 1))
                }
                try closingTag("array")
                return .array(values)
            case "dict":
                var values: [String: PropertyListValue] = [:]
                if tag.empty { return .dictionary(values) }
                while true {
                    try skipProlog()
                    if starts(with: "</") { break }
                    let keyTag = try openingTag()
                    guard keyTag.name == "key" else {
                        throw Malformed(
                            reason: "<\(keyTag.name)> where a <dict> expects a <key>", offset: keyTag.offset)
                    }
                    let key = try text(of: keyTag)
                    values[key] = try value(try openingTag(), depth: depth + 1)
                }
                try closingTag("dict")
                return .dictionary(values)
            default:
                throw Malformed(reason: "<\(tag.name)> is not a property-list element", offset: tag.offset)
            }
        }

        /// `YYYY-MM-DDTHH:MM:SSZ` (fractional seconds allowed) as seconds since 1970.
        static func seconds(iso8601 text: String) -> Double? {
            let bytes = Array(text.utf8)
            guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z"), bytes[4] == UInt8(ascii: "-"),
                bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
                bytes[16] == UInt8(ascii: ":")
            else { return nil }
            func number(_ range: Range<Int>) -> Int? { Int(String(decoding: bytes[range], as: UTF8.self)) }
            guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
                let hour = number(11..<13), let minute = number(14..<16),
                let second = Double(String(decoding: bytes[17..<(bytes.count - 1)], as: UTF8.self))
            else { return nil }
            return Double(daysSince1970(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60)
                + second
        }

        /// The days from 1970-01-01 to a date of the proleptic Gregorian calendar, a month past
        /// 1...12 carried into the year as `timegm` does (Howard Hinnant's `days_from_civil`).
        static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
            var (carry, monthIndex) = (month - 1).quotientAndRemainder(dividingBy: 12)
            if monthIndex < 0 {
                carry -= 1
                monthIndex += 12
            }
            let shiftedYear = year + carry - (monthIndex < 2 ? 1 : 0)  // years start in March
            let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
            let yearOfEra = shiftedYear - era * 400
            let dayOfYear = (153 * ((monthIndex + 10) % 12) + 2) / 5 + day - 1
            let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
            return era * 146_097 + dayOfEra - 719_468
        }
    }
}

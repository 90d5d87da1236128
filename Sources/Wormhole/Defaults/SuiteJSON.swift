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
    /// they are stored: what `wormholectl defaults read` prints without a key.
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
            appendTag("$date", to: &output) {
                $0.append(contentsOf: Array(date.timeIntervalSince1970.description.utf8))
            }
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
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                output.append(UInt8(ascii: "\\"))
                output.append(byte)
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

    /// Why a text is not a suite or a value by the book, and where.
    struct ParseError: Error, CustomStringConvertible {
        var offset: Int
        var reason: Reason
        var description: String { "\(reason) at byte \(offset)" }

        enum Reason: Equatable, Sendable, CustomStringConvertible {
            /// The text is not JSON.
            case syntax(JSONSyntax.Reason)
            case emptyFile
            case notAnObject
            case tooDeep
            case unpairedSurrogate
            // JSON, but not a value this version reads.
            case null
            case integerTooLarge(String)
            case badNumber(String)
            case tagNeeds(tag: String, what: String)
            case unknownTag(String)

            var description: String {
                switch self {
                case .syntax(let reason): reason.description
                case .emptyFile: "the file is empty, not a JSON object"
                case .notAnObject: "the suite is not a JSON object"
                case .tooDeep: "nested deeper than \(SuiteJSON.maximumDepth) levels"
                case .unpairedSurrogate: "unpaired surrogate"
                case .null: "null is not a property-list value (remove the key instead)"
                case .integerTooLarge(let text):
                    "the integer \(text) does not fit a signed 64-bit Int (write it as \(text).0 for a Double)"
                case .badNumber(let text): "bad number \(text)"
                case .tagNeeds(let tag, let what): "\(tag) needs \(what)"
                case .unknownTag(let tag):
                    "unknown tag \(NameRules.quoted(tag)) (a dictionary whose only key starts with '$' is written {\"$dict\":{…}})"
                }
            }
        }
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

        /// Empty contents of the file `source`, which ``SuiteJSONReader`` fills with ``read(_:_:at:)``.
        init(source: [UInt8]) { self.source = source }

        /// The value of `key` the reader found at `span` of the file; nil for JSON this version
        /// does not read, kept as its bytes.
        mutating func read(_ key: String, _ value: PropertyListValue?, at span: Range<Int>) {
            if let value {
                self[key] = value
            } else {
                values[key] = nil
                unknown[key] = Array(source[span])
            }
            spans[key] = span
        }

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

        /// Throws ``WormholeError/Code/typeMismatch`` when the value of `key` is one this version
        /// does not understand (an unknown `$` tag), which is kept as it is.
        func requireUnderstood(_ key: String) throws(WormholeError) {
            guard let raw = unknown[key] else { return }
            let shown =
                raw.count > 80
                ? String(decoding: raw.prefix(80), as: UTF8.self) + "…" : String(decoding: raw, as: UTF8.self)
            throw WormholeError(
                .typeMismatch, value: key,
                "the value of key \(NameRules.quoted(key)) is not one this version understands (\(shown)); it is kept as it is"
            )
        }
    }

    /// Parses a whole suite file: one JSON object of values. Duplicate keys: the last one wins.
    ///
    /// - Throws: ``ParseError`` (with the byte offset) when the text is not one JSON object
    ///   (not JSON, a byte-order mark, invalid UTF-8, nesting past ``maximumDepth``). A member
    ///   whose value is JSON but not a value this version understands is not an error: it is
    ///   kept in ``Contents/unknown``.
    static func decodeSuite(_ data: Data) throws(ParseError) -> Contents {
        try SuiteJSONReader.suite(data)
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
        try SuiteJSONReader.value(data)
    }
}

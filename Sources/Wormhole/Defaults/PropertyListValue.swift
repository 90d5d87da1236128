public import FoundationEssentials

/// A value that shared defaults can store: the property-list types of `UserDefaults`.
///
/// Every case round-trips with its type through the suite file (contract §5; the file format is
/// in docs/shared-defaults.md): an ``integer(_:)`` stays an `Int` (`1`), a ``double(_:)`` stays a `Double`
/// (`1.0`), a ``date(_:)``, ``data(_:)`` or ``url(_:)`` comes back as a `Date`, `Data` or `URL`.
public enum PropertyListValue: Sendable, Hashable, CustomStringConvertible {
    /// A string.
    case string(String)
    /// A signed 64-bit integer.
    case integer(Int)
    /// A double (finite or not).
    case double(Double)
    /// A Boolean.
    case bool(Bool)
    /// A point in time.
    case date(Date)
    /// Raw bytes.
    case data(Data)
    /// A URL.
    case url(URL)
    /// An ordered list of values.
    case array([PropertyListValue])
    /// String keys mapped to values.
    case dictionary([String: PropertyListValue])

    /// Converts what `UserDefaults.set(_:forKey:)` accepts: `String`, `Bool`, every integer type
    /// that fits `Int`, `Double`, `Float`, `Date`, `Data`, `URL`, `NSNumber`, arrays and
    /// `[String: …]` dictionaries of these, and `PropertyListValue` itself.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/invalidValue`` naming `key` and the
    ///   offending type (and where in the value it is) for anything else.
    package init(_ value: Any, key: String = "value") throws {
        self = try Self.convert(value, key: key, path: "")
    }

    private static func convert(_ value: Any, key: String, path: String) throws(WormholeError) -> PropertyListValue {
        // First, a Foundation `NSNumber` (from JSONSerialization, PropertyListSerialization…).
        if type(of: value) is AnyClass, let number = foundationNumber(value) { return number }
        switch value {
        case let value as PropertyListValue: return value.normalized
        case let value as String: return .string(value)
        case let value as Substring: return .string(String(value))
        case let value as Bool: return .bool(value)
        case let value as Int: return .integer(value)
        case let value as Double: return .double(value)
        case let value as Date: return PropertyListValue.date(value).normalized
        case let value as Data: return .data(value)
        case let value as URL: return .url(value)
        case let value as Float: return .double(Double(value))
        case let value as any BinaryInteger:
            guard let fitting = Int(exactly: value) else {
                throw refused(key, path, "the integer \(value) does not fit a signed 64-bit Int")
            }
            return .integer(fitting)
        case let value as [Any]:
            var result: [PropertyListValue] = []
            result.reserveCapacity(value.count)
            for (index, element) in value.enumerated() {
                result.append(try convert(element, key: key, path: path + "[\(index)]"))
            }
            return .array(result)
        case let value as [String: Any]:
            var result: [String: PropertyListValue] = [:]
            for (name, element) in value {
                result[name] = try convert(element, key: key, path: path + "[\(NameRules.quoted(name))]")
            }
            return .dictionary(result)
        default:
            let what =
                String(reflecting: type(of: value)) == "Foundation.NSNull"
                ? "null" : "a value of type \(type(of: value))"
            throw refused(key, path, "\(what) is not a property-list type")
        }
    }

    /// The value as it reads back from the file: a date becomes the date its seconds since 1970
    /// (a `Double`) name, so that a value equal to a stored one compares equal, in every process.
    var normalized: PropertyListValue {
        switch self {
        case .date(let date): .date(Date(timeIntervalSince1970: date.timeIntervalSince1970))
        case .array(let values): .array(values.map(\.normalized))
        case .dictionary(let values): .dictionary(values.mapValues(\.normalized))
        default: self
        }
    }

    /// A Foundation `NSNumber` as its type: this module does not import Foundation (it would load
    /// it into every process, docs/performance.md), but the runtime bridges an `NSNumber` to the
    /// Swift numbers. A Boolean is a `__NSCFBoolean`; a floating-point number's description has
    /// a `.`, an exponent, `nan` or `inf` (`2.0`, `1e+16`), an integer's only digits.
    private static func foundationNumber(_ value: Any) -> PropertyListValue? {
        let typeName = String(reflecting: type(of: value))
        guard typeName == "Foundation.NSNumber" || typeName == "Foundation.__NSCFBoolean" else { return nil }
        if typeName.hasSuffix("Boolean"), let flag = value as? Bool { return .bool(flag) }
        let text = String(describing: value)
        if !text.contains(where: { ".eEnN".contains($0) }), let integer = value as? Int { return .integer(integer) }
        if let double = value as? Double { return .double(double) }
        return nil
    }

    private static func refused(_ key: String, _ path: String, _ why: String) -> WormholeError {
        WormholeError(
            .invalidValue, value: key,
            "value for key \(NameRules.quoted(key))\(path.isEmpty ? "" : " at \(path)") is refused: \(why) "
                + "(allowed: String, Int, Double, Bool, Date, Data, URL, arrays and [String: …] dictionaries of them)")
    }

    /// The value as Foundation types (`String`, `Int`, `Double`, `Bool`, `Date`, `Data`, `URL`,
    /// `[Any]`, `[String: Any]`), for decoding a typed key's value.
    var object: Any {
        switch self {
        case .string(let value): value
        case .integer(let value): value
        case .double(let value): value
        case .bool(let value): value
        case .date(let value): value
        case .data(let value): value
        case .url(let value): value
        case .array(let values): values.map(\.object)
        case .dictionary(let values): values.mapValues(\.object)
        }
    }

    /// The value in the suite file's JSON form, compact (see the format table of docs/shared-defaults.md).
    public var description: String { jsonText }

    /// The type's name, for messages: `an Int`, `a Double`, `a String`…
    var typeName: String {
        switch self {
        case .string: "a String"
        case .integer: "an Int"
        case .double: "a Double"
        case .bool: "a Bool"
        case .date: "a Date"
        case .data: "a Data"
        case .url: "a URL"
        case .array: "an array"
        case .dictionary: "a dictionary"
        }
    }

    /// The value in the suite file's JSON form, compact (see the format table of docs/shared-defaults.md).
    package var jsonText: String { String(decoding: SuiteJSON.encode(self), as: UTF8.self) }

    /// The UTF-8 bytes of `jsonText` (for writers that reuse a buffer).
    package var jsonBytes: [UInt8] { SuiteJSON.encode(self) }

    /// Reads a value written in the suite file's JSON form (`1`, `1.0`, `"text"`,
    /// `{"$date":1700000000.5}`, …).
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/invalidValue`` naming `key` and what is
    ///   wrong, with its byte offset (`null` is refused: it is not a property-list value).
    package init(jsonText: String, key: String = "value") throws {
        do throws(SuiteJSON.ParseError) {
            self = try SuiteJSON.decodeValue(Data(jsonText.utf8))
        } catch {
            throw WormholeError(
                .invalidValue, value: key,
                "value for key \(NameRules.quoted(key)) is not a property-list value in JSON: \(error)")
        }
    }

    /// Reads one JSON object of values in the suite file's format (what `wormholectl defaults load`
    /// reads): duplicate keys, the last wins; `null`, an unknown tag or anything but an object is
    /// refused, naming the key or the byte offset.
    package static func values(suiteJSON data: Data) throws -> [String: PropertyListValue] {
        let contents: SuiteJSON.Contents
        do throws(SuiteJSON.ParseError) {
            contents = try SuiteJSON.decodeSuite(data)
        } catch {
            throw WormholeError(.invalidValue, "the input is not one JSON object of values: \(error)")
        }
        if let key = contents.unknown.keys.sorted().first, let raw = contents.unknown[key] {
            let text = String(decoding: raw.prefix(80), as: UTF8.self)
            let reason =
                text == "null"
                ? "null is not a storable value (use 'wormholectl defaults delete')" : "it is not a property-list value"
            throw WormholeError(
                .invalidValue, value: key, "value for key \(NameRules.quoted(key)) (\(text)) is refused: \(reason)")
        }
        return contents.values
    }
}

// MARK: Typed access

extension PropertyListValue {
    /// The integer, or nil when the value is not an ``integer(_:)``.
    public var intValue: Int? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The number as a `Double` (an ``integer(_:)`` converted), or nil for other values.
    public var doubleValue: Double? {
        switch self {
        case .double(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }

    /// The string, or nil when the value is not a ``string(_:)``.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The Boolean, or nil when the value is not a ``bool(_:)``.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }
}

// MARK: Codable values (typed keys)

extension PropertyListValue {
    /// Encodes a `Codable` value: values that are property-list types already (`String`, `Int`,
    /// `[String]`, `Date`, …) directly, anything else through `PropertyListEncoder`.
    static func encoding<Value: Encodable>(_ value: Value, key: String) throws -> PropertyListValue {
        if let direct = try? PropertyListValue(value, key: key) { return direct }
        do {
            // Wrapped in an array: a property list may not be a bare string or number at the top.
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .binary
            guard case .array(let array) = try BinaryPropertyList.read(try encoder.encode([value])),
                let first = array.first
            else {
                throw WormholeError(
                    .invalidValue, value: key, "value for key \(NameRules.quoted(key)) encoded to nothing")
            }
            return first.normalized
        } catch let error as WormholeError {
            throw error
        } catch {
            throw WormholeError(
                .invalidValue, value: key,
                "value for key \(NameRules.quoted(key)) of type \(Value.self) cannot be encoded as a property list: \(error)"
            )
        }
    }

    /// Decodes the value as `Value`, or nil when it is not one.
    func decoded<Value: Decodable>(as type: Value.Type) -> Value? {
        if let direct = object as? Value { return direct }
        if Value.self == Double.self, case .integer(let integer) = self { return Double(integer) as? Value }
        if Value.self == PropertyListValue.self { return self as? Value }
        do {
            return try PropertyListDecoder().decode([Value].self, from: BinaryPropertyList.write(.array([self]))).first
        } catch {
            return nil
        }
    }
}

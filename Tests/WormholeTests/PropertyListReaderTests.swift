// SPDX-License-Identifier: Apache-2.0
// The property-list readers (BinaryPropertyList, XMLPropertyList) against FoundationEssentials'
// PropertyListDecoder, over every value type in both forms: whether the decoder, decoding into a
// `Decodable` of any shape, could replace them.

import Foundation
import Testing

@testable import Wormhole

@Suite("Property-list readers")
struct PropertyListReaderTests {
    /// One row: a value as Foundation writes it in an XML property list, and what it must read as.
    typealias Row = (name: String, xml: String, value: PropertyListValue)

    static let rows: [Row] = [
        ("string", "<string>hello</string>", .string("hello")),
        ("empty string", "<string></string>", .string("")),
        ("unicode string", "<string>é 🎉 日本</string>", .string("é 🎉 日本")),
        ("escaped string", "<string>a &lt;b&gt; &amp; &quot;c&quot;</string>", .string("a <b> & \"c\"")),
        ("numeric string", "<string>12</string>", .string("12")),
        ("integer", "<integer>42</integer>", .integer(42)),
        ("one", "<integer>1</integer>", .integer(1)),
        ("zero", "<integer>0</integer>", .integer(0)),
        ("negative integer", "<integer>-7</integer>", .integer(-7)),
        ("big integer", "<integer>9223372036854775807</integer>", .integer(.max)),
        ("big negative integer", "<integer>-9223372036854775808</integer>", .integer(.min)),
        ("real", "<real>1.5</real>", .double(1.5)),
        ("whole real", "<real>1</real>", .double(1)),
        ("zero real", "<real>0.0</real>", .double(0)),
        ("negative whole real", "<real>-3</real>", .double(-3)),
        ("negative real", "<real>-0.25</real>", .double(-0.25)),
        ("tiny real", "<real>1e-300</real>", .double(1e-300)),
        ("huge real", "<real>1e+20</real>", .double(1e20)),
        ("infinite real", "<real>+infinity</real>", .double(.infinity)),
        ("true", "<true/>", .bool(true)),
        ("false", "<false/>", .bool(false)),
        ("date", "<date>2023-11-14T22:13:20Z</date>", .date(Date(timeIntervalSince1970: 1_700_000_000))),
        ("date before 1970", "<date>1960-01-01T00:00:00Z</date>", .date(Date(timeIntervalSince1970: -315_619_200))),
        ("data", "<data>AAH/</data>", .data(Data([0, 1, 255]))),
        ("empty data", "<data></data>", .data(Data())),
        (
            "array", "<array><string>a</string><integer>1</integer><real>2.5</real></array>",
            .array([.string("a"), .integer(1), .double(2.5)])
        ),
        ("empty array", "<array/>", .array([])),
        (
            "dictionary", "<dict><key>x</key><real>1.5</real><key>é</key><true/></dict>",
            .dictionary(["x": .double(1.5), "é": .bool(true)])
        ),
        ("empty dictionary", "<dict/>", .dictionary([:])),
        (
            "nested",
            "<dict><key>n</key><array><dict><key>d</key><date>2023-11-14T22:13:20Z</date></dict><array/></array></dict>",
            .dictionary([
                "n": .array([.dictionary(["d": .date(Date(timeIntervalSince1970: 1_700_000_000))]), .array([])])
            ])
        ),
    ]

    /// The rows PropertyListDecoder reads otherwise: it cannot tell a whole `<real>` from an
    /// `<integer>` (decoding `Int` from `<real>1</real>` succeeds), so a `Double` that is a whole
    /// number would come back as an `Int`. The readers stay.
    static let decoderDiffers: Set<String> = ["whole real", "zero real", "negative whole real"]

    /// The row's value as the only member `v` of a dictionary, in an XML property list as
    /// Foundation's `UserDefaults` writes one.
    static func xml(_ row: Row) -> Data {
        Data(
            ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                + "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"
                + "<plist version=\"1.0\">\n<dict>\n\t<key>v</key>\n\t\(row.xml)\n</dict>\n</plist>\n").utf8)
    }

    /// The same property list in the binary form, written by Foundation's PropertyListSerialization.
    static func binary(_ row: Row) throws -> Data {
        let object = try PropertyListSerialization.propertyList(from: xml(row), format: nil)
        return try PropertyListSerialization.data(fromPropertyList: object, format: .binary, options: 0)
    }

    @Test(arguments: rows.map(\.name))
    func bothReadersAndTheDecoderOnEveryValueType(_ name: String) throws {
        let row = try #require(Self.rows.first { $0.name == name })
        let expected = PropertyListValue.dictionary(["v": row.value])
        for (form, data) in [("XML", Self.xml(row)), ("binary", try Self.binary(row))] {
            let read =
                BinaryPropertyList.isBinary(data) ? try BinaryPropertyList.read(data) : try XMLPropertyList.read(data)
            #expect(BinaryPropertyList.isBinary(data) == (form == "binary"))
            #expect(read == expected, "\(name), \(form): the reader gave \(read)")
            let decoded = try PropertyListDecoder().decode(AnyPropertyList.self, from: data).value
            if Self.decoderDiffers.contains(name) {
                #expect(decoded != read, "\(name), \(form): PropertyListDecoder now agrees; the readers may go")
            } else {
                #expect(decoded == read, "\(name), \(form): PropertyListDecoder gave \(decoded), the reader \(read)")
            }
        }
    }
}

/// A property list of any shape, through `Decodable`: a dictionary, an array, or the first
/// scalar type that decodes (Bool, Int, Double, Date, Data, String, in that order).
private struct AnyPropertyList: Decodable {
    var value: PropertyListValue

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            var dictionary: [String: PropertyListValue] = [:]
            for key in keyed.allKeys { dictionary[key.stringValue] = try keyed.decode(Self.self, forKey: key).value }
            value = .dictionary(dictionary)
        } else if var unkeyed = try? decoder.unkeyedContainer() {
            var array: [PropertyListValue] = []
            while !unkeyed.isAtEnd { array.append(try unkeyed.decode(Self.self).value) }
            value = .array(array)
        } else {
            let single = try decoder.singleValueContainer()
            if let bool = try? single.decode(Bool.self) {
                value = .bool(bool)
            } else if let integer = try? single.decode(Int.self) {
                value = .integer(integer)
            } else if let double = try? single.decode(Double.self) {
                value = .double(double)
            } else if let date = try? single.decode(Date.self) {
                value = .date(date)
            } else if let data = try? single.decode(Data.self) {
                value = .data(data)
            } else {
                value = .string(try single.decode(String.self))
            }
        }
    }
}

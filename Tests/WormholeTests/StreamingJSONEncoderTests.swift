// The journal's streaming encoder against JSONEncoder (with .withoutEscapingSlashes): the same
// bytes wherever JSONEncoder's output is deterministic (scalars, arrays, one-key objects), the same
// JSON value for objects (JSONEncoder's key order on Linux is its dictionary's), and JSONEncoder's
// own path for everything the streaming encoder leaves to it.

import Foundation
import Testing
import WormholeTestSupport
@testable import Wormhole

@Suite("Streaming JSON encoder", .sharedBus)
struct StreamingJSONEncoderTests {
    static func reference(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    static func streamed(_ value: some Encodable) -> [UInt8]? {
        let encoder = StreamingJSONEncoder()
        return encoder.encode(value) ? encoder.bytes : nil
    }

    static func text(_ bytes: [UInt8]?) -> String { bytes.map { String(decoding: $0, as: UTF8.self) } ?? "nil" }

    /// Parsed as JSON values, compared (key order does not matter).
    static func sameValue(_ left: [UInt8], _ right: [UInt8]) throws -> Bool {
        let a = try JSONSerialization.jsonObject(with: Data(left), options: [.fragmentsAllowed])
        let b = try JSONSerialization.jsonObject(with: Data(right), options: [.fragmentsAllowed])
        return (a as? NSObject)?.isEqual(b) ?? false
    }

    @Test func everyControlCharacterQuoteAndBackslashIsEscapedAsJSONEncoderEscapesThem() throws {
        var all = (0..<0x80).map { Character(Unicode.Scalar(UInt8($0))) }.map(String.init).joined()
        all += "é/ü\u{2028}😀\u{7F}"
        for string in [all, "", "plain", "\"", "\\", "a\nb"] + all.map(String.init) {
            #expect(Self.streamed(string) == (try Self.reference(string)), "\(Self.text(Self.streamed(string)))")
        }
    }

    @Test func integersAtTheirLimitsAndNumbersAsJSONEncoderWritesThem() throws {
        let integers: [Int64] = [0, 1, -1, 9, 10, 99, 100, .max, .min, 1_000_000_007]
        #expect(Self.streamed(integers) == (try Self.reference(integers)))
        #expect(Self.streamed([UInt64.max, 0]) == (try Self.reference([UInt64.max, 0])))
        #expect(Self.streamed([Int8.min, Int8.max]) == (try Self.reference([Int8.min, Int8.max])))
        #expect(Self.streamed(UInt8(255)) == (try Self.reference(UInt8(255))))
        let doubles: [Double] = [
            0, -0.0, 1, 2.5, 0.1, 1e-7, 1e16, 1e20, 123_456_789.125, .leastNonzeroMagnitude, .greatestFiniteMagnitude, -3.75, 1.0 / 3,
        ]
        #expect(Self.streamed(doubles) == (try Self.reference(doubles)), "\(Self.text(Self.streamed(doubles)))")
        let floats: [Float] = [0, 0.1, 3, -2.5, .greatestFiniteMagnitude, .leastNonzeroMagnitude]
        #expect(Self.streamed(floats) == (try Self.reference(floats)), "\(Self.text(Self.streamed(floats)))")
        #expect(Self.streamed([true, false]) == (try Self.reference([true, false])))
        #expect(Self.streamed([Int?.none, 1]) == (try Self.reference([Int?.none, 1])))
        #expect(Self.streamed(Int?.none) == (try Self.reference(Int?.none)))
        #expect(Self.streamed(Date(timeIntervalSinceReferenceDate: 12.5)) == (try Self.reference(Date(timeIntervalSinceReferenceDate: 12.5))))
    }

    struct Inner: Codable, Equatable {
        var name: String
        var values: [Double]
        var flag: Bool?
    }

    struct Outer: Codable, Equatable {
        var id: Int
        var inner: Inner
        var list: [Inner]
        var map: [String: [Int]]
        var numbered: [Int: String]
        var empty: [String: Int]
        var emptyList: [Int]
        var optional: String?
        var nested: [[Inner?]]
        var when: Date
    }

    static let outer = Outer(
        id: -7, inner: Inner(name: "a/b \"q\"", values: [1, 1.5], flag: true),
        list: [Inner(name: "x", values: [], flag: nil), Inner(name: "y\u{1}", values: [0.1], flag: false)],
        map: ["k": [1, 2], "": [], "é": [3]], numbered: [3: "three", -1: "minus"], empty: [:], emptyList: [],
        optional: nil, nested: [[nil, Inner(name: "z", values: [2], flag: nil)], []],
        when: Date(timeIntervalSinceReferenceDate: 800_000_000.25))

    @Test func nestedTypesGiveTheValueJSONEncoderGivesAndDecodeBack() throws {
        let streamed = try #require(Self.streamed(Self.outer))
        #expect(try Self.sameValue(streamed, try Self.reference(Self.outer)), "\(Self.text(streamed))")
        #expect(try JSONDecoder().decode(Outer.self, from: Data(streamed)) == Self.outer)
        // Keys in the order they were encoded (deterministic, unlike JSONEncoder's on Linux).
        let inner = try #require(Self.streamed(Inner(name: "n", values: [3], flag: true)))
        #expect(Self.text(inner) == #"{"name":"n","values":[3],"flag":true}"#)
    }

    /// Containers used the way hand-written `encode(to:)` methods use them.
    struct Manual: Encodable {
        enum Keys: String, CodingKey { case a, b, c, d }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .b)
            try nested.encode("in", forKey: .a)
            var list = nested.nestedUnkeyedContainer(forKey: .b)
            try list.encode(1)
            var deeper = list.nestedContainer(keyedBy: Keys.self)
            try deeper.encodeNil(forKey: .c)
            try list.encode(2)
            try nested.encode(true, forKey: .c)
            try container.encode([1], forKey: .c)
            // Asking the encoder again gives the same object.
            var again = encoder.container(keyedBy: Keys.self)
            try again.encode("last", forKey: .d)
        }
    }

    @Test func nestedContainersClosedInOrderGiveJSONEncodersValue() throws {
        let streamed = try #require(Self.streamed(Manual()))
        #expect(Self.text(streamed) == #"{"a":1,"b":{"a":"in","b":[1,{"c":null},2],"c":true},"c":[1],"d":"last"}"#)
        #expect(try Self.sameValue(streamed, try Self.reference(Manual())))
    }

    /// Writes into a container after a later one was opened: left to JSONEncoder.
    struct OutOfOrder: Encodable {
        enum Keys: String, CodingKey { case a, b, c }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var first = container.nestedContainer(keyedBy: Keys.self, forKey: .a)
            var second = container.nestedContainer(keyedBy: Keys.self, forKey: .b)
            try second.encode(2, forKey: .a)
            try first.encode(1, forKey: .a)
        }
    }

    struct DuplicateKey: Encodable {
        enum Keys: String, CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            try container.encode(2, forKey: .a)
        }
    }

    struct Nothing: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    class Base: Encodable {
        var base = 1
    }

    final class Derived: Base {
        var derived = 2
        enum Keys: String, CodingKey { case derived }
        override func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(derived, forKey: .derived)
            try super.encode(to: container.superEncoder())
        }
    }

    struct Foundationish: Encodable {
        var data = Data([1, 2, 3])
        var url = URL(string: "https://example.com/a?b=c")!
        var decimal = Decimal(string: "1.25")!
    }

    struct Throwing: Encodable {
        struct Refused: Error {}
        func encode(to encoder: any Encoder) throws { throw Refused() }
    }

    @Test func whatItDoesNotWriteAsJSONEncoderDoesIsLeftToJSONEncoder() throws {
        #expect(Self.streamed(OutOfOrder()) == nil)
        #expect(Self.streamed(DuplicateKey()) == nil)
        #expect(Self.streamed(Nothing()) == nil)
        #expect(Self.streamed([Nothing()]) == nil)
        #expect(Self.streamed(Derived()) == nil)
        #expect(Self.streamed(Foundationish()) == nil)
        #expect(Self.streamed([Data([1])]) == nil)
        #expect(Self.streamed(Throwing()) == nil)
        #expect(Self.streamed([Double.nan]) == nil)
        #expect(Self.streamed(Float.infinity) == nil)
        let large = Dictionary(uniqueKeysWithValues: (0..<(StreamingJSONEncoder.maximumTrackedKeys + 1)).map { ("k\($0)", $0) })
        #expect(Self.streamed(large) == nil)
        let fits = Dictionary(uniqueKeysWithValues: (0..<StreamingJSONEncoder.maximumTrackedKeys).map { ("k\($0)", $0) })
        let streamed = try #require(Self.streamed(fits))
        #expect(try Self.sameValue(streamed, try Self.reference(fits)))
        // The encoder is reusable after a failure.
        #expect(Self.text(Self.streamed([1, 2])) == "[1,2]")
    }

    /// Through the journal: each of those messages is appended as JSONEncoder's value, the
    /// failures are JSONEncoder's errors, and nothing is appended for them.
    @Test func theJournalAppendsEitherPathsValueAndRefusesWhatJSONEncoderRefuses() throws {
        let fixture = try MessagingFixture()
        let journal = try fixture.wormhole().journal("events")
        try journal.append(Self.outer)
        try journal.append(Foundationish())
        try journal.append(contentsOf: [Manual(), Manual()])
        #expect(throws: WormholeError.self) { try journal.append(Throwing()) }
        #expect(throws: WormholeError.self) { try journal.append([Double.nan]) }
        let consumer = try journal.makeConsumer(from: .beginning, consumer: nil)
        let records = try consumer.nextBatch()
        #expect(records.map(\.sequence) == [1, 2, 3, 4])
        let decoded = try JSONDecoder().decode(Outer.self, from: records[0].message.data)
        #expect(decoded == Self.outer)
        #expect(try Self.sameValue(Array(records[1].message.data), try Self.reference(Foundationish())))
        #expect(try Self.sameValue(Array(records[2].message.data), try Self.reference(Manual())))
    }
}

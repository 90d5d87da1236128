// SPDX-License-Identifier: Apache-2.0
// JSONDocument checks its bytes with one scan against RFC 8259 (contract §3, v1.1): every JSON
// text is accepted as written, anything else is refused saying what and where.

import Foundation
import Testing
import Wormhole

@Suite("JSONDocument: exactly one RFC 8259 text in UTF-8")
struct JSONDocumentTests {
    static let valid: [String] = [
        "0", "-0", "1e400", "-1.5E-3", "123456789012345678901234567890", "true", "false", "null",
        #""""#, #""é ü 😀""#, #""\u00e9\ud83d\ude00""#, #""\ud800""#, #""a/b \/ \" \\ \b\f\n\r\t""#,
        "[]", "{}", "[[[[]]]]", " \t\r\n{\"a\":[1,2,{\"b\":null}],\"c\":true} \n",
        #"{"":0,"a":{"a":{"a":[]}}}"#,
    ]

    static let invalid: [(String, [UInt8])] = [
        ("empty", []), ("white space only", Array(" \n".utf8)), ("open object", Array("{".utf8)),
        ("trailing comma in array", Array("[1,]".utf8)), ("trailing comma in object", Array(#"{"a":1,}"#.utf8)),
        ("leading zero", Array("01".utf8)), ("fraction without digits", Array("1.".utf8)),
        ("no integer part", Array(".5".utf8)), ("lone minus", Array("-".utf8)),
        ("exponent without digits", Array("1e".utf8)),
        ("plus sign", Array("+1".utf8)), ("short literal", Array("tru".utf8)), ("NaN", Array("NaN".utf8)),
        ("Infinity", Array("Infinity".utf8)), ("single quotes", Array("'a'".utf8)),
        ("unterminated string", Array(#""a"#.utf8)), ("raw tab in a string", Array("\"\t\"".utf8)),
        ("bad escape", Array(#""\x""#.utf8)), ("short \\u", Array(#""\u12""#.utf8)),
        ("number key", Array("{1:2}".utf8)), ("missing comma", Array("[1 2]".utf8)), ("two values", Array("1 2".utf8)),
        ("byte-order mark", [0xEF, 0xBB, 0xBF] + Array("1".utf8)), ("invalid byte", [0x22, 0xFF, 0x22]),
        ("overlong slash", [0x22, 0xC0, 0xAF, 0x22]), ("encoded surrogate", [0x22, 0xED, 0xA0, 0x80, 0x22]),
        ("above U+10FFFF", [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22]), ("truncated character", [0x22, 0xE2, 0x82]),
        ("UTF-16", [0xFF, 0xFE, 0x31, 0x00]), ("unclosed nesting", Array("[[{}]".utf8)),
    ]

    @Test("accepted, and kept byte for byte", arguments: valid)
    func accepted(_ text: String) throws {
        let document = try JSONDocument(data: Data(text.utf8))
        #expect(document.data == Data(text.utf8))
    }

    @Test("refused with .invalidJSON saying where", arguments: invalid.map(\.0))
    func refused(_ label: String) throws {
        let bytes = try #require(Self.invalid.first { $0.0 == label }?.1)
        #expect {
            try JSONDocument(data: Data(bytes))
        } throws: { error in
            let error = error as? WormholeError
            return error?.code == .invalidJSON && error?.message.contains("at byte") == true
        }
    }

    @Test("compactText removes white space outside strings only")
    func compact() throws {
        let document = try JSONDocument(data: Data(" {\"a b\" : [ 1 , \"x \\\" y\" ] }\n".utf8))
        #expect(document.compactText == #"{"a b":[1,"x \" y"]}"#)
    }
}

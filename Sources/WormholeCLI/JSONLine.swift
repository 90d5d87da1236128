// SPDX-License-Identifier: Apache-2.0
/// A JSON line under construction: raw bytes, JSON strings and numbers appended without
/// making `String`s.
struct JSONLine {
    var bytes: [UInt8]

    /// Appends ASCII text as it is (the fixed parts of a line: `{"name":`).
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends `text` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\t`,
    /// … or `\u00XX`; everything else, `/` and non-ASCII UTF-8 included, as it is (RFC 8259 §7).
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings (names, identifiers) need no escape: copied in one go.
        let plain = text.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                return false
            }
            bytes.append(contentsOf: utf8)
            return true
        }
        if plain == true {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): escaped(byte)
            case 0x0A: escaped(UInt8(ascii: "n"))
            case 0x0D: escaped(UInt8(ascii: "r"))
            case 0x09: escaped(UInt8(ascii: "t"))
            case 0x08: escaped(UInt8(ascii: "b"))
            case 0x0C: escaped(UInt8(ascii: "f"))
            case 0..<0x20:
                let hex: StaticString = "0123456789abcdef"
                raw("\\u00")
                hex.withUTF8Buffer { digits in
                    bytes.append(digits[Int(byte >> 4)])
                    bytes.append(digits[Int(byte & 0xF)])
                }
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends a backslash and `letter`.
    private mutating func escaped(_ letter: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(letter)
    }

    /// Appends `[e1,e2,…]`, each element appended by `element`.
    mutating func array<Elements: Sequence>(
        _ elements: Elements, _ element: (inout JSONLine, Elements.Element) -> Void
    ) {
        raw("[")
        for (index, value) in elements.enumerated() {
            if index > 0 { raw(",") }
            element(&self, value)
        }
        raw("]")
    }

    /// Appends `{"name1":v1,…}`, the names sorted, each value appended by `value`.
    mutating func object<Value>(_ members: [String: Value], _ value: (inout JSONLine, Value) -> Void) {
        raw("{")
        for (index, name) in members.keys.sorted().enumerated() {
            if index > 0 { raw(",") }
            string(name)
            raw(":")
            if let member = members[name] { value(&self, member) }
        }
        raw("}")
    }

    /// Appends `value` in decimal.
    mutating func number(_ value: UInt64) {
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        let end = bytes.count + digits
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var rest = value
            for index in stride(from: end - 1, through: end - digits, by: -1) {
                buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
        }
    }
}

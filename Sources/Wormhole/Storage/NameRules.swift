// SPDX-License-Identifier: Apache-2.0
/// The rules the three name types share.
enum NameRules {
    static let allowedDescription = "A-Z a-z 0-9 . _ -"

    static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "A"..."Z", "a"..."z", "0"..."9", ".", "_", "-": true
        default: false
        }
    }

    static func validate(
        _ string: String, kind: String, code: WormholeError.Code, maximumLength: Int
    ) throws(WormholeError) {
        // Built only for a refusal: a valid name (every send, read and listen checks one) never
        // pays for the quoting.
        var shown: String { quoted(string) }
        let length = string.utf8.count
        if length == 0 {
            throw WormholeError(
                code, value: string,
                "\(kind) \(shown) is empty; it must be 1 to \(maximumLength) bytes of \(allowedDescription)")
        }
        if length > maximumLength {
            throw WormholeError(
                code, value: string,
                "\(kind) \(shown) is \(length) bytes long, over the limit of \(maximumLength) bytes")
        }
        if let bad = string.unicodeScalars.first(where: { !isAllowed($0) }) {
            let hex = String(bad.value, radix: 16, uppercase: true)
            let code4 = String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            throw WormholeError(
                code, value: string,
                "\(kind) \(shown) contains \(quoted(String(bad))) (U+\(code4)), which is not allowed "
                    + "(allowed: \(allowedDescription))")
        }
        if string.hasPrefix(".") {
            throw WormholeError(
                code, value: string,
                "\(kind) \(shown) starts with '.', which is not allowed "
                    + "(names starting with '.' are reserved for hidden, temporary and lock files)")
        }
    }

    /// The name `make` makes of a string literal of the source, which names a `kind`: an invalid
    /// literal is a programmer error, so it stops the program with a message naming it.
    static func literal<Name>(_ value: String, _ kind: String, _ make: (String) throws -> Name) -> Name {
        do {
            return try make(value)
        } catch {
            preconditionFailure("invalid \(kind) literal: \(error)")
        }
    }

    /// `value` in single quotes, with control, format and other invisible characters escaped
    /// (`\0`, `\n`, `\u{200B}`), and cut after 256 characters.
    static func quoted(_ value: String) -> String {
        var result = "'"
        for (index, scalar) in value.unicodeScalars.enumerated() {
            if index == 256 {
                result += "…"
                break
            }
            switch scalar {
            case "\0": result += "\\0"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\\": result += "\\\\"
            case "'": result += "\\'"
            case " ": result += " "
            default:
                switch scalar.properties.generalCategory {
                case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator,
                    .paragraphSeparator, .spaceSeparator:
                    result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                default:
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "'"
    }
}

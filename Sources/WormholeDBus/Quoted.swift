// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// Renders a value for an error message: quoted, with control characters visible. A value
/// longer than 200 bytes is cut after its first 100 characters, with an ellipsis and its
/// length, so that one error stays one readable line (a 10 KB bus address is still named).
package func quoted(_ value: String) -> String {
    let length = value.utf8.count
    if length > 200 { return quotedScalars(String(value.prefix(100))).dropLast() + "…' (\(length) bytes)" }
    return quotedScalars(value)
}

private func quotedScalars(_ value: String) -> String {
    var out = "'"
    for scalar in value.unicodeScalars {
        switch scalar {
        case "\0": out += "\\0"
        case "\n": out += "\\n"
        case "\t": out += "\\t"
        case "\r": out += "\\r"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F:
            out += "\\u{\(String(scalar.value, radix: 16))}"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "'"
}

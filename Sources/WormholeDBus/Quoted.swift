/// Renders a value for an error message: quoted, with control characters visible.
package func quoted(_ value: String) -> String {
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

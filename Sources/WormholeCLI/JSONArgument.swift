// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import Wormhole

/// When a JSON argument that failed to parse is a bare word (`EUR`: the shell ate the quotes of
/// `"EUR"`), the rest of the error line that says what to type instead: `; to store the string
/// EUR, quote it for the shell: '"EUR"'`. Empty for anything else (a typo inside an object, a
/// word with quotes or a backslash, which this hint could not spell right).
func bareWordHint(_ argument: String?) -> String {
    guard let argument else { return "" }
    let word = PathText.trimmingWhitespace(argument)
    guard let first = word.unicodeScalars.first, !"[{\"-0123456789".unicodeScalars.contains(first),
        !word.unicodeScalars.contains(where: { "\"'\\".unicodeScalars.contains($0) || $0.value < 0x20 })
    else { return "" }
    return "; to store the string \(word), quote it for the shell: '\"\(word)\"'"
}

/// The property-list value of a `defaults write` argument (or standard input: `argument` nil),
/// refused with ``bareWordHint(_:)`` when it is a bare word.
func propertyListArgument(_ text: String, key: String, argument: String?) throws -> PropertyListValue {
    do {
        return try PropertyListValue(jsonText: text, key: key)
    } catch let error as WormholeError {
        throw WormholeError(error.code, value: key, error.message + bareWordHint(argument))
    }
}

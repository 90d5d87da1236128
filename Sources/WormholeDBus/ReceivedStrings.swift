// SPDX-License-Identifier: Apache-2.0
import Glibc

/// The strings of the signals one connection received lately (header fields and string
/// arguments), kept so that a signal like one before reuses its strings instead of making new
/// ones: the posts of a name repeat their path, bucket interface and name every time, and each
/// of those is over 15 bytes, so a fresh `String` would be a heap allocation (and, later, a
/// release) per field and per signal. Shorter strings are stored inline in a `String` and are
/// made as they come.
///
/// Each kind of string (path, interface, member, sender, string argument) keeps its own few,
/// the oldest replaced first, and the one found last is compared first: a signal like the one
/// before costs one comparison per string. Owner-confined, like the libdbus filter that reads
/// signals (see <doc:Threading>).
struct ReceivedStrings {
    /// Which field of a signal a string is.
    enum Field: Int, CaseIterable {
        case path, interface, member, sender, argument
    }

    /// How many strings of each field are kept.
    static let capacity = 8
    /// Longer strings are made as they come (a payload is rarely repeated).
    static let longest = 512

    private var recent = [Recent](repeating: Recent(), count: Field.allCases.count)

    /// The string `pointer` holds (NUL-terminated UTF-8, checked by libdbus when it read the
    /// message) as `field`, a kept one when it has the same bytes; `nil` for `NULL`.
    mutating func string(_ pointer: UnsafePointer<CChar>?, as field: Field) -> String? {
        guard let pointer else { return nil }
        let length = strlen(pointer)
        guard length > 15, length <= Self.longest else { return String(cString: pointer) }
        return recent[field.rawValue].string(pointer, length: length)
    }

    /// The kept strings of one field.
    private struct Recent {
        var kept: [String] = []
        /// The one found or made last, compared first.
        var last = 0
        /// Where the next string replaces a kept one, once all places are taken.
        var next = 0

        mutating func string(_ pointer: UnsafePointer<CChar>, length: Int) -> String {
            if kept.indices.contains(last), Self.same(kept[last], pointer, length) { return kept[last] }
            for index in kept.indices where index != last && Self.same(kept[index], pointer, length) {
                last = index
                return kept[index]
            }
            let made = String(cString: pointer)
            if kept.count < ReceivedStrings.capacity {
                last = kept.count
                kept.append(made)
            } else {
                last = next
                kept[next] = made
                next = (next + 1) % ReceivedStrings.capacity
            }
            return made
        }

        private static func same(_ string: String, _ pointer: UnsafePointer<CChar>, _ length: Int) -> Bool {
            string.utf8.count == length
                && string.utf8.withContiguousStorageIfAvailable { memcmp($0.baseAddress!, pointer, length) == 0 }
                    == true
        }
    }
}

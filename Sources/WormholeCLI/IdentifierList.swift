// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import Wormhole

/// The identifiers listed in `path` (`-`: standard input), one per line; blank lines are skipped.
/// Thousands of identifiers as arguments cost seconds in the argument parser (it is quadratic in
/// the number of values of one argument); a file costs a read.
func readIdentifierList(_ path: String) throws -> [String] {
    let data: Data
    if path == "-" {
        data = try readStandardInput(limit: .max, identifier: "standard input")
    } else {
        guard let read = FileManager.default.contents(atPath: path) else {
            throw CLIFailure(message: "cannot read the identifier list '\(path)'", status: 64)
        }
        data = read
    }
    return String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
        .map { PathText.trimmingBlanks($0) }.filter { !$0.isEmpty }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The bench's two streams: results on standard output, progress and problems on standard error.
enum Console {
    /// One line of results (tables, the summary).
    static func output(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// One progress or error line, kept out of the results.
    static func progress(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

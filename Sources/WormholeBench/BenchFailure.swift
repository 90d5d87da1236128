// SPDX-License-Identifier: Apache-2.0
/// A failure of the benchmark: one line on standard error and a non-zero exit status.
struct BenchFailure: Error, CustomStringConvertible {
    var message: String
    var status: Int32

    init(_ message: String, status: Int32 = 1) {
        self.message = message
        self.status = status
    }

    var description: String { message }
}

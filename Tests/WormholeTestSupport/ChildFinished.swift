// SPDX-License-Identifier: Apache-2.0
import Dispatch

extension ChildProcess {
    /// Waits for the child to exit and its output to be read to the end, on a Dispatch thread:
    /// an async test must never block one of the few cooperative threads every test shares.
    public func finished(_ what: String = "the child to exit") async throws -> ProcessOutput {
        try await within(what) {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: self.wait()) }
            }
        }
    }
}

/// Runs a command to completion on a Dispatch thread (``run(_:_:input:environment:)`` blocks).
public func runInBackground(
    _ executable: String, _ arguments: [String], input: String? = nil, environment: [String: String]? = nil
) async throws -> ProcessOutput {
    try await within("\(executable) to exit") {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result { try run(executable, arguments, input: input, environment: environment) })
            }
        }
    }
}

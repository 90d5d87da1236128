// SPDX-License-Identifier: Apache-2.0
import ArgumentParser

/// `--count N` and `--timeout S`, shared by the commands that serve until stopped (`listen`,
/// `observe`, `monitor`, `defaults observe`).
struct ServingLimits: ParsableArguments {
    @Option(
        help:
            "Exit 0 after this many lines of output (posts, messages, changes or signals, as the command prints them).")
    var count: Int?

    @Option(help: "Give up after this many seconds: exit 124 if --count was given, 0 if not.")
    var timeout: Double?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1, not \(count)") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    /// Arms the timeout (``armTimeout(_:countGiven:)``) and returns what counts the lines.
    func start() -> DeliveryCounter {
        armTimeout(timeout, countGiven: count != nil)
        return DeliveryCounter(limit: count)
    }
}

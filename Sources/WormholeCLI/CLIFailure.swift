// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus

/// A failure with the exit status the contract gives it.
struct CLIFailure: Error {
    var message: String
    var status: Int32 = 1
}

/// Turns a library error into a CLI failure: validation errors are usage errors (64).
func cliFailure(_ error: any Error) -> CLIFailure {
    if let error = error as? WormholeError {
        switch error.code {
        case .invalidName, .invalidGroup, .invalidDirectory, .invalidIdentifier, .invalidJSON, .invalidSuite,
            .invalidKey,
            .invalidValue, .transientTooLarge:
            return CLIFailure(message: error.message, status: 64)
        case .lockTimeout:
            // EX_TEMPFAIL: another process holds the lock; trying again later may work.
            return CLIFailure(message: error.message, status: 75)
        default:
            return CLIFailure(message: error.message)
        }
    }
    if let error = error as? BusError {
        return CLIFailure(message: error.message, status: error.code == .invalidAddress ? 64 : 1)
    }
    if let error = error as? CLIFailure { return error }
    return CLIFailure(message: "\(error)")
}

/// Runs `body`, mapping library errors to CLI failures.
func withCLIErrors<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw cliFailure(error) }
}

/// Writes one line to standard error.
func writeError(_ line: String) {
    LineWriter.writeAll(STDERR_FILENO, Array((line + "\n").utf8))
}

/// Writes one line to standard output (for the commands that print once; `observe` and
/// `listen` use a ``LineWriter``).
func writeOutput(_ line: String) {
    LineWriter.writeAll(STDOUT_FILENO, Array((line + "\n").utf8))
}

/// Reports a usage error and exits 64.
func failUsage(_ message: String) -> Never {
    writeError("wormhole: " + message)
    Glibc.exit(64)
}

/// `value` with `digits` decimals, rounded (what `String(format: "%.1f")` gives for the
/// non-negative values the CLI prints), without Foundation's formatting.
func fixedPoint(_ value: Double, digits: Int) -> String {
    var scale = 1
    for _ in 0..<digits { scale *= 10 }
    let scaled = Int((value * Double(scale)).rounded())
    let whole = "\(scaled / scale)"
    guard digits > 0 else { return whole }
    let fraction = "\(scaled % scale)"
    return whole + "." + String(repeating: "0", count: digits - fraction.count) + fraction
}

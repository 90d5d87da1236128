// SPDX-License-Identifier: Apache-2.0
import Foundation
import Logging
import Wormhole
import WormholeDBus

/// Commands that exercise shared defaults from another process (BUS is a bus address, or `-` for
/// none: writes then store without notifying):
///
/// - `defaults-increment ROOT GROUP KEY COUNT BUS`: adds 1 to the integer KEY, COUNT times, each
///   an `update` under the suite's lock.
/// - `defaults-set-distinct ROOT GROUP PREFIX COUNT BUS`: sets PREFIX-0 … PREFIX-(COUNT-1) to their index.
/// - `defaults-write-loop ROOT GROUP KEY`: increments KEY forever (tests kill it) and prints
///   `ready` on standard output after the first write; keys `pad-<n>` grow with it, so the file
///   changes size.
/// - `foundation-write-suite SUITE`: writes values with Foundation's `UserDefaults(suiteName:)`.
/// - `defaults-write-limited ROOT GROUP KEY SIZE LIMIT`: a write that fails as on a full disk.
/// - `defaults-read-loop ROOT GROUP SUITE COUNT`: COUNT reads of every key of SUITE, each with a
///   new `GroupDefaults` (a fresh parse of the file; COUNT 0: until killed); prints
///   `reads N failed M` (the first failure on standard error).
let defaultsCommands: [String: @Sendable ([String]) throws -> Void] = [
    "defaults-increment": defaultsIncrement,
    "defaults-set-distinct": defaultsSetDistinct,
    "defaults-write-loop": defaultsWriteLoop,
    "foundation-write-suite": foundationWriteSuite,
    "defaults-write-limited": defaultsWriteLimited,
    "defaults-read-loop": defaultsReadLoop,
]

private func defaultsReadLoop(_ arguments: [String]) throws {
    guard arguments.count == 4, let count = Int(arguments[3]), count >= 0 else {
        throw DefaultsCommandError(description: "usage: defaults-read-loop ROOT GROUP SUITE COUNT")
    }
    var logger = Logger(label: "wormhole-test-peer")
    logger.logLevel = .critical
    var (reads, failed) = (0, 0)
    while count == 0 || reads < count {
        reads += 1
        do {
            let defaults = try GroupDefaults(
                applicationGroupIdentifier: GroupIdentifier(arguments[1]), suiteName: SuiteName(arguments[2]),
                containerRoot: arguments[0], logger: logger)
            for key in try defaults.keys() { _ = try defaults.storedJSON(forKey: key) }
        } catch {
            if failed == 0 { FileHandle.standardError.write(Data("read \(reads): \(error)\n".utf8)) }
            failed += 1
        }
        if count == 0 && reads % 100 == 0 {
            FileHandle.standardOutput.write(Data("reads \(reads) failed \(failed)\n".utf8))
        }
    }
    FileHandle.standardOutput.write(Data("reads \(reads) failed \(failed)\n".utf8))
}

struct DefaultsCommandError: Error, CustomStringConvertible {
    var description: String
}

private func suite(_ root: String, _ group: String, bus: String?) throws -> GroupDefaults {
    var logger = Logger(label: "wormhole-test-peer")
    logger.logLevel = .critical
    return try GroupDefaults(
        applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root,
        busAddress: try bus.flatMap { $0 == "-" ? nil : try BusAddress($0) }, logger: logger)
}

private func defaultsIncrement(_ arguments: [String]) throws {
    guard arguments.count == 5, let count = Int(arguments[3]), count >= 0 else {
        throw DefaultsCommandError(description: "usage: defaults-increment ROOT GROUP KEY COUNT BUS")
    }
    let defaults = try suite(arguments[0], arguments[1], bus: arguments[4])
    for _ in 0..<count {
        try defaults.update(forKey: arguments[2]) { old in
            guard case .integer(let value)? = old else {
                if old == nil { return .integer(1) }
                throw DefaultsCommandError(description: "counter is not an integer: \(old!)")
            }
            return .integer(value + 1)
        }
    }
    defaults.flush()
}

private func defaultsSetDistinct(_ arguments: [String]) throws {
    guard arguments.count == 5, let count = Int(arguments[3]), count >= 0 else {
        throw DefaultsCommandError(description: "usage: defaults-set-distinct ROOT GROUP PREFIX COUNT BUS")
    }
    let defaults = try suite(arguments[0], arguments[1], bus: arguments[4])
    for index in 0..<count {
        try defaults.set(index, forKey: "\(arguments[2])-\(index)")
    }
    defaults.flush()
}

private func defaultsWriteLoop(_ arguments: [String]) throws {
    guard arguments.count == 3 else {
        throw DefaultsCommandError(description: "usage: defaults-write-loop ROOT GROUP KEY")
    }
    let defaults = try suite(arguments[0], arguments[1], bus: "-")
    var sequence = 0
    while true {
        try defaults.transaction { suite in
            try suite.set(sequence, forKey: arguments[2])
            try suite.set(String(repeating: "x", count: sequence % 700), forKey: "pad-\(sequence % 5)")
        }
        if sequence == 0 { FileHandle.standardOutput.write(Data("ready\n".utf8)) }
        sequence += 1
    }
}

/// `foundation-write-suite SUITE`: writes a fixed set of values with Foundation's own
/// `UserDefaults(suiteName:)` (into `$XDG_CONFIG_HOME/SUITE.plist`) and synchronizes.
func foundationWriteSuite(_ arguments: [String]) throws {
    guard arguments.count == 1, let defaults = UserDefaults(suiteName: arguments[0]) else {
        throw DefaultsCommandError(description: "usage: foundation-write-suite SUITE")
    }
    defaults.set("EUR", forKey: "currency")
    defaults.set(42, forKey: "int")
    defaults.set(1.0, forKey: "double")
    defaults.set(true, forKey: "bool")
    defaults.set(Date(timeIntervalSince1970: 1_700_000_000), forKey: "date")
    defaults.set(Data([0, 1, 255]), forKey: "data")
    defaults.set(["a", "b"], forKey: "array")
    defaults.set(["nested": ["x": 1.5]], forKey: "dictionary")
    defaults.set("value", forKey: "key.with dots/and slash")
    guard defaults.synchronize() else { throw DefaultsCommandError(description: "synchronize() failed") }
}

/// `defaults-write-limited ROOT GROUP KEY SIZE LIMIT`: sets KEY to a string of SIZE bytes with the
/// process's file-size limit (`RLIMIT_FSIZE`) at LIMIT bytes, so that the write fails like on a
/// full disk; exits 1 with the error.
func defaultsWriteLimited(_ arguments: [String]) throws {
    guard arguments.count == 5, let size = Int(arguments[3]), let limit = rlim_t(arguments[4]) else {
        throw DefaultsCommandError(description: "usage: defaults-write-limited ROOT GROUP KEY SIZE LIMIT")
    }
    let defaults = try suite(arguments[0], arguments[1], bus: "-")
    // Without this, exceeding the limit kills the process with SIGXFSZ; ignored, write fails with EFBIG.
    signal(SIGXFSZ, SIG_IGN)
    var limits = rlimit(rlim_cur: limit, rlim_max: limit)
    guard setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limits) == 0 else {
        throw DefaultsCommandError(description: "setrlimit(RLIMIT_FSIZE, \(limit)) failed: errno \(errno)")
    }
    try defaults.set(String(repeating: "x", count: size), forKey: arguments[2])
}

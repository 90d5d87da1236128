// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Wormhole
import WormholeDBus
import WormholeSystem

/// `wormholectl doctor [--group G] [--directory D] [ID…] [--peer APPID…] [--json]`: why nothing arrives.
struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the bus, the container and the listeners; say why nothing arrives.",
        discussion: """
            One line per check, marked with a check mark when it passes and a cross when it fails \
            (? when the bus does not allow the check, - when skipped), and under each failure the fix: the bus address and where it came from; the bus is reachable \
            (daemon, version); the container root and where it came from; the container and the \
            directory exist with safe modes and owner; the stored messages (sizes, ages, invalid \
            JSON); the match rules a listener for each ID adds; whether a connection on the bus is \
            listening for each ID now; a round trip proving a signal posted now is delivered. \
            Exit status 0 only when every check passed (a ? is not a failure), 1 otherwise.
            """)

    @Option(help: "The application group identifier (without it, only the bus and the root are checked).")
    var group: String?

    @Option(help: "The wormhole directory inside the group container.")
    var directory = "wormhole"

    @Argument(help: "Message identifiers whose message and listeners to check.")
    var identifiers: [String] = []

    @Option(
        name: .customLong("peer"),
        help: "Inside a sandbox: another app's ID whose posts this app must hear (repeatable).")
    var peers: [String] = []

    @Flag(help: "Print one JSON object instead of lines.")
    var json = false

    @OptionGroup var bus: BusOptions

    func validate() throws {
        if group == nil && !identifiers.isEmpty { throw ValidationError("identifiers need --group") }
    }

    func run() throws {
        // Bad input is a usage error (64) before anything is checked, as in every command.
        let names = try withCLIErrors { () throws -> (GroupIdentifier?, WormholeDirectoryName, [MessageIdentifier]) in
            let group = try self.group.map { try GroupIdentifier($0) }
            let directory = try WormholeDirectoryName(self.directory)
            var seen = Set<String>()
            let identifiers = try self.identifiers.filter { seen.insert($0).inserted }.map { try MessageIdentifier($0) }
            return (group, directory, identifiers)
        }
        // A malformed --bus-address is bad input (64), not a finding.
        if bus.busAddress != nil { _ = try bus.address() }
        let doctor = Doctor(
            group: names.0, directory: names.1, identifiers: names.2, explicitAddress: bus.busAddress,
            peers: peers, emit: json ? nil : { writeOutput($0.text) })
        let checks = doctor.runAll()
        if json { writeOutput(DoctorReport(checks: checks).json) }
        if checks.contains(where: { $0.status == .fail || $0.status == .skipped }) { Glibc.exit(1) }
    }
}

/// One finding of `wormholectl doctor`.
struct DoctorCheck: Encodable {
    enum Status: String, Encodable {
        case pass, fail
        /// The bus does not allow the check: not a failure, nothing known.
        case unknown
        /// Not run because an earlier check failed.
        case skipped
    }

    var check: String
    var status: Status
    var detail: String
    var fix: String?
    /// Further lines (one per stored message, rule or listener).
    var items: [String] = []

    var mark: String {
        switch status {
        case .pass: "✓"
        case .fail: "✗"
        case .unknown: "?"
        case .skipped: "-"
        }
    }

    /// The lines a person reads: the check, its items, the fix.
    var text: String {
        var lines = ["\(mark) \(check): \(detail)"]
        lines += items.map { "    " + $0 }
        if let fix { lines.append("  fix: " + fix) }
        return lines.joined(separator: "\n")
    }
}

/// Everything `wormholectl doctor --json` prints.
struct DoctorReport: Encodable {
    var ok: Bool
    var checks: [DoctorCheck]

    init(checks: [DoctorCheck]) {
        self.checks = checks
        ok = !checks.contains { $0.status == .fail || $0.status == .skipped }
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? #"{"ok":false}"#
    }
}

/// Runs a call to the bus daemon from synchronous command code (the main thread, never the
/// cooperative pool) and waits for its answer, at most `seconds`: a daemon answers `GetId`,
/// `GetConnectionUnixProcessID` or `GetAllMatchRules` in milliseconds, so one that has not within
/// 5 s (the bound of the doctor's round trip too) is itself what the doctor reports, not a reason
/// to hang for libdbus's 25 s reply deadline per call. Past it, an error naming `what`.
func blocking<T: Sendable>(
    _ what: String, within seconds: Int = 5, _ body: @escaping @Sendable () async throws -> T
) throws -> T {
    let done = BoundedWait<Result<T, any Error>?>(nil)
    Task {
        do { done.answer(.success(try await body())) } catch { done.answer(.failure(error)) }
    }
    guard let outcome = done.answer(until: .now() + .seconds(seconds))
    else {
        throw CLIFailure(message: "the bus daemon did not answer \(what) within \(seconds) s")
    }
    return try outcome.get()
}

/// The process ID of the connection that owns `name` (a unique name, or the daemon's own
/// `org.freedesktop.DBus`), from the bus daemon; `nil` when it does not say.
func processID(of name: String, _ connection: BusConnection) -> UInt32? {
    let reply = try? blocking("GetConnectionUnixProcessID") {
        try await connection.callBusDaemon("GetConnectionUnixProcessID", [.string(name)])
    }
    guard case .uint32(let pid)? = reply?.first else { return nil }
    return pid
}

// Helpers for the notification tests: fresh table directories, centers on a private bus,
// collecting deliveries as events (with a bounded guard, never a sleep that waits for them),
// and short-lived helper processes.

import Dispatch
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

typealias NotifyTempDirectory = TemporaryDirectory

extension TemporaryDirectory {
    /// Where a `wormholectl` child with `XDG_RUNTIME_DIR` set to this directory keeps its table.
    var tableDirectory: String { path + "/wormhole" }
}

enum NotifyHarness {
    /// How long any one wait may take before the test fails instead of hanging.
    static let guardSeconds = waitGuardSeconds

    /// A center on the test bus with its own fresh shared-state table directory (or `directory`).
    static func center(_ bus: TestBus, table directory: String, wake: PeerWake = .doorbell) throws
        -> DarwinNotificationCenter
    {
        try DarwinNotificationCenter(busAddress: bus.address, sharedStateDirectory: directory, wake: wake)
    }

    static func name(_ string: String) -> NotificationName {
        try! NotificationName(string)
    }

    static func within<T: Sendable>(
        _ what: String, seconds: Double = waitGuardSeconds, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await WormholeTestSupport.within(what, seconds: seconds, body)
    }

    static func next<S: AsyncSequence & Sendable>(
        _ count: Int, from sequence: S, _ what: String = "notifications"
    ) async throws -> [S.Element] where S.Element: Sendable, S.Failure == Never {
        try await WormholeTestSupport.next(count, from: sequence, what)
    }

    /// The first element of `sequence` that satisfies `predicate`.
    static func first<S: AsyncSequence & Sendable>(
        from sequence: S, _ what: String, where predicate: @escaping @Sendable (S.Element) -> Bool
    ) async throws -> S.Element where S.Element: Sendable, S.Failure == Never {
        try await within(what) {
            for await element in sequence where predicate(element) { return element }
            throw TestFailure("the sequence ended before \(what)")
        }
    }

    /// A handler that forwards every delivery into a stream, and that stream.
    static func recorder() -> (
        AsyncStream<DarwinNotification>, @Sendable (DarwinNotification) -> Void
    ) {
        let (stream, continuation) = AsyncStream<DarwinNotification>.makeStream()
        return (stream, { continuation.yield($0) })
    }

    /// Runs a short-lived command on a Dispatch thread (never blocking Swift's cooperative pool).
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil
    ) async throws -> ProcessOutput {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result { try WormholeTestSupport.run(executable, arguments, environment: environment) })
            }
        }
    }

    /// `dbus-send --type=signal` of `Posted` on the test bus, as a script would type it.
    static func dbusSend(
        _ bus: TestBus, interface: String = NotifyContract.plainInterface, path: String = NotifyContract.objectPath,
        _ arguments: [String]
    ) async throws {
        let output = try await run(
            "/usr/bin/env",
            ["dbus-send", "--bus=\(bus.address.rawValue)", "--type=signal", path, interface + ".Posted"] + arguments)
        if output.status != 0 { throw TestFailure("dbus-send failed (\(output.status)): \(output.stderr)") }
    }

    /// Rule removal is asynchronous: round-trip a probe rule through the same connection (the
    /// daemon answers in order), then ask the daemon how many rules the connection holds.
    static func settledRuleCount(_ bus: TestBus, _ connection: BusConnection) async throws -> Int {
        let probe = MatchRule(interface: try InterfaceName("org.wormhole.Probe"), arguments: [0: "probe"])
        try await connection.addMatch(probe)
        try await connection.removeMatch(probe)
        let name = connection.uniqueName
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try bus.matchRuleCount(of: name) }) }
        }
    }
}

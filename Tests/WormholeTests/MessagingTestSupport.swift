// Helpers for the messaging tests: a private bus with a fresh container root and shared-state
// directory per test, recorders that turn deliveries into streams, a bounded guard so that a
// missing event fails the test instead of hanging it, and raw looks at the disk and the bus.

import Dispatch
import Foundation
import Glibc
import Logging
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// A message type with one number: `{"n":N}`.
struct MessagingCounter: Codable, Sendable, Equatable {
    var n: Int
}

/// A message type with one string: `{"text":"…"}`.
struct MessagingNote: Codable, Sendable, Equatable {
    var text: String
}

typealias MessagingTempDirectory = TemporaryDirectory

/// One test's world: its suite's bus (or a bus of its own), an application group of its own, an
/// empty container root and an empty shared-state directory.
final class MessagingFixture: Sendable {
    /// What each test's group starts with (followed by `.t<number>`).
    static let baseGroup = "group.com.example.messaging"

    let bus: TestBus
    /// This test's application group: every notification name starts with it, so tests that
    /// share the suite's bus never hear each other.
    let group: String
    let root: MessagingTempDirectory
    let state: MessagingTempDirectory

    /// A world on the suite's shared bus (the suite needs `.sharedBus`), or on `bus` (a test that
    /// kills or restarts its bus passes one of its own: `MessagingFixture(bus: TestBus())`).
    init(bus: TestBus? = nil, group: String? = nil) throws {
        self.bus = try bus ?? TestBus.shared()
        self.group = group ?? uniqueName(Self.baseGroup)
        root = try MessagingTempDirectory("messaging-root")
        state = try MessagingTempDirectory("messaging-state")
    }

    /// A wormhole on this fixture's bus, root and shared-state directory.
    func wormhole(
        group: String? = nil, directory: String = "wormhole", transiting: MessageCenter.Transiting = .file
    ) throws -> MessageCenter {
        try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group ?? self.group),
            directory: WormholeDirectoryName(directory), transiting: transiting,
            containerRoot: root.path, busAddress: bus.address, sharedStateDirectory: state.path,
            logger: MessagingHarness.logger)
    }

    /// Runs the `wormholectl` command as another process of this world (its root and bus); fails
    /// the test when it exits non-zero, unless `allowFailure` (a send with no bus exits 0 but
    /// says the notification was not sent).
    @discardableResult
    func runCLI(_ arguments: [String], allowFailure: Bool = false) async throws -> ProcessOutput {
        let output = try await MessagingHarness.run(
            try productPath("wormholectl"), arguments + ["--bus-address", bus.address.rawValue],
            environment: ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": state.path])
        if !allowFailure && output.status != 0 {
            throw TestFailure(
                "wormholectl \(arguments.joined(separator: " ")) exited \(output.status): \(output.stderr)")
        }
        return output
    }

    /// `<root>/<group>/<directory>/<identifier>.json`.
    func messagePath(_ identifier: String, directory: String = "wormhole", group: String? = nil) -> String {
        "\(root.path)/\(group ?? self.group)/\(directory)/\(identifier).json"
    }

    /// Writes a message file by hand, as another program would: directories 0700, file 0600.
    func writeRawMessage(_ bytes: String, identifier: String, directory: String = "wormhole") throws {
        for path in ["\(root.path)/\(group)", "\(root.path)/\(group)/\(directory)"] {
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw TestFailure("mkdir \(path) failed: errno \(errno)")
            }
        }
        let path = messagePath(identifier, directory: directory)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw TestFailure("open \(path) failed: errno \(errno)") }
        defer { close(fd) }
        let data = Array(bytes.utf8)
        guard write(fd, data, data.count) == data.count else {
            throw TestFailure("write \(path) failed: errno \(errno)")
        }
    }

    /// A plain connection that sees every `Posted` of this test's group (every name below
    /// `<group>/`), whatever its interface.
    func rawPosted() async throws -> MessagingRawPosted {
        let connection = try BusConnection(address: bus.address, logger: MessagingHarness.logger)
        let signals = try await connection.signals(
            matching: MatchRule(
                member: try MemberName(NotifyContract.member), path: try ObjectPath(NotifyContract.objectPath),
                argumentPaths: [0: group + "/"]))
        return MessagingRawPosted(connection: connection, signals: signals)
    }

    /// Returns once the bus daemon has routed every signal `center` emitted before the call:
    /// written to the socket (`flush`), then a round trip on the same connection, which the
    /// daemon answers after the signals before it. A rule added afterwards, on any connection,
    /// can no longer catch them.
    static func settle(_ center: DarwinNotificationCenter) async throws {
        center.flush()
        _ = try await center.connection.callBusDaemon("GetId")
    }
}

/// Every `Posted` signal on a bus, seen by a plain connection that lives as long as this value.
final class MessagingRawPosted: AsyncSequence, Sendable {
    typealias Element = Signal
    typealias Failure = Never

    let connection: BusConnection
    let signals: SignalStream

    init(connection: BusConnection, signals: SignalStream) {
        self.connection = connection
        self.signals = signals
    }

    func makeAsyncIterator() -> SignalStream.AsyncIterator { signals.makeAsyncIterator() }
}

enum MessagingHarness {
    /// A logger for the tests' own wormholes and connections: errors only, so that the expected
    /// outages and disconnections at the end of each test do not flood the output.
    static var logger: Logger {
        var logger = Logger(label: "wormhole.messaging-tests")
        logger.logLevel = .error
        return logger
    }

    /// How long any one wait may take before the test fails instead of hanging.
    static let guardSeconds = waitGuardSeconds

    static func within<T: Sendable>(
        _ what: String, seconds: Double = waitGuardSeconds, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await WormholeTestSupport.within(what, seconds: seconds, body)
    }

    static func next<S: AsyncSequence & Sendable>(
        _ count: Int, from sequence: S, _ what: String
    ) async throws -> [S.Element] where S.Element: Sendable, S.Failure == Never {
        try await WormholeTestSupport.next(count, from: sequence, what)
    }

    /// Elements of `sequence` up to and including the first that satisfies `predicate`.
    static func until<S: AsyncSequence & Sendable>(
        _ sequence: S, _ what: String, seconds: Double = guardSeconds,
        where predicate: @escaping @Sendable (S.Element) -> Bool
    ) async throws -> [S.Element] where S.Element: Sendable, S.Failure == Never {
        try await within(what, seconds: seconds) {
            var result: [S.Element] = []
            for await element in sequence {
                result.append(element)
                if predicate(element) { return result }
            }
            throw TestFailure("the sequence ended before \(what)")
        }
    }

    /// A handler that forwards every delivery into a stream, and that stream.
    static func recorder<M: Sendable>(_ type: M.Type = M.self) -> (
        AsyncStream<MessageDelivery<M>>, @Sendable (MessageDelivery<M>) -> Void
    ) {
        let (stream, continuation) = AsyncStream<MessageDelivery<M>>.makeStream()
        return (stream, { continuation.yield($0) })
    }

    /// Runs a command to completion on a Dispatch thread (never blocking Swift's cooperative pool).
    static func run(
        _ executable: String, _ arguments: [String], input: String? = nil, environment: [String: String]? = nil
    ) async throws -> ProcessOutput {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        try WormholeTestSupport.run(executable, arguments, input: input, environment: environment)
                    })
            }
        }
    }

    /// Waits for a child on a Dispatch thread, for at most `bound`: a child still running then
    /// is killed (its status is then `SIGKILL`, which the caller's expectation reports), so a
    /// child that waits for something that never comes fails its test instead of hanging the run.
    static func wait(_ child: ChildProcess, bound: Duration = .seconds(120)) async -> ProcessOutput {
        let watchdog = Task {
            try await Task.sleep(for: bound)
            child.signal(SIGKILL)
        }
        defer { watchdog.cancel() }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
        }
    }

    /// Rule removal is asynchronous: round-trip a probe rule through the same connection (the
    /// daemon answers in order), then ask the daemon how many rules the connection holds.
    static func settledRuleCount(_ bus: TestBus, _ connection: BusConnection) async throws -> Int {
        let probe = MatchRule(interface: try InterfaceName("org.wormhole.MessagingProbe"), arguments: [0: "probe"])
        try await connection.addMatch(probe)
        try await connection.removeMatch(probe)
        let name = connection.uniqueName
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try bus.matchRuleCount(of: name) }) }
        }
    }
}

extension MessageDelivery {
    /// The message, or `nil` for a failed delivery.
    var message: Message? { try? result.get() }

    /// The error of a failed delivery, or `nil`.
    var error: WormholeError? {
        if case .failure(let error) = result { return error }
        return nil
    }
}

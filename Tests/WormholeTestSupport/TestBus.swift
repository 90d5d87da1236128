// SPDX-License-Identifier: Apache-2.0
public import Foundation
import Glibc
import Synchronization
public import Testing
public import WormholeDBus
import WormholeSystem

/// The repository's root, found from this file's location, or `WORMHOLE_TEST_REPOSITORY` (a copy
/// of the checkout that another user can read: `Tests/run.sh --desktop`).
public let repositoryRoot: URL = {
    if let chosen = ProcessInfo.processInfo.environment["WORMHOLE_TEST_REPOSITORY"], !chosen.isEmpty {
        return URL(fileURLWithPath: chosen)
    }
    return URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}()

/// Which bus daemon the test buses run: `dbus-daemon` (the default) or dbus-broker, chosen by
/// the environment variable `WORMHOLE_TEST_BUS` (`dbus-daemon` or `broker`).
public enum TestBusDaemon: String, Sendable {
    case dbusDaemon = "dbus-daemon"
    case broker

    /// The daemon named by `WORMHOLE_TEST_BUS`; `nil` when it names neither.
    static let selected: TestBusDaemon? = {
        switch ProcessInfo.processInfo.environment["WORMHOLE_TEST_BUS"] ?? "" {
        case "", "dbus-daemon": return .dbusDaemon
        case "broker", "dbus-broker": return .broker
        default: return nil
        }
    }()

    /// The daemon this test run uses (`dbus-daemon` when `WORMHOLE_TEST_BUS` is unset).
    /// An unknown value makes every `TestBus` fail with an error naming it.
    public static var current: TestBusDaemon { selected ?? .dbusDaemon }

    /// Whether this run uses dbus-broker: for `.disabled(if:)` on tests that only make sense
    /// on `dbus-daemon`.
    public static var isBroker: Bool { current == .broker }
}

/// A private bus daemon, listening on a socket in a fresh temporary directory, with the
/// policy of `dbus/wormhole-session.conf`. Never the user's own session bus.
///
/// The daemon is `dbus-daemon`, or dbus-broker when `WORMHOLE_TEST_BUS=broker`
/// (see ``BrokerProcess``). It is killed and the directory removed when the value is released.
///
/// ## One bus per suite
///
/// Every daemon holds an inotify instance, from a per-user limit (`fs.inotify.max_user_instances`,
/// 128 by default) that the listeners of the directory fallback draw from too. So a suite's tests
/// share one bus: the suite carries the trait ``Testing/Trait/sharedBus`` and its tests (or their
/// fixtures) take ``shared()``, which starts the suite's daemon on first use; it is killed when the
/// suite has finished. A parameterized test with the trait shares one bus among its cases.
///
/// ```swift
/// @Suite(.sharedBus) struct SomeTests {
///     let bus: TestBus
///     init() throws { bus = try TestBus.shared() }
/// }
/// ```
///
/// Tests that share a bus run at the same time, so each test keeps to names of its own: its own
/// application group (the fixtures make one per test), notification names, interfaces or
/// argument values, and asserts only on what it sent or on its own connections (their match
/// rules, their unique names), never on everything the bus carries. A test that kills, pauses or
/// restarts the bus, or watches the whole bus, starts a bus of its own with ``init(configFile:)``,
/// as does a test that needs another daemon configuration; ``kill()``, ``pause()``,
/// ``resume()`` and ``start()`` on a shared bus record an issue and do nothing.
public final class TestBus: @unchecked Sendable {
    // @unchecked: `running` and `printed` are only read and replaced under `lock`.
    public let directory: String
    public let socketPath: String
    public let address: BusAddress
    /// The daemon this bus runs.
    public let daemon: TestBusDaemon
    private var running: Running?
    private var printed = ""
    private let lock = NSLock()
    private let journal: JournalSink?
    /// The daemon's configuration file: `dbus/wormhole-session.conf` unless another was given.
    public let configFile: String
    /// Whether this is a suite's bus (``shared()``), which no test may stop or restart.
    public let isShared: Bool

    private enum Running {
        case daemon(pid_t)
        case broker(BrokerProcess)
    }

    /// The address as the daemon printed it when it last started: with its `guid=`, the
    /// form `dbus-daemon --print-address` and `dbus-launch` give users. dbus-broker prints
    /// nothing: its address gets the guid the broker names when it accepts authentication
    /// (which differs from what its `GetId` answers).
    public var printedAddress: BusAddress {
        get throws {
            if daemon == .broker { return try BusAddress("\(address.rawValue),guid=\(try serverGUID())") }
            return try BusAddress(lock.withLock { printed })
        }
    }

    /// The guid in the server's `OK <guid>` answer to `AUTH EXTERNAL` (D-Bus specification,
    /// authentication protocol).
    private func serverGUID() throws -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        defer { close(fd) }
        guard withSocketAddress(socketPath, { connect(fd, $0, $1) }) == 0 else {
            throw TestFailure("cannot connect to \(socketPath): errno \(errno)")
        }
        let uid = String(getuid()).utf8.map { String(format: "%02x", $0) }.joined()
        let request = Array("\0AUTH EXTERNAL \(uid)\r\n".utf8)
        guard write(fd, request, request.count) == request.count else {
            throw TestFailure("write failed: errno \(errno)")
        }
        let answer = readLine(from: FileHandle(fileDescriptor: fd, closeOnDealloc: false))
        guard answer.hasPrefix("OK "),
            case let guid = answer.dropFirst(3).trimmingCharacters(in: .whitespacesAndNewlines),
            !guid.isEmpty
        else { throw TestFailure("the bus answered AUTH EXTERNAL with \(answer.debugDescription)") }
        return guid
    }

    /// Starts a daemon (with `configFile`, else `dbus/wormhole-session.conf`) and returns once it
    /// listens (dbus-daemon) or has answered a `Hello` (dbus-broker).
    public convenience init(configFile: String? = nil) throws {
        try self.init(configFile: configFile, shared: false)
    }

    init(configFile: String?, shared: Bool) throws {
        isShared = shared
        guard let daemon = TestBusDaemon.selected else {
            throw TestFailure(
                "WORMHOLE_TEST_BUS=\(ProcessInfo.processInfo.environment["WORMHOLE_TEST_BUS"] ?? ""): "
                    + "expected dbus-daemon or broker")
        }
        self.daemon = daemon
        self.configFile = configFile ?? "\(repositoryRoot.path)/dbus/wormhole-session.conf"
        var template = Array("/tmp/wormhole-bus-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed: \(errno)") }
        directory = String(cString: made)
        socketPath = directory + "/bus"
        address = try BusAddress("unix:path=\(socketPath)")
        do {
            journal =
                daemon == .broker && BrokerProcess.needsPrivateJournal ? try JournalSink(directory: directory) : nil
            try launch()
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Whether `action` may run on this bus; records an issue when the bus is shared.
    private func mayDisturb(_ action: String, sourceLocation: SourceLocation) -> Bool {
        guard isShared else { return true }
        Issue.record(
            "\(action) on the suite's shared bus would disturb the other tests: give this test a bus of its own (try TestBus())",
            sourceLocation: sourceLocation)
        return false
    }

    /// Starts the daemon (again) at the same address; returns once it listens.
    public func start(sourceLocation: SourceLocation = #_sourceLocation) throws {
        guard mayDisturb("start()", sourceLocation: sourceLocation) else { return }
        try launch()
    }

    private func launch() throws {
        switch daemon {
        case .dbusDaemon: try startDaemon()
        case .broker:
            let broker = try BrokerProcess(
                socketPath: socketPath, configFile: configFile, directory: directory, journal: journal)
            lock.withLock { running = .broker(broker) }
        }
    }

    private func startDaemon() throws {
        let output = try Spawn.pipe()
        let pid: pid_t
        do {
            defer { close(output.write) }
            pid = try Spawn.start(
                "/usr/bin/env",
                [
                    "dbus-daemon", "--config-file=\(configFile)",
                    "--nofork", "--print-address", "--address=unix:path=\(socketPath)",
                ],
                environment: ProcessInfo.processInfo.environment, standardOutput: output.write)
        } catch {
            close(output.read)
            throw error
        }
        // dbus-daemon prints its address once it listens: wait for that line.
        let line = readLine(from: FileHandle(fileDescriptor: output.read, closeOnDealloc: true))
        guard line.hasPrefix("unix:") else {
            Glibc.kill(pid, SIGKILL)
            Spawn.wait(pid)
            throw TestFailure("dbus-daemon did not start: printed \(line.debugDescription)")
        }
        lock.withLock {
            running = .daemon(pid)
            printed = line
        }
    }

    /// The process that carries the messages: dbus-daemon, or the dbus-broker under its launcher.
    private var messagePID: pid_t? {
        switch lock.withLock({ running }) {
        case .daemon(let pid): pid
        case .broker(let broker): broker.brokerPID
        case nil: nil
        }
    }

    /// Stops the daemon with SIGSTOP: its socket still accepts connections, nothing answers.
    public func pause(sourceLocation: SourceLocation = #_sourceLocation) {
        guard mayDisturb("pause()", sourceLocation: sourceLocation) else { return }
        if let pid = messagePID { Glibc.kill(pid, SIGSTOP) }
    }

    /// Lets a paused daemon run again (SIGCONT).
    public func resume(sourceLocation: SourceLocation = #_sourceLocation) {
        guard mayDisturb("resume()", sourceLocation: sourceLocation) else { return }
        if let pid = messagePID { Glibc.kill(pid, SIGCONT) }
    }

    /// Kills the daemon with SIGKILL and waits for it to exit; clients see the bus vanish.
    public func kill(sourceLocation: SourceLocation = #_sourceLocation) {
        guard mayDisturb("kill()", sourceLocation: sourceLocation) else { return }
        stop()
    }

    /// Kills the daemon and waits for it to exit (shared or not: the end of its suite).
    func stop() {
        let running = lock.withLock { () -> Running? in
            let running = self.running
            self.running = nil
            return running
        }
        switch running {
        case .daemon(let pid):
            // This process reaps its own children: a daemon that already died is a zombie until
            // this `waitpid`, so its pid cannot have been reused by another process.
            Glibc.kill(pid, SIGKILL)
            Spawn.wait(pid)
        case .broker(let broker): broker.kill()
        case nil: break
        }
        unlink(socketPath)
    }

    /// What the daemon logged (dbus-broker with a private journal; empty otherwise).
    public var daemonLog: String { journal?.text ?? "" }

    /// The daemon's view of a connection: how many match rules it holds. dbus-daemon only:
    /// dbus-broker does not implement `org.freedesktop.DBus.Debug.Stats`.
    public func matchRuleCount(of uniqueName: String) throws -> Int {
        let output = try run(
            "/usr/bin/env",
            [
                "dbus-send", "--bus=\(address.rawValue)", "--print-reply", "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus", "org.freedesktop.DBus.Debug.Stats.GetConnectionStats", "string:\(uniqueName)",
            ])
        let lines = output.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let index = lines.firstIndex(of: "string \"MatchRules\""), index + 1 < lines.count,
            let value = lines[index + 1].split(separator: " ").last.flatMap({ Int($0) })
        else { throw TestFailure("no MatchRules in stats (\(daemon.rawValue)): \(output.stdout)\(output.stderr)") }
        return value
    }
}

// MARK: - One bus per suite

extension TestBus {
    /// The bus of the running suite (or parameterized test), which has the trait
    /// ``Testing/Trait/sharedBus``: started on the first call, shared by every test of the suite,
    /// killed when the suite has finished. See "One bus per suite" above.
    ///
    /// - Throws: a ``TestFailure`` when no enclosing suite or test has the trait, or when the
    ///   daemon cannot start.
    public static func shared() throws -> TestBus {
        guard let scope = SharedTestBus.scope else {
            throw TestFailure(
                "TestBus.shared() is for suites with the trait .sharedBus: add it, as in @Suite(.sharedBus)")
        }
        return try scope.bus()
    }
}

/// The trait that gives a suite (or a parameterized test) one bus for all its tests:
/// ``Testing/Trait/sharedBus``. Not recursive: a suite inside is covered by the same bus unless
/// it has the trait itself.
public struct SharedTestBus: SuiteTrait, TestTrait, TestScoping {
    /// The bus of the innermost scope with the trait, for ``TestBus/shared()``.
    @TaskLocal static var scope: Scope?

    /// One scope's bus: none until the first ``bus()``, then one daemon until ``end()``.
    final class Scope: @unchecked Sendable {
        // @unchecked: `started` and `ended` are only read and replaced under `lock`.
        private let lock = NSLock()
        private var started: TestBus?
        private var ended = false

        func bus() throws -> TestBus {
            try lock.withLock {
                if let started { return started }
                guard !ended else { throw TestFailure("the suite that shared this bus has finished") }
                let bus = try TestBus(configFile: nil, shared: true)
                started = bus
                return bus
            }
        }

        /// Kills the daemon, if it was started: every test of the scope has finished.
        func end() {
            let bus = lock.withLock {
                ended = true
                return started.take()
            }
            bus?.stop()
        }
    }

    public var isRecursive: Bool { false }

    /// One scope for the suite or the test function (all its cases), none per case.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> SharedTestBus? {
        testCase == nil ? self : nil
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let scope = Scope()
        defer { scope.end() }
        try await Self.$scope.withValue(scope) { try await function() }
    }
}

extension Trait where Self == SharedTestBus {
    /// The suite's (or parameterized test's) tests share one private bus, started when a test
    /// first calls ``TestBus/shared()`` and killed when they have all finished.
    public static var sharedBus: Self { SharedTestBus() }
}

/// Reads one line from a pipe, blocking until it arrives (or end of file).
public func readLine(from handle: FileHandle) -> String {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while Glibc.read(handle.fileDescriptor, &byte, 1) == 1 {
        if byte == UInt8(ascii: "\n") { break }
        bytes.append(byte)
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// A failure of the test harness itself.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A Unix socket that accepts connections (the kernel completes them from the backlog)
/// and never answers: a bus that hangs.
public final class SilentSocket: Sendable {
    let directory: TemporaryDirectory?
    public let path: String
    let fd: Int32
    /// The connections ``awaitClient(seconds:)`` accepted, held open (never answered) until the end.
    private let clients = Locked<[Int32]>([])

    /// Listens at `path` (a bus's address whose daemon was killed: its socket is gone), or at a
    /// new path in a temporary directory.
    public init(path: String? = nil) throws {
        if let path {
            directory = nil
            self.path = path
        } else {
            let directory = try TemporaryDirectory("silent")
            self.directory = directory
            self.path = directory.path + "/bus"
        }
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed: \(errno)") }
        guard withSocketAddress(self.path, { bind(fd, $0, $1) }) == 0, listen(fd, 16) == 0 else {
            let error = errno
            close(fd)
            throw TestFailure("bind/listen on \(self.path) failed: \(error)")
        }
    }

    /// Blocks until a client connected and sent its first bytes (libdbus's authentication starts
    /// on the connection's loop, so the client is greeting this "bus"), at most `seconds`.
    public func awaitClient(seconds: Int32 = 10) throws {
        var listening = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&listening, 1, seconds * 1000) == 1 else { throw TestFailure("no client connected to \(path)") }
        let client = accept(fd, nil, nil)
        guard client >= 0 else { throw TestFailure("accept failed: \(errno)") }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        clients.withLock { $0.append(client) }
        var reading = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
        guard poll(&reading, 1, seconds * 1000) == 1 else { throw TestFailure("the client at \(path) sent nothing") }
    }

    deinit {
        for client in clients.withLock({ $0 }) { close(client) }
        close(fd)
    }
}

/// `base` followed by `separator`, `t` and a number no other call in this process returned:
/// a name (an application group, a notification name, an interface) of one test's own, for
/// tests that share their suite's bus (see ``TestBus``).
public func uniqueName(_ base: String, separator: String = ".") -> String {
    "\(base)\(separator)t\(uniqueNames.add(1, ordering: .relaxed).newValue)"
}

private let uniqueNames = Atomic<Int>(0)

public import Foundation
import Glibc
public import WormholeDBus

/// The repository's root, found from this file's location.
public let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A private `dbus-daemon` started from `dbus/wormhole-session.conf`, listening on a
/// socket in a fresh temporary directory. Never the user's own session bus.
///
/// The daemon is killed and the directory removed when the value is released.
public final class TestBus: @unchecked Sendable {
    // @unchecked: `process` is only replaced under `lock`.
    public let directory: String
    public let socketPath: String
    public let address: BusAddress
    private var process: Process?
    private var printed = ""
    private let lock = NSLock()
    /// The daemon's configuration file: `dbus/wormhole-session.conf` unless another was given.
    public let configFile: String

    /// The address as the daemon printed it when it last started: with its `guid=`, the
    /// form `dbus-daemon --print-address` and `dbus-launch` give users.
    public var printedAddress: BusAddress {
        get throws { try BusAddress(lock.withLock { printed }) }
    }

    /// Starts a daemon (with `configFile`, else `dbus/wormhole-session.conf`) and returns once it
    /// listens.
    public init(configFile: String? = nil) throws {
        self.configFile = configFile ?? "\(repositoryRoot.path)/dbus/wormhole-session.conf"
        var template = Array("/tmp/wormhole-bus-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed: \(errno)") }
        directory = String(cString: made)
        socketPath = directory + "/bus"
        address = try BusAddress("unix:path=\(socketPath)")
        try start()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts the daemon (again) at the same address; returns once it listens.
    public func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "dbus-daemon", "--config-file=\(configFile)",
            "--nofork", "--print-address", "--address=unix:path=\(socketPath)",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try processSpawnLock.withLock { try process.run() }
        // dbus-daemon prints its address once it listens: wait for that line.
        let line = readLine(from: output.fileHandleForReading)
        guard line.hasPrefix("unix:") else {
            process.terminate()
            throw TestFailure("dbus-daemon did not start: printed \(line.debugDescription)")
        }
        lock.withLock {
            self.process = process
            printed = line
        }
    }

    /// Stops the daemon with SIGSTOP: its socket still accepts connections, nothing answers.
    public func pause() {
        if let process = lock.withLock({ self.process }) { Glibc.kill(process.processIdentifier, SIGSTOP) }
    }

    /// Lets a paused daemon run again (SIGCONT).
    public func resume() {
        if let process = lock.withLock({ self.process }) { Glibc.kill(process.processIdentifier, SIGCONT) }
    }

    /// Kills the daemon with SIGKILL and waits for it to exit; clients see the bus vanish.
    public func kill() {
        let process = lock.withLock { () -> Process? in
            let process = self.process
            self.process = nil
            return process
        }
        guard let process, process.isRunning else { return }
        let pid = process.processIdentifier
        Glibc.kill(pid, SIGKILL)
        // Reap it here rather than with `waitUntilExit()`: Foundation's child monitor was seen to
        // miss a SIGCHLD under load, leaving a zombie and `waitUntilExit()` spinning forever.
        // ECHILD means Foundation reaped it first.
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        unlink(socketPath)
    }

    /// The daemon's view of a connection: how many match rules it holds.
    public func matchRuleCount(of uniqueName: String) throws -> Int {
        let output = try run(
            "/usr/bin/env",
            ["dbus-send", "--bus=\(address.rawValue)", "--print-reply", "--dest=org.freedesktop.DBus",
             "/org/freedesktop/DBus", "org.freedesktop.DBus.Debug.Stats.GetConnectionStats", "string:\(uniqueName)"])
        let lines = output.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let index = lines.firstIndex(of: "string \"MatchRules\""), index + 1 < lines.count,
            let value = lines[index + 1].split(separator: " ").last.flatMap({ Int($0) })
        else { throw TestFailure("no MatchRules in stats: \(output.stdout)") }
        return value
    }
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
/// and never reads or answers: a bus that hangs.
public final class SilentSocket: Sendable {
    let directory: TemporaryDirectory
    public let path: String
    let fd: Int32

    public init() throws {
        directory = try TemporaryDirectory("silent")
        path = directory.path + "/bus"
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed: \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { throw TestFailure("bind/listen failed: \(errno)") }
    }

    deinit { close(fd) }
}

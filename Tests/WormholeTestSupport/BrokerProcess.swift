// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Glibc
import WormholeDBus

/// A private dbus-broker for a ``TestBus``: `dbus-broker-launch --scope user`, handed a socket
/// this process made and listens on (systemd's socket-activation protocol: the socket as fd 3,
/// `LISTEN_FDS=1`, `LISTEN_PID`), reading the same dbus-daemon configuration file as
/// `dbus-daemon` does (its `<listen>` is ignored: the socket is passed in). The launcher forks
/// `dbus-broker`, the process that carries the messages.
///
/// The launcher logs only to the journal (`/run/systemd/journal/socket`, a fixed path) and
/// exits when it cannot. Where no journald listens there (a container, a CI machine), the
/// launcher runs in a private mount namespace (`unshare --mount`, root only) whose `/run` is a
/// fresh tmpfs with `/run/systemd/journal` linking to a ``JournalSink`` in the test's directory.
/// Nothing outside that namespace changes. With a journald running, the launcher runs as is
/// and logs there, as a desktop session's bus does.
///
/// The launcher connects to its own bus (`DBUS_SESSION_BUS_ADDRESS` is set to it; never the
/// user's), `XDG_RUNTIME_DIR` is the test's directory, and `NOTIFY_SOCKET` is removed.
final class BrokerProcess: @unchecked Sendable {
    // @unchecked: every stored property is set once in init.
    /// The `dbus-broker-launch` process, this process's child.
    let launcher: pid_t
    /// The `dbus-broker` process: what `pause()` stops and `kill()` kills.
    let brokerPID: pid_t?
    private let logPath: String

    /// The journal's socket on a machine that runs journald.
    static let systemJournal = "/run/systemd/journal/socket"

    /// Whether no journald listens here, so the launcher needs the private namespace.
    static let needsPrivateJournal: Bool = {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return true }
        defer { close(fd) }
        return withSocketAddress(systemJournal) { connect(fd, $0, $1) } != 0
    }()

    /// Starts the launcher on a new socket at `socketPath`; returns once the broker answered `Hello`.
    init(socketPath: String, configFile: String, directory: String, journal: JournalSink?) throws {
        logPath = directory + "/launcher.log"
        unlink(socketPath)
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        defer { close(listener) }
        guard withSocketAddress(socketPath, { bind(listener, $0, $1) }) == 0, listen(listener, 256) == 0 else {
            throw TestFailure("cannot listen on \(socketPath): errno \(errno)")
        }
        // $1: the journal directory to link at /run/systemd/journal (empty: use the system's).
        // The listening socket arrives as standard input and moves to fd 3.
        let script = """
            set -e
            if [ -n "$1" ]; then
                mount -t tmpfs -o mode=0755 wormhole-run /run
                mkdir /run/systemd
                ln -s "$1" /run/systemd/journal
            fi
            exec 3<&0 </dev/null
            export LISTEN_FDS=1 LISTEN_PID=$$
            exec dbus-broker-launch --scope user --config-file="$2"
            """
        let shell = ["/bin/sh", "-c", script, "sh", journal?.directory ?? "", configFile]
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(socketPath)"
        environment["XDG_RUNTIME_DIR"] = directory
        for key in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] { environment[key] = nil }
        let log = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw TestFailure("cannot write \(logPath): errno \(errno)") }
        defer { close(log) }
        // `env`, `unshare` and `sh` each exec the next, so the launcher keeps the child's pid:
        // the `$$` the script puts in LISTEN_PID.
        let launcherPID = try Spawn.start(
            "/usr/bin/env", journal == nil ? shell : ["unshare", "--mount", "--propagation", "private"] + shell,
            environment: environment, standardInput: listener, standardError: log)
        launcher = launcherPID
        // The socket listened before the launcher started, so connecting never races it: the
        // broker answers `Hello` once the launcher has handed it the socket.
        do {
            let connection = try BusConnection(
                address: try BusAddress("unix:path=\(socketPath)"), connectTimeout: .seconds(waitGuardSeconds))
            connection.close()
        } catch {
            Self.stop(launcher: launcherPID, broker: nil)
            let logged = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            if logged.contains("dirwatch_new") && logged.contains("Too many open files") {
                let limit =
                    (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_user_instances", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
                throw TestFailure(
                    "dbus-broker-launch found no inotify instance left (fs.inotify.max_user_instances = \(limit), "
                        + "shared by every process of this user; each launcher takes one): run fewer tests at once "
                        + "(Tests/broker.sh runs WORMHOLE_BROKER_WIDTH = 16) or raise the limit")
            }
            throw TestFailure(
                """
                dbus-broker did not start (\(error)); launcher said: \(logged)\(journal.map { " journal: \($0.text)" } ?? "")\
                \(journal != nil && geteuid() != 0 ? " (without journald the test bus needs root for its private mount namespace)" : "")
                """)
        }
        brokerPID = Self.childPID(of: launcherPID)
    }

    /// Kills the broker and waits for its launcher, which exits once it has reaped the broker:
    /// when this returns, the broker's sockets are closed.
    func kill() { Self.stop(launcher: launcher, broker: brokerPID) }

    private static func stop(launcher: pid_t, broker: pid_t?) {
        Glibc.kill(broker ?? launcher, SIGKILL)
        Spawn.wait(launcher)
    }

    /// The first child of `pid` (the launcher forks one: the broker).
    private static func childPID(of pid: pid_t) -> pid_t? {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.flatMap { pid_t($0) }
    }
}

/// Calls `body` with a `sockaddr_un` for `path` and its length.
func withSocketAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return -1 }
    withUnsafeMutableBytes(of: &address.sun_path) { buffer in
        for (index, byte) in bytes.enumerated() { buffer[index] = byte }
    }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// A datagram socket at `<directory>/journal/socket` that takes the journal records dbus-broker
/// and its launcher send, keeping their `MESSAGE=` lines. A dispatch source reads it whenever a
/// record arrives, so the senders never find it full.
final class JournalSink: @unchecked Sendable {
    // @unchecked: `messages` is only touched under `lock`; the rest is set once in init.
    let directory: String
    private let fd: Int32
    private let source: any DispatchSourceRead
    private let lock = NSLock()
    private var messages = ""

    init(directory parent: String) throws {
        directory = parent + "/journal"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let fd = socket(
            AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        guard withSocketAddress(directory + "/socket", { bind(fd, $0, $1) }) == 0 else {
            close(fd)
            throw TestFailure("cannot bind \(directory)/socket: errno \(errno)")
        }
        self.fd = fd
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .global())
        source.setEventHandler { [weak self] in self?.drain() }
        source.setCancelHandler { close(fd) }
        source.resume()
    }

    deinit { source.cancel() }

    /// The `MESSAGE=` lines received so far (the last 64 KB).
    var text: String { lock.withLock { messages } }

    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count <= 0 { return }
            let lines = buffer[0..<count].split(separator: UInt8(ascii: "\n"))
                .map { String(decoding: $0, as: UTF8.self) }
                .filter { $0.hasPrefix("MESSAGE=") }
                .map { String($0.dropFirst("MESSAGE=".count)) }
            guard !lines.isEmpty else { continue }
            lock.withLock {
                messages += lines.joined(separator: "\n") + "\n"
                if messages.utf8.count > 65536 { messages = String(messages.suffix(32768)) }
            }
        }
    }
}

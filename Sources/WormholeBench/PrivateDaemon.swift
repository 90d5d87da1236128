// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Dispatch
import Foundation
import Glibc
import WormholeDBus

/// The bus daemons the bench can start (`--daemon`).
enum BusDaemonKind: String, CaseIterable, Sendable {
    case dbusDaemon = "dbus-daemon"
    case broker
}

/// A private bus daemon for the benchmark, listening on a socket in a scratch directory;
/// stopped (and the directory removed) when released.
///
/// `dbus-daemon` runs as `dbus-daemon --nofork --print-address`, its standard error into a file
/// of the scratch directory. dbus-broker runs as
/// `dbus-broker-launch --scope user` handed a socket the bench listens on (systemd's
/// socket-activation protocol), with the same configuration file; the launcher logs only to
/// `/run/systemd/journal/socket`, so where no journald listens the launcher runs in a private
/// mount namespace (`unshare --mount`, root only) whose `/run/systemd/journal` is a socket the
/// bench reads and discards. The test suite's TestBus starts it the same way.
final class PrivateDaemon {
    let address: BusAddress
    /// The configuration file it was started from.
    let config: String
    private let process: ChildProcess
    private let directory: ScratchDirectory
    private let journal: DiscardingJournal?

    /// Starts the daemon from the configuration file `config`; returns once it listens
    /// (dbus-daemon) or has answered a `Hello` (dbus-broker).
    init(config: String, kind: BusDaemonKind = .dbusDaemon) throws {
        self.config = config
        directory = try ScratchDirectory("bus")
        let socket = directory.path + "/bus"
        address = try BusAddress("unix:path=\(socket)")
        switch kind {
        case .dbusDaemon:
            journal = nil
            // Its warnings go to a file, not to a pipe nobody reads once it started: a run that
            // makes it warn a lot (a connection over its match-rule limit: a line per refused
            // rule) would fill the pipe and stop the daemon in the middle of a write.
            let log = directory.path + "/dbus-daemon.log"
            process = try ChildProcess(
                executable: "/bin/sh",
                arguments: [
                    "-c", "exec dbus-daemon \"$@\" 2>\"$0\"", log, "--config-file=\(config)", "--nofork",
                    "--print-address", "--address=unix:path=\(socket)",
                ])
            // dbus-daemon prints its address once it listens.
            let line = try process.output.readLine(timeoutSeconds: 60).map { String(decoding: $0, as: UTF8.self) } ?? ""
            guard line.hasPrefix("unix:") else {
                let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw BenchFailure("dbus-daemon did not start (is the dbus-daemon package installed?): \(line)\(said)")
            }
        case .broker:
            journal = Self.systemJournalListens ? nil : try DiscardingJournal(directory: directory.path + "/journal")
            process = try Self.launchBroker(socket: socket, config: config, directory: directory.path, journal: journal)
            do {
                // The socket listened before the launcher started: a `Hello` answered means ready.
                try BusConnection(address: address, connectTimeout: .seconds(30)).close()
            } catch {
                process.terminate(signal: SIGKILL)
                throw BenchFailure(
                    "dbus-broker did not start (is the dbus-broker package installed? without journald, "
                        + "the bench needs root for a private mount namespace): \(error)")
            }
        }
    }

    deinit {
        process.terminate()
    }

    /// Whether a journald listens at the launcher's fixed log socket.
    private static var systemJournalListens: Bool {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withSocketAddress("/run/systemd/journal/socket") { connect(fd, $0, $1) } == 0
    }

    private static func launchBroker(
        socket path: String, config: String, directory: String, journal: DiscardingJournal?
    ) throws -> ChildProcess {
        let listener = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw BenchFailure("socket failed: errno \(errno)") }
        defer { close(listener) }
        guard withSocketAddress(path, { bind(listener, $0, $1) }) == 0, listen(listener, 256) == 0 else {
            throw BenchFailure("cannot listen on \(path): errno \(errno)")
        }
        // $1: the journal directory to link at /run/systemd/journal (empty: the system's).
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
        let shell = ["/bin/sh", "-c", script, "sh", journal?.directory ?? "", config]
        return try ChildProcess(
            executable: "/usr/bin/env",
            arguments: journal == nil ? shell : ["unshare", "--mount", "--propagation", "private"] + shell,
            environment: [
                // The launcher connects to its own bus, never the user's.
                "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(path)", "XDG_RUNTIME_DIR": directory,
                "NOTIFY_SOCKET": "", "LISTEN_FDS": "", "LISTEN_PID": "", "LISTEN_FDNAMES": "",
            ],
            standardInput: listener)
    }
}

/// Calls `body` with a `sockaddr_un` for `path` and its length (-1 when the path is too long).
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

/// A datagram socket at `<directory>/socket` whose records are read and discarded as they
/// arrive, so dbus-broker's log never finds it full.
private final class DiscardingJournal {
    let directory: String
    private let source: any DispatchSourceRead

    init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let fd = Glibc.socket(
            AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw BenchFailure("socket failed: errno \(errno)") }
        guard withSocketAddress(directory + "/socket", { bind(fd, $0, $1) }) == 0 else {
            close(fd)
            throw BenchFailure("cannot bind \(directory)/socket: errno \(errno)")
        }
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .global())
        source.setEventHandler {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
        }
        source.setCancelHandler { close(fd) }
        source.resume()
    }

    deinit { source.cancel() }
}
extension BusDaemonKind: ExpressibleByArgument {}

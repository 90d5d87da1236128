// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Histogram
import Wormhole
import WormholeDBus

/// `wormholectl bench --sandboxed`: post → `wormholectl observe` through Flatpak's plumbing against
/// the same pair without it (contract §8). The sandboxed observer runs in a `bwrap` of its own
/// (its own PID namespace) behind an `xdg-dbus-proxy` with Flatpak's default filter for an app;
/// this process posts through a second proxy, owning `<APPID>.Wormhole.c<unique>` as a
/// sandboxed sender does. One-way: the post here to the child's line read from its pipe.
extension CLISuite {
    static let sandboxAppID = "org.wormhole.BenchSandbox"

    func runSandboxed(
        wormhole: String,
        round:
            @escaping (String, [String], (UInt64) throws -> [UInt8], (UInt64) throws -> Void) throws -> Histogram<
                UInt64
            >
    ) throws {
        let bwrap = try Self.tool("bwrap")
        let proxyTool = try Self.tool("xdg-dbus-proxy")
        let scratch = try ScratchDirectory("sandboxed")
        let observerProxy = try FilteringProxy(
            proxyTool, bus: address, socket: scratch.path + "/observer", appID: Self.sandboxAppID)
        let posterProxy = try FilteringProxy(
            proxyTool, bus: address, socket: scratch.path + "/poster", appID: Self.sandboxAppID)
        defer {
            observerProxy.stop()
            posterProxy.stop()
        }
        let direct = try DarwinNotificationCenter(busAddress: address)
        let proxied = try DarwinNotificationCenter(busAddress: BusAddress("unix:path=\(posterProxy.socket)"))
        // What every post of a sandboxed sender does first; once per connection.
        _ = try proxied.connection.claimAppName(appID: Self.sandboxAppID)

        Console.progress("cli: wormholectl observe sandboxed (bwrap + xdg-dbus-proxy both ends) against unsandboxed")
        let name = try NotificationName(BenchNames().name("sandboxed"))
        let line = { (state: UInt64) in
            Array("{\"name\":\"\(name.rawValue)\",\"state\":\(state),\"reason\":\"posted\"}".utf8)
        }
        let sandbox = [
            "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--",
        ]
        let measured = try AlternatingRounds(label: "cli observe sandboxed", rounds: options.rounds).measure([
            .init(name: "unsandboxed") {
                try round(wormhole, ["observe", name.rawValue, "--bus-address", address.rawValue], line) {
                    try direct.post(name, state: $0)
                }
            },
            .init(name: "sandboxed") {
                try round(
                    bwrap,
                    sandbox + [
                        wormhole, "observe", name.rawValue, "--bus-address", "unix:path=\(observerProxy.socket)",
                    ],
                    line
                ) { try proxied.post(name, state: $0) }
            },
        ])
        let plain = BenchRow(label: "wormhole observe, no proxy", histogram: measured[0], isRoundTrip: false)
        let sandboxed = BenchRow(label: "wormhole observe, sandboxed", histogram: measured[1], isRoundTrip: false)
        report.publish([(plain, nil, nil), (sandboxed, plain, 1.5)], suite: "cli")
        report.goal(
            "cli", "sandboxed observe p50 / unsandboxed p50", ratio: sandboxed.median / plain.median, target: 1.5)
    }

    /// The path of a program on `PATH`; a clear error when it is missing.
    static func tool(_ name: String) throws -> String {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if access(path, X_OK) == 0 { return path }
        }
        throw BenchFailure("--sandboxed needs \(name) (Debian: bubblewrap, xdg-dbus-proxy)")
    }
}

/// An `xdg-dbus-proxy` with Flatpak's default filter for `appID`, listening at `socket` once
/// the initialiser returns (it writes a byte to the pipe given as `--fd` when it listens, and
/// exits when that pipe's reading end is closed).
final class FilteringProxy {
    let socket: String
    private let pid: pid_t
    private var readiness: Int32

    init(_ executable: String, bus: BusAddress, socket: String, appID: String) throws {
        self.socket = socket
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw BenchFailure("pipe failed: errno \(errno)") }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 3)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let arguments = [
            executable, bus.rawValue, socket, "--fd=3", "--filter", "--own=\(appID)", "--own=\(appID).*",
            "--talk=org.freedesktop.portal.*",
        ]
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        pid = try ChildReaper.spawn {
            var child: pid_t = 0
            let result = posix_spawn(&child, executable, &actions, nil, argv, environ)
            guard result == 0 else {
                throw BenchFailure("cannot start \(executable): \(String(cString: strerror(result)))")
            }
            return child
        }
        close(ends[1])
        readiness = ends[0]
        var byte: UInt8 = 0
        guard read(readiness, &byte, 1) == 1 else {
            stop()
            throw BenchFailure("xdg-dbus-proxy did not start for \(bus.rawValue)")
        }
    }

    /// Closes the pipe (the proxy exits) and reaps it.
    func stop() {
        guard readiness >= 0 else { return }
        close(readiness)
        readiness = -1
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        ChildReaper.unregister(pid)
    }

    deinit { stop() }
}

// What one `wormhole listen` process holds, read from /proc while it runs: one loop thread of the
// library's own, one epoll instance, and an inotify instance only while it listens through the
// wormhole directory (the bus is down). Counted, not timed.

import Dispatch
import Foundation
import Glibc
import Testing
import WormholeDBus
import WormholeTestSupport

@Suite("The runtime of one wormhole process")
struct RuntimeResourceCLITests {
    static let group = "group.com.example.runtime"

    /// What a process holds now.
    struct Holdings: CustomStringConvertible {
        /// Its threads' names (`/proc/PID/task/*/comm`).
        var threads: [String]
        var epollInstances: Int
        var inotifyInstances: Int

        /// Threads other than libdispatch's worker pool (whose workers come and go with queued
        /// work, and are named after their queue's quality of service).
        var ownThreads: [String] { threads.filter { !$0.contains("qos") && !$0.hasPrefix("com.apple") } }

        var description: String {
            "threads \(threads), epoll \(epollInstances), inotify \(inotifyInstances)"
        }

        init(of pid: pid_t) {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            threads = tasks.compactMap { task in
                (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            let targets = fds.map { fd -> String in
                var buffer = [UInt8](repeating: 0, count: 256)
                let count = readlink("/proc/\(pid)/fd/\(fd)", &buffer, buffer.count - 1)
                return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
            }
            epollInstances = targets.filter { $0.contains("eventpoll") }.count
            inotifyInstances = targets.filter { $0.contains("inotify") }.count
        }
    }

    @Test("listen holds one loop thread and one epoll; an inotify instance only while the bus is down")
    func listenHoldings() async throws {
        let bus = try TestBus()
        let root = try TemporaryDirectory("runtime-cli-root")
        let runtime = try TemporaryDirectory("runtime-cli-runtime")
        let child = try ChildProcess(
            try productPath("wormhole"),
            ["listen", "inbox", "--group", Self.group, "--bus-address", bus.address.rawValue],
            environment: ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path])
        defer {
            child.signal(SIGKILL)
            _ = child.wait()
        }
        #expect(try await next(1, from: child.stderrLines, "the ready line") == ["ready"])
        let steady = Holdings(of: child.pid)
        #expect(steady.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(steady)")
        #expect(steady.ownThreads.count <= 2, "main and the loop: \(steady)")
        #expect(steady.epollInstances == 1, "\(steady)")
        #expect(steady.inotifyInstances == 0, "\(steady)")

        bus.kill()
        let lost = try await next(1, from: child.stderrLines, "the lost line")
        #expect(lost.first?.hasPrefix("wormhole: lost the bus") == true, "\(lost)")
        let outage = Holdings(of: child.pid)
        #expect(outage.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(outage)")
        #expect(outage.ownThreads.count <= 2, "main and the loop: \(outage)")
        #expect(outage.epollInstances == 1, "\(outage)")
        #expect(outage.inotifyInstances == 1, "the wormhole directory and the socket's share one: \(outage)")

        try bus.start()
        let back = try await next(1, from: child.stderrLines, "the back line")
        #expect(back.first?.hasPrefix("wormhole: back on the bus") == true, "\(back)")
        let after = Holdings(of: child.pid)
        #expect(after.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(after)")
        #expect(after.epollInstances == 1, "\(after)")
        #expect(after.inotifyInstances == 0, "the watches went with the outage: \(after)")
    }
}

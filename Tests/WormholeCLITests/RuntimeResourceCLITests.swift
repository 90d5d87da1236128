// SPDX-License-Identifier: Apache-2.0
// What one `wormholectl listen`, `wormholectl observe` or idle `counter-app` process holds, read from
// /proc while it runs: one loop thread of the library's own (the work pool's threads exist only
// while it has work, and none of these has any), one epoll instance, and an inotify instance
// only while it listens through the wormhole directory (the bus is down). Counted, not timed.

import Dispatch
import Foundation
import Glibc
import Testing
import WormholeDBus
import WormholeTestSupport

@Suite("The runtime of one wormholectl process")
struct RuntimeResourceCLITests {
    static let group = "group.com.example.runtime"

    /// What a process holds now.
    struct Holdings: CustomStringConvertible {
        /// Its threads' names (`/proc/PID/task/*/comm`).
        var threads: [String]
        /// How many threads other than the main one still carry the process's name: threads
        /// created a moment ago that have not named themselves yet. libdispatch names a worker
        /// (`…-qos.overcommit`) once it runs, and the library names each of its own threads
        /// (`wormhole-loop`, `wormhole-work`) first thing; on a loaded machine a worker started for
        /// a delivery can be seen before it did (issue 36: this test failed 2 times in 30 as a
        /// desktop user at load 15, seeing `["counter-app", "wormhole-loop", "counter-app"]`).
        var starting: Int
        var epollInstances: Int
        var inotifyInstances: Int

        /// Named threads other than libdispatch's worker pool (whose workers come and go with
        /// queued work, and are named after their queue's quality of service).
        var ownThreads: [String]

        var description: String {
            "threads \(threads) (\(starting) not named yet), epoll \(epollInstances), inotify \(inotifyInstances)"
        }

        init(of pid: pid_t) {
            func name(_ task: String) -> String? {
                (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
            // The main thread (its task ID is the process ID) first.
            let tasks = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [])
                .sorted { a, b in a == "\(pid)" || (b != "\(pid)" && a < b) }
            let main = name("\(pid)")
            (threads, ownThreads, starting) = ([], [], 0)
            for task in tasks {
                guard let thread = name(task) else { continue }  // it ended meanwhile
                threads.append(thread)
                if task != "\(pid)" && thread == main {
                    starting += 1
                } else if !thread.contains("qos") && !thread.hasPrefix("com.apple") {
                    ownThreads.append(thread)
                }
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

    @Test(
        "listen holds two threads (main and the loop), one epoll and at most one inotify instance (none on the bus with --no-catch-unsignalled), with --timeout too",
        arguments: [false, true], [false, true])
    func listenHoldings(busOnly: Bool, timeout: Bool) async throws {
        let bus = try TestBus()
        let root = try TemporaryDirectory("runtime-cli-root")
        let runtime = try TemporaryDirectory("runtime-cli-runtime")
        let child = try ChildProcess(
            try productPath("wormholectl"),
            ["listen", "inbox", "--group", Self.group, "--bus-address", bus.address.rawValue]
                + (busOnly ? ["--no-catch-unsignalled"] : []) + (timeout ? ["--timeout", "120"] : []),
            environment: ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path])
        defer {
            child.signal(SIGKILL)
            _ = child.wait()
        }
        #expect(try await next(1, from: child.stderrLines, "the ready line") == ["ready"])
        let steady = Holdings(of: child.pid)
        #expect(steady.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(steady)")
        #expect(steady.ownThreads.count <= 2, "main and the loop: \(steady)")
        // No libdispatch worker either: the timeout is a deadline of the loop.
        #expect(steady.threads.count <= 2, "main and the loop, no other thread: \(steady)")
        #expect(steady.epollInstances == 1, "\(steady)")
        // The watch beside the bus that catches a sender killed before its signal, unless opted out.
        #expect(steady.inotifyInstances == (busOnly ? 0 : 1), "\(steady)")

        bus.kill()
        let lost = try await next(1, from: child.stderrLines, "the lost line")
        #expect(lost.first?.hasPrefix("wormhole: lost the bus") == true, "\(lost)")
        let outage = Holdings(of: child.pid)
        #expect(outage.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(outage)")
        #expect(outage.ownThreads.count <= 2, "main and the loop: \(outage)")
        // The outage is handled on the loop's thread: no libdispatch worker appears for it.
        #expect(outage.threads.count <= 2, "main and the loop, no other thread: \(outage)")
        #expect(outage.epollInstances == 1, "\(outage)")
        #expect(outage.inotifyInstances == 1, "the wormhole directory and the socket's share one: \(outage)")

        try bus.start()
        let back = try await next(1, from: child.stderrLines, "the back line")
        #expect(back.first?.hasPrefix("wormhole: back on the bus") == true, "\(back)")
        // The watch is closed by a job queued on the loop before the back line was written; a
        // delivery read after that line comes from a later loop iteration, so the job has run.
        let sent = try MessageCenterCLI.send(
            bus: bus, root: root.path, runtime: runtime.path, group: Self.group, identifier: "inbox", json: #"{"n":2}"#,
            busDown: false)
        #expect(sent.status == 0, "\(sent.stderr)")
        _ = try await next(1, from: child.stdoutLines, "the message sent on the bus")
        let after = Holdings(of: child.pid)
        #expect(after.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(after)")
        #expect(after.epollInstances == 1, "\(after)")
        #expect(
            after.inotifyInstances == (busOnly ? 0 : 1),
            "the outage's watches went (the one beside the bus stays): \(after)")
    }

    @Test("observe holds two threads (main and the loop) and one epoll instance, also while the bus is away")
    func observeHoldings() async throws {
        let bus = try TestBus()
        let runtime = try TemporaryDirectory("runtime-cli-observe")
        let child = try ChildProcess(
            try productPath("wormholectl"), ["observe", "org.example.threads", "--bus-address", bus.address.rawValue],
            environment: ["XDG_RUNTIME_DIR": runtime.path])
        defer {
            child.signal(SIGKILL)
            _ = child.wait()
        }
        #expect(try await next(1, from: child.stderrLines, "the ready line") == ["ready"])
        Self.expectMainAndLoop(Holdings(of: child.pid), "observing")
        bus.kill()
        let lost = try await next(1, from: child.stderrLines, "the lost line")
        #expect(lost.first?.hasPrefix("wormhole: lost the bus") == true, "\(lost)")
        Self.expectMainAndLoop(Holdings(of: child.pid), "waiting for the bus")
        try bus.start()
        let back = try await next(1, from: child.stderrLines, "the back line")
        #expect(back.first?.hasPrefix("wormhole: back on the bus") == true, "\(back)")
        Self.expectMainAndLoop(Holdings(of: child.pid), "back on the bus")
    }

    @Test(
        "an idle counter-app holds main and the loop (and its delivery queue's worker), also through an outage"
    )
    func counterAppHoldings() async throws {
        let bus = try TestBus()
        let root = try TemporaryDirectory("runtime-cli-counter-root")
        let runtime = try TemporaryDirectory("runtime-cli-counter-runtime")
        let child = try ChildProcess(
            try productPath("counter-app"), ["--group", Self.group, "--bus-address", bus.address.rawValue],
            environment: ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path])
        defer {
            child.signal(SIGKILL)
            _ = child.wait()
        }
        #expect(try await next(1, from: child.stderrLines, "the ready line") == ["ready"])
        // Its listener delivers on a serial queue of its own (the default, libdispatch): the
        // start's look at the mailbox is one delivery job there, and libdispatch keeps the
        // worker that ran it a while. Any thread beyond main and the loop is such a worker.
        let idle = Holdings(of: child.pid)
        #expect(idle.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(idle)")
        #expect(idle.ownThreads.count <= 2, "idle: main and the loop, beside libdispatch's workers: \(idle)")
        #expect(idle.epollInstances == 1, "\(idle)")
        bus.kill()
        // Sent while the bus is away: it reaches the app through the mailbox's directory.
        let sent = try MessageCenterCLI.send(
            bus: bus, root: root.path, runtime: runtime.path, group: Self.group, identifier: "button",
            json: #"{"buttonNumber":1}"#, busDown: true)
        #expect(sent.status == 0, "\(sent.stderr)")
        let arrived = try await next(1, from: child.stdoutLines, "the button sent while the bus is away")
        #expect(arrived.first?.hasPrefix("app:   button 1 arrived") == true, "\(arrived)")
        // The handler ran on the listener's serial queue (the app's choice of delivery): its
        // libdispatch worker may still be there; the library itself added no thread.
        let outage = Holdings(of: child.pid)
        #expect(outage.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(outage)")
        #expect(outage.ownThreads.count <= 2, "main and the loop: \(outage)")
        #expect(!outage.threads.contains("wormhole-work"), "nothing on the work pool: \(outage)")
    }

    /// The process holds its main thread and the loop, no other, and one epoll instance.
    static func expectMainAndLoop(_ holdings: Holdings, _ when: String) {
        #expect(holdings.threads.filter { $0 == "wormhole-loop" }.count == 1, "\(when): \(holdings)")
        #expect(holdings.threads.count <= 2, "\(when): main and the loop, no other thread: \(holdings)")
        #expect(holdings.epollInstances == 1, "\(when): \(holdings)")
    }

    /// Whether this machine lets a process make a user namespace of its own (`unshare -Ur`), in
    /// which the per-user inotify limit can be lowered without touching the machine's.
    static let userNamespaces: Bool = {
        (try? run("/usr/bin/env", ["unshare", "-Ur", "true"]))?.status == 0
    }()

    @Test(
        "listen past the per-user inotify limit, without a bus, waits for the bus and names the limit",
        .enabled(if: userNamespaces, "needs unshare -Ur (user namespaces)"))
    func pastTheInotifyLimit() async throws {
        // The lines are checked as it starts; then it is stopped.
        let started = try await listenPastTheInotifyLimit()
        started.child.signal(SIGKILL)
        _ = started.child.wait()
    }

    @Test(
        "listen past the per-user inotify limit delivers the catch-up once the bus is there (root only)",
        .enabled(
            if: userNamespaces && getuid() == 0,
            "needs root: inside the user namespace the bus sees root's credentials, which only a root run's bus accepts"
        ))
    func pastTheInotifyLimitDelivers() async throws {
        let (bus, root, runtime, child) = try await listenPastTheInotifyLimit()
        defer {
            child.signal(SIGKILL)
            _ = child.wait()
        }
        let writer = try MessageCenterCLI.send(
            bus: bus, root: root.path, runtime: runtime.path, group: Self.group, identifier: "inbox", json: #"{"n":1}"#,
            busDown: true)
        #expect(writer.status == 0, "\(writer.stderr)")
        try bus.start()
        let delivered = try await next(1, from: child.stdoutLines, "the catch-up once the bus is there")
        #expect(delivered.first?.contains(#""message":{"n":1}"#) == true, "\(delivered)")
        #expect(delivered.first?.contains(#""reason":"catchUp""#) == true, "\(delivered)")
    }

    /// Starts `listen` in a user namespace of its own with no inotify instance allowed and no bus,
    /// and checks that it says it waits for the bus and names the limit.
    private func listenPastTheInotifyLimit() async throws -> (
        bus: TestBus, root: TemporaryDirectory, runtime: TemporaryDirectory, child: ChildProcess
    ) {
        let bus = try TestBus()
        bus.kill()  // the socket's path is known, nothing listens on it yet
        let root = try TemporaryDirectory("runtime-limit-root")
        let runtime = try TemporaryDirectory("runtime-limit-runtime")
        let environment = ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path]
        // In a user namespace of its own, with no inotify instance allowed (the limit is per user
        // namespace since Linux 5.11): this process is "the one past the limit".
        let script = "echo 0 > /proc/sys/user/max_inotify_instances && exec \"$0\" \"$@\""
        let child = try ChildProcess(
            "/usr/bin/env",
            [
                "unshare", "-Ur", "sh", "-c", script, try productPath("wormholectl"), "listen", "inbox", "--group",
                Self.group,
                "--bus-address", bus.address.rawValue, "--count", "1", "--timeout", "120",
            ],
            environment: environment)
        let lines = try await next(2, from: child.stderrLines, "ready, then why it waits")
        #expect(lines.first == "ready")
        let why = lines.last ?? ""
        #expect(why.hasPrefix("wormhole: cannot connect to the bus"), "\(why)")
        #expect(why.contains("fs.inotify.max_user_instances"), "names the limit: \(why)")
        #expect(why.contains("sysctl"), "says what raises it: \(why)")
        #expect(why.hasSuffix("waiting for the bus"), "\(why)")
        return (bus, root, runtime, child)
    }

    /// The shared libraries a process has mapped whose file name starts with one of `names`
    /// (`/proc/PID/maps`).
    static func mapped(_ names: [String], by pid: pid_t) -> Set<String> {
        // Read to the end with read(2): /proc files report a size of 0.
        var bytes: [UInt8] = []
        let fd = open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(fd, &chunk, chunk.count)
                if count <= 0 { break }
                bytes += chunk[..<count]
            }
            close(fd)
        }
        let maps = String(decoding: bytes, as: UTF8.self)
        var found = Set<String>()
        for line in maps.split(separator: "\n") {
            guard let path = line.split(separator: " ", omittingEmptySubsequences: true).last, path.hasPrefix("/")
            else { continue }
            let file = path.split(separator: "/").last.map(String.init) ?? ""
            if names.contains(where: { file.hasPrefix($0) }) { found.insert(file) }
        }
        return found
    }

    /// Foundation, its internationalization half and ICU's data (about 6 MB resident between
    /// them): what the core and the CLI leave out by importing FoundationEssentials only.
    static let heavyLibraries = ["libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so"]

    @Test("observe, listen and a library listener do not load Foundation, its internationalization or ICU data")
    func idleProcessesMapNoFoundation() async throws {
        // The check itself sees them where they are: this test process imports Foundation.
        #expect(Self.mapped(Self.heavyLibraries, by: getpid()).contains("libFoundation.so"))
        let bus = try TestBus()
        let root = try TemporaryDirectory("runtime-cli-maps")
        let environment = ["WORMHOLE_CONTAINER_ROOT": root.path]
        let commands: [(String, [String])] = [
            ("wormholectl", ["observe", "org.example.maps", "--bus-address", bus.address.rawValue]),
            ("wormholectl", ["listen", "inbox", "--group", Self.group, "--bus-address", bus.address.rawValue]),
            ("counter-app", ["--group", Self.group, "--bus-address", bus.address.rawValue]),
        ]
        for (program, arguments) in commands {
            let child = try ChildProcess(try productPath(program), arguments, environment: environment)
            defer {
                child.signal(SIGKILL)
                _ = child.wait()
            }
            #expect(
                try await next(1, from: child.stderrLines, "the ready line of \(program) \(arguments[0])") == ["ready"])
            let heavy = Self.mapped(Self.heavyLibraries, by: child.pid)
            #expect(heavy.isEmpty, "\(program) \(arguments[0]) maps \(heavy.sorted())")
            if Self.mapped(["libswiftCore.so"], by: child.pid).isEmpty {
                // Linked with the Swift runtime in it (`--static-swift-stdlib`: the release build
                // and the packages): no Foundation library is mapped, and the executable holds
                // FoundationEssentials' code but not Foundation's internationalization (nor ICU's data
                // with it), which an `import Foundation` would link in.
                let linked = try Self.contains(["FoundationEssentials"] + Self.heavyModules, executableOf: child.pid)
                #expect(Self.mapped(["libFoundation", "lib_Foundation"], by: child.pid).isEmpty)
                #expect(linked == ["FoundationEssentials"], "\(program) \(arguments[0]) links \(linked.sorted())")
            } else {
                let essentials = Self.mapped(["libFoundationEssentials.so"], by: child.pid)
                #expect(essentials.count == 1, "\(program) \(arguments[0])")
            }
        }
    }

    /// The module whose name a static executable holds (about 35 times even stripped; ICU's data
    /// comes with it) when `import Foundation` links Foundation's heavy half in.
    static let heavyModules = ["FoundationInternationalization"]

    /// Which of `names` occur in the bytes of process `pid`'s executable (`/proc/PID/exe`): a
    /// module's name is in the metadata of every type it defines, stripped or not.
    static func contains(_ names: [String], executableOf pid: pid_t) throws -> Set<String> {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/exe"))
        return Set(names.filter { bytes.range(of: Data($0.utf8)) != nil })
    }
}

/// Runs `wormholectl send` as a script would.
enum MessageCenterCLI {
    static func send(
        bus: TestBus, root: String, runtime: String, group: String, identifier: String, json: String, busDown: Bool
    ) throws -> ProcessOutput {
        try run(
            try productPath("wormholectl"),
            ["send", identifier, json, "--group", group, "--bus-address", bus.address.rawValue],
            environment: ["WORMHOLE_CONTAINER_ROOT": root, "XDG_RUNTIME_DIR": runtime])
    }
}

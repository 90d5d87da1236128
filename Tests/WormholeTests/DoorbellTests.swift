// SPDX-License-Identifier: Apache-2.0
// The doorbell (docs/contract.md section 9): a direct same-user wake between Wormhole processes
// beside the bus signal. Every test runs real processes (`wormhole-test-peer doorbell-observe`
// and `doorbell-post`) on a real private bus, sharing a fresh `$XDG_RUNTIME_DIR`; an observer
// reports its deliveries line by line and, on the sentinel state 2^64-1, its ring counters, so a
// test sees both what was delivered and how it got there.

import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// Observers and posters of one test, on one bus and one runtime directory.
struct DoorbellFixture {
    let bus: TestBus
    let runtime: TemporaryDirectory
    let peer: String

    init(bus: TestBus) throws {
        self.bus = bus
        runtime = try TemporaryDirectory("doorbell")
        peer = try productPath("wormhole-test-peer")
    }

    var environment: [String: String] { ["XDG_RUNTIME_DIR": runtime.path] }
    var doorbellDirectory: String { runtime.path + "/wormhole/doorbell" }

    /// A running `doorbell-observe` and what its ready line said.
    struct Observer {
        let child: ChildProcess
        let endpoint: String?
        let busKey: String
    }

    /// Starts an observer of `name` and waits until it is active.
    func observe(_ name: String, _ flags: [String] = []) async throws -> Observer {
        let child = try ChildProcess(
            peer, ["doorbell-observe", bus.address.rawValue, name] + flags, environment: environment)
        let ready = try await within("the observer of \(name) to be ready") {
            await child.stderrLines.firstLine { $0.hasPrefix("ready") }
        }
        guard let ready else { throw TestFailure("the observer of \(name) exited: \(child.wait().stderr)") }
        var fields: [String: String] = [:]
        for part in ready.split(separator: " ").dropFirst() {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { fields[pair[0]] = pair[1] }
        }
        return Observer(
            child: child, endpoint: fields["endpoint"] == "none" ? nil : fields["endpoint"], busKey: fields["bus"] ?? ""
        )
    }

    /// Posts `name` once per state from another process; its `rang sent=N stale=N` line.
    @discardableResult
    func post(_ name: String, _ states: [UInt64], _ flags: [String] = []) async throws -> String {
        let output = try await runInBackground(
            peer, ["doorbell-post", bus.address.rawValue, name] + states.map(String.init) + flags,
            environment: environment)
        #expect(output.status == 0, "doorbell-post failed: \(output.stderr)")
        return output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Posts the sentinel to `observer` (which observes `name`) and returns every line it wrote:
    /// its deliveries, then its counters.
    func finish(_ observer: Observer, posting name: String) async throws -> [String] {
        try await post(name, [UInt64.max])
        let output = try await observer.child.finished("the observer to exit")
        #expect(output.status == 0, "\(output.stderr)")
        return output.stdout.split(separator: "\n").map(String.init)
    }

    /// What an observer wrote, split: its deliveries, and its ring counters. Which of a post's ring
    /// and signal comes first is a race (the ring follows the signal's acceptance), and the one that
    /// comes second is dropped; so the rings received are at most the rings sent, and what the
    /// tests assert exactly is the deliveries (and what the poster says it rang).
    struct Finished: Equatable {
        var deliveries: [String]
        var received: Int
        var refused: Int
        var absorbed: Int?
    }

    func finishCounting(_ observer: Observer, posting name: String, _ flags: [String] = []) async throws -> Finished {
        try await post(name, [UInt64.max], flags)
        let output = try await observer.child.finished("the observer to exit")
        #expect(output.status == 0, "\(output.stderr)")
        return Self.split(output.stdout.split(separator: "\n").map(String.init))
    }

    static func split(_ lines: [String]) -> Finished {
        var finished = Finished(deliveries: [], received: -1, refused: -1, absorbed: nil)
        for line in lines {
            if line.hasPrefix("rings received=") || line.hasPrefix("absorbed=") {
                for part in line.split(separator: " ") {
                    let pair = part.split(separator: "=")
                    guard pair.count == 2, let value = Int(pair[1]) else { continue }
                    switch pair[0] {
                    case "received": finished.received = value
                    case "refused": finished.refused = value
                    case "absorbed": finished.absorbed = value
                    default: break
                    }
                }
            } else {
                finished.deliveries.append(line)
            }
        }
        return finished
    }

    /// Everything in the doorbell directory, as relative paths.
    func registrations() -> [String] {
        ((try? FileManager.default.subpathsOfDirectory(atPath: doorbellDirectory)) ?? []).sorted()
    }
}

@Suite("Doorbell: a direct wake between Wormhole processes", .sharedBus)
struct DoorbellTests {
    let fixture: DoorbellFixture
    init() throws { fixture = try DoorbellFixture(bus: TestBus.shared()) }

    @Test("a ring wakes an observer in another process once; two posts of one state are two deliveries")
    func ringDeliversOnce() async throws {
        let name = "com.example.doorbell.once"
        let observer = try await fixture.observe(name)
        #expect(observer.endpoint != nil, "the observer has an endpoint")
        let entries = fixture.registrations()
        #expect(entries.contains { $0.hasPrefix("n") && $0.contains("/") }, "its name is registered: \(entries)")

        #expect(try await fixture.post(name, [1, 1]) == "rang sent=2 stale=0")
        let finished = try await fixture.finishCounting(observer, posting: name)
        // Rung three times (two posts and the sentinel); each post delivered once, whichever of
        // its ring and its signal came first.
        #expect(finished.deliveries == ["\(name) 1", "\(name) 1"])
        #expect(finished.refused == 0 && (0...3).contains(finished.received), "\(finished)")
    }

    @Test("a rung observer's bus signal is dropped by its connection before decoding, once per post")
    func duplicateAbsorbedInFilter() async throws {
        let name = "com.example.doorbell.absorbed"
        let observer = try await fixture.observe(name, ["--absorbed"])
        #expect(try await fixture.post(name, [1, 2, 2]) == "rang sent=3 stale=0")
        // The sentinel by the bus alone: it arrives on the bus socket after the three signals
        // (their poster flushed before exiting), so all three have been seen when it is delivered.
        try await fixture.post(name, [UInt64.max], ["--bus-only"])
        let output = try await observer.child.finished("the observer to exit")
        #expect(output.status == 0, "\(output.stderr)")
        let finished = DoorbellFixture.split(output.stdout.split(separator: "\n").map(String.init))
        #expect(finished.deliveries == ["\(name) 1", "\(name) 2", "\(name) 2"])
        // A signal is dropped undecoded only when its ring came first (always, with the bus
        // stopped: `ringWithoutTheBus`); here that is a race, so at most once per ring.
        #expect(finished.refused == 0 && (0...3).contains(finished.received), "\(finished)")
        #expect((0...finished.received).contains(finished.absorbed ?? -1), "\(finished)")
    }

    @Test("a signal that also reaches a bus-only observer of the same process is not dropped; each delivers once")
    func duplicateKeptForBusOnlyRoute() async throws {
        let name = "com.example.doorbell.mixed"
        let observer = try await fixture.observe(name, ["--absorbed", "--also-bus-only"])
        #expect(try await fixture.post(name, [4, 5]) == "rang sent=2 stale=0")
        try await fixture.post(name, [UInt64.max], ["--bus-only"])
        let output = try await observer.child.finished("the observer to exit")
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n").map(String.init)
        // The rung observer's lines by the ring, the bus-only one's by the signal: in either order.
        #expect(
            lines.dropLast(2).sorted()
                == ["\(name) 4", "\(name) 5", "bus-only \(name) 4", "bus-only \(name) 5"].sorted())
        #expect(lines.suffix(2) == ["rings received=2 refused=0", "absorbed=0"])
    }

    @Test("a post that throws (its center closed) rings nobody: the observer gets nothing of it")
    func notSentRingsNobody() async throws {
        let name = "com.example.doorbell.notsent"
        let observer = try await fixture.observe(name)
        #expect(try await fixture.post(name, [1, 2, 3], ["--close-first"]) == "rang sent=0 stale=0 notsent=3")
        let finished = try await fixture.finishCounting(observer, posting: name, ["--bus-only"])
        #expect(finished.deliveries == [] && finished.received == 0, "\(finished)")
    }

    @Test(
        "a sender's posts arrive in its order, once each (but those a newer queued signal replaced), when rings are dropped (the observer stopped, its queue full)"
    )
    func orderWithDroppedRings() async throws {
        let name = "com.example.doorbell.order"
        let observer = try await fixture.observe(name)
        // 4,000 posts, 100 us apart; the observer is stopped from its first delivery until half are
        // posted: its endpoint's queue (512 datagrams by default) fills and later rings are dropped,
        // so once it runs again the rings of new posts come while the signals of posts whose rings
        // were dropped are still queued in the daemon.
        let posts = 4_000
        let poster = try ChildProcess(
            fixture.peer, ["post-sequence", fixture.bus.address.rawValue, name, "\(posts)", "100"],
            environment: fixture.environment)
        _ = try await within("the first delivery") { await observer.child.stdoutLines.firstLine { _ in true } }
        observer.child.signal(SIGSTOP)
        _ = try await within("half of the posts") { await poster.stdoutLines.firstLine { $0 == "halfway" } }
        observer.child.signal(SIGCONT)
        let posted = try await poster.finished("the poster")
        #expect(
            posted.status == 0 && posted.stdout.hasSuffix("posted \(posts) notsent 0\n"), "\(posted.stdout.suffix(80))")
        // When the daemon fell behind the poster (a loaded machine), a queued signal may have been
        // replaced by the next post's (contract §7): a post whose ring was dropped too is stood
        // for by that next one. Otherwise every post arrives.
        let replaced = posted.stdout.split(separator: "\n").compactMap { line in
            line.hasPrefix("replaced ") ? Int(line.dropFirst("replaced ".count)) : nil
        }.first
        let finished = try await fixture.finishCounting(observer, posting: name, ["--bus-only"])
        let states = finished.deliveries.compactMap { Int($0.dropFirst(name.count + 1)) }
        #expect(states.count == finished.deliveries.count, "\(finished.deliveries.prefix(3))")
        #expect(zip(states, states.dropFirst()).allSatisfy { $0 < $1 }, "in order and once each")
        #expect(states.last == posts, "the last post arrives")
        #expect(
            posts - states.count <= (replaced ?? 0),
            "\(posts - states.count) missing, \(replaced ?? -1) replaced, \(finished.received) rings received")
    }

    @Test("a post rings only the processes that observe its name or a prefix of it")
    func ringsNobodyElse() async throws {
        let (first, second, prefix) = ("com.example.doorbell.a", "com.example.doorbell.b", "group.doorbell/inbox/")
        let a = try await fixture.observe(first)
        let b = try await fixture.observe(second)
        let c = try await fixture.observe(prefix, ["--prefix"])

        #expect(try await fixture.post(first, [5]) == "rang sent=1 stale=0")
        #expect(try await fixture.post(prefix + "note", [6]) == "rang sent=1 stale=0")
        #expect(try await fixture.post("com.example.doorbell.nobody", [7]) == "rang sent=0 stale=0")

        let (fa, fb, fc) = (
            try await fixture.finishCounting(a, posting: first), try await fixture.finishCounting(b, posting: second),
            try await fixture.finishCounting(c, posting: prefix + "stop")
        )
        #expect(fa.deliveries == ["\(first) 5"] && fa.received <= 2 && fa.refused == 0, "\(fa)")
        #expect(fb.deliveries == [] && fb.received <= 1 && fb.refused == 0, "\(fb)")
        #expect(fc.deliveries == ["\(prefix)note 6"] && fc.received <= 2 && fc.refused == 0, "\(fc)")
    }

    @Test(
        "a killed observer's registration is removed by the next ring, its endpoint by the next process that opens one")
    func staleEndpointRemoved() async throws {
        let name = "com.example.doorbell.stale"
        let observer = try await fixture.observe(name, [name + ".second"])
        let endpoint = try #require(observer.endpoint)
        observer.child.signal(SIGKILL)
        _ = try await observer.child.finished("the killed observer")
        // SIGKILL runs no exit hook: the files are left behind.
        #expect(FileManager.default.fileExists(atPath: endpoint))
        #expect(fixture.registrations().filter { $0.hasPrefix("n") && $0.contains("/") }.count == 2)

        // The ring finds nobody: that registration goes; the endpoint file stays for the sweep.
        #expect(try await fixture.post(name, [1]) == "rang sent=0 stale=1")
        #expect(fixture.registrations().filter { $0.hasPrefix("n") && $0.contains("/") }.count == 1)
        #expect(FileManager.default.fileExists(atPath: endpoint))
        // A process that opens its endpoint sweeps the dead one and its other registration.
        let next = try await fixture.observe("com.example.doorbell.sweeper")
        let left = fixture.registrations().filter { !$0.hasSuffix(next.endpoint.map { String($0.suffix(16)) } ?? "-") }
        #expect(left.allSatisfy { !$0.contains(String(endpoint.suffix(16))) }, "\(fixture.registrations())")
        #expect(!FileManager.default.fileExists(atPath: endpoint))
        _ = try await fixture.finish(next, posting: "com.example.doorbell.sweeper")
        #expect(fixture.registrations() == [], "nothing is left: \(fixture.registrations())")
    }

    @Test("a poster that rang a name rings an observer registered since, and stops ringing one that was killed")
    func posterFollowsRegistrations() async throws {
        let name = "com.example.doorbell.listing"
        let a = try await fixture.observe(name)
        // One poster for every post: it keeps what it listed of the name's registrations.
        let poster = try ChildProcess(
            fixture.peer, ["doorbell-post", fixture.bus.address.rawValue, name, "1", "2", "3", "4", "--each-input"],
            environment: fixture.environment)
        func post() async throws -> String? {
            poster.write("post\n")
            return try await within("a post") { await poster.stdoutLines.firstLine { _ in true } }
        }
        #expect(try await post() == "rang sent=1 stale=0")
        // Registered after the poster listed the name's directory: the directory changed.
        let b = try await fixture.observe(name)
        #expect(try await post() == "rang sent=3 stale=0")
        b.child.signal(SIGKILL)
        _ = try await b.child.finished("the killed observer")
        // Its ring is refused and its registration removed; the next post does not find it again.
        #expect(try await post() == "rang sent=4 stale=1")
        #expect(try await post() == "rang sent=5 stale=1")
        let posted = try await poster.finished("the poster")
        #expect(posted.status == 0, "\(posted.stderr)")
        let finished = try await fixture.finishCounting(a, posting: name)
        #expect(finished.deliveries == ["\(name) 1", "\(name) 2", "\(name) 3", "\(name) 4"])
        #expect(finished.refused == 0 && finished.received <= 5, "\(finished)")
    }

    @Test("a poster of many observed names keeps at most 64 directories open and still rings every observer")
    func keptListingsAreBounded() async throws {
        // 80 names observed by one process: 80 registration directories. Each kept listing is an
        // open directory, so without a bound a process that posts to many names would run out of
        // file descriptors for its own files.
        let names = (1...80).map { "com.example.doorbell.many.n\($0)" }
        let observer = try await fixture.observe(names[0], Array(names.dropFirst()))
        let output = try await runInBackground(
            fixture.peer,
            ["doorbell-post", fixture.bus.address.rawValue, names.joined(separator: ","), "1", "2", "3", "--names"],
            environment: fixture.environment)
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n").map(String.init)
        // A ring that finds the observer's queue full is not sent (the bus signal wakes it).
        #expect(lines.first?.hasPrefix("rang sent=") == true && lines.first?.hasSuffix(" stale=0") == true, "\(lines)")
        let fields = Dictionary(
            uniqueKeysWithValues: (lines.last ?? "").split(separator: " ").compactMap { part -> (String, Int)? in
                let pair = part.split(separator: "=")
                guard pair.count == 2, let value = Int(pair[1]) else { return nil }
                return (String(pair[0]), value)
            })
        #expect((fields["kept"] ?? Int.max) <= 64, "\(lines)")
        #expect((fields["descriptors"] ?? Int.max) < 64 + 40, "\(lines)")
        let delivered = try await fixture.finish(observer, posting: names[0])
        #expect(delivered.count == 240 + 1, "\(delivered.suffix(3))")
        #expect(Set(delivered.dropLast()) == Set(names.flatMap { ["\($0) 1", "\($0) 2", "\($0) 3"] }))
    }

    @Test("an observer that exits normally removes its registration and endpoint")
    func normalExitCleansUp() async throws {
        let name = "com.example.doorbell.exit"
        let observer = try await fixture.observe(name)
        _ = try await fixture.finish(observer, posting: name)
        #expect(fixture.registrations() == [])
    }

    @Test("bus-only observers are not rung and bus-only posts ring nobody; the bus signal still delivers")
    func busOnly() async throws {
        let (plain, rung) = ("com.example.doorbell.busonly", "com.example.doorbell.rung")
        let quiet = try await fixture.observe(plain, ["--bus-only"])
        #expect(quiet.endpoint == nil)
        #expect(fixture.registrations().allSatisfy { !$0.hasPrefix("n") }, "\(fixture.registrations())")
        #expect(try await fixture.post(plain, [3]) == "rang sent=0 stale=0")
        #expect(try await fixture.finish(quiet, posting: plain) == ["\(plain) 3", "rings received=0 refused=0"])

        let listening = try await fixture.observe(rung)
        #expect(try await fixture.post(rung, [4], ["--bus-only"]) == "rang sent=0 stale=0")
        // Only the sentinel (posted with the doorbell) rang it; the bus delivered the bus-only post.
        let finished = try await fixture.finishCounting(listening, posting: rung)
        #expect(finished.deliveries == ["\(rung) 4"] && finished.received <= 1 && finished.refused == 0, "\(finished)")
    }

    @Test(
        "another user's ring is refused by the credentials check; the user's own is taken",
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            "needs root and setpriv: the other user's ring is sent as uid 65534"))
    func otherUserRefused() async throws {
        let name = "com.example.doorbell.uid"
        let observer = try await fixture.observe(name)
        let endpoint = try #require(observer.endpoint)
        // A second way to the same socket that another user may take (the doorbell's own
        // directory is 0700): a hard link in a directory anyone can enter, writable by anyone.
        let door = try TemporaryDirectory("doorbell-door")
        chmod(door.path, 0o755)
        let link = door.path + "/e"
        #expect(Glibc.link(endpoint, link) == 0, "link: \(errno)")
        chmod(link, 0o666)
        let bus = try #require(UInt64(observer.busKey, radix: 16))
        let script = """
            import socket, struct, sys
            sender, name = b":1.9999", sys.argv[3].encode()
            # WDB2: magic, bus, serial (high bit set), previous (0: none), flags (1: previous known), state
            ring = struct.pack(
                "<4sQIIBQBH", b"WDB2", int(sys.argv[2]), 0x80000007, 0, 1, int(sys.argv[4]), len(sender), len(name))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.sendto(ring + sender + name, sys.argv[1])
            """
        let nobody = try await runInBackground(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, link, "\(bus)",
                name, "11",
            ])
        #expect(nobody.status == 0, "the other user's ring was sent: \(nobody.stderr)")
        let mine = try await runInBackground("/usr/bin/python3", ["-c", script, link, "\(bus)", name, "12"])
        #expect(mine.status == 0, "\(mine.stderr)")
        // Only this user's ring (state 12) is delivered; the other's is counted as refused.
        // The Python rings have no signal behind them: received exactly; the sentinel's ring may
        // come after its signal.
        let finished = try await fixture.finishCounting(observer, posting: name)
        #expect(finished.deliveries == ["\(name) 12"] && finished.refused == 1, "\(finished)")
        #expect((1...2).contains(finished.received), "\(finished)")
    }

    @Test("dbus-monitor sees the same Posted signal for a rung post as for a bus-only one")
    func foreignObserversSeeTheSameSignal() async throws {
        let name = "com.example.doorbell.monitor"
        let observer = try await fixture.observe(name)
        let monitor = try ChildProcess(
            "/usr/bin/dbus-monitor",
            ["--address", fixture.bus.address.rawValue, "type='signal',member='Posted',arg0='\(name)'"])
        // dbus-monitor prints the NameLost/NameAcquired of becoming a monitor first: then it monitors.
        _ = try await within("dbus-monitor to start") { await monitor.stdoutLines.firstLine { $0.hasPrefix("signal") } }
        #expect(try await fixture.post(name, [8]) == "rang sent=1 stale=0")
        #expect(try await fixture.post(name, [8], ["--bus-only"]) == "rang sent=0 stale=0")
        let seen = try await within("both signals in dbus-monitor") { () -> [[String]] in
            var signals: [[String]] = []
            var current: [String]?
            for await line in monitor.stdoutLines {
                if line.hasPrefix("signal") {
                    if let current { signals.append(current) }
                    current = line.contains("member=Posted") ? [Self.withoutSerial(line)] : nil
                } else if current != nil {
                    current?.append(line.trimmingCharacters(in: .whitespaces))
                }
                if signals.count == 1, let current, current.count == 3 {
                    signals.append(current)
                    break
                }
            }
            return signals
        }
        monitor.signal(SIGTERM)
        #expect(seen.count == 2)
        #expect(seen.first == seen.last, "\(seen)")
        #expect(seen.first?.dropFirst() == ["string \"\(name)\"", "uint64 8"])
        let finished = try await fixture.finishCounting(observer, posting: name)
        #expect(finished.deliveries == ["\(name) 8", "\(name) 8"] && finished.refused == 0, "\(finished)")
    }

    /// A dbus-monitor header line without its time stamp, sender and serial (they differ by post).
    static func withoutSerial(_ line: String) -> String {
        line.split(separator: " ").filter {
            !$0.hasPrefix("time=") && !$0.hasPrefix("serial=") && !$0.hasPrefix("sender=")
        }
        .joined(separator: " ")
    }
}

@Suite("Doorbell: while the bus is stopped", .serialized)
struct DoorbellStoppedBusTests {
    @Test("a ring alone wakes the observer while the bus daemon is stopped; the signal after it is not delivered again")
    func ringWithoutTheBus() async throws {
        let fixture = try DoorbellFixture(bus: try TestBus())
        let name = "com.example.doorbell.stopped"
        let observer = try await fixture.observe(name, ["--absorbed"])
        let poster = try ChildProcess(
            fixture.peer, ["doorbell-post", fixture.bus.address.rawValue, name, "9", "--on-input", "--flush-wait"],
            environment: fixture.environment)
        _ = try await within("the poster to connect") { await poster.stderrLines.firstLine { $0 == "connected" } }
        fixture.bus.pause()
        // The poster rings, writes its signal into the stopped daemon's socket and waits for the flush.
        poster.write("post\n")
        let first = try await within("the rung delivery") { await observer.child.stdoutLines.firstLine { _ in true } }
        #expect(first == "\(name) 9")
        fixture.bus.resume()
        let posted = try await poster.finished("the poster")
        #expect(posted.status == 0, "\(posted.stderr)")
        // The sentinel by the bus alone: the one ring received was the post's, and its signal,
        // which came after it, was dropped by the connection undecoded.
        let finished = try await fixture.finishCounting(observer, posting: name, ["--bus-only"])
        #expect(finished == .init(deliveries: ["\(name) 9"], received: 1, refused: 0, absorbed: 1))
    }
}

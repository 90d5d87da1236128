// SPDX-License-Identifier: Apache-2.0
// Shared defaults (contract §5) across processes and on the bus: posts, observers, filtering by the
// daemon, catch-up after a bus restart, lost-update and lost-key runs, killed writers, a foreign
// Python writer.

import Dispatch
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeSystem
import WormholeTestSupport

enum DefaultsHarness {
    /// A handler that forwards every change into a stream, and that stream.
    static func recorder() -> (AsyncStream<GroupDefaults.Change>, @Sendable (GroupDefaults.Change) -> Void) {
        let (stream, continuation) = AsyncStream<GroupDefaults.Change>.makeStream()
        return (stream, { continuation.yield($0) })
    }

    /// Runs `wormhole-test-peer` to completion on a Dispatch thread.
    static func peer(_ arguments: [String], _ world: MessagingFixture) async throws -> ProcessOutput {
        try await MessagingHarness.run(
            try productPath("wormhole-test-peer"), arguments, environment: ["XDG_RUNTIME_DIR": world.state.path])
    }
}

@Suite(.sharedBus) struct DefaultsNotifyTests {
    let world: MessagingFixture
    init() throws { world = try MessagingFixture() }

    /// One `Posted` per changed key after the rename, on the key's bucket interface, with the
    /// suite's generation as state; an equal value posts nothing.
    @Test func oneBucketPostPerChangedKeyWithTheGeneration() async throws {
        let posted = try await world.rawPosted()
        let defaults = try world.defaults()
        try defaults.set(1, forKey: "a")
        let report = try defaults.transaction { suite in
            try suite.set(1, forKey: "a")  // unchanged: not posted
            try suite.set(2, forKey: "b/c")
            try suite.set("x", forKey: "it's")
        }
        #expect(report.changedKeys == ["b/c", "it's"])
        try defaults.set(1, forKey: "a")  // equal: posts nothing
        try defaults.removeObject(forKey: "b/c")
        let signals = try await MessagingHarness.next(4, from: posted, "the posts")
        let prefix = "\(world.group)/Preferences/\(world.group)/"
        #expect(
            try signals.map { try $0.string(at: 0) } == [prefix + "a", prefix + "b/c", prefix + "it's", prefix + "b/c"])
        for signal in signals {
            #expect(signal.interface.rawValue == NotifyContract.bucketInterface(for: try signal.string(at: 0)))
        }
        #expect(try signals[1].uint64(at: 1) == report.generation)
        #expect(try signals[2].uint64(at: 1) == report.generation)
        #expect(try signals[3].uint64(at: 1) > report.generation)
    }

    /// An observer of key A is never woken by writes to B: the daemon holds exactly the two
    /// exact-name rules, and the first delivery after 20 writes to B is A's.
    @Test(
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func keyObserverIsFilteredByTheDaemon() async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own, not
        // the suite's.
        let world = try MessagingFixture(bus: TestBus())
        let observing = try world.defaults()
        let (changes, record) = DefaultsHarness.recorder()
        let observer = try observing.listen(forKey: "a.key", handler: record)
        defer { observer.cancel() }
        let center = try observing.notificationCenter()
        #expect(try await MessagingHarness.settledRuleCount(world.bus, center.connection) == 2)

        let writer = try world.defaults()
        for n in 0..<20 { try writer.set(n, forKey: "b.key") }
        try writer.set("A", forKey: "a.key")
        let first = try await MessagingHarness.next(1, from: changes, "the change of a.key")
        #expect(first == [GroupDefaults.Change(key: "a.key", value: .string("A"), reason: .changed, isOwnWrite: true)])
        try writer.removeObject(forKey: "a.key")
        let removed = try await MessagingHarness.next(1, from: changes, "the removal of a.key")
        #expect(removed.first?.value == nil && removed.first?.key == "a.key")
        observer.cancel()
        #expect(try await MessagingHarness.settledRuleCount(world.bus, center.connection) == 0)
    }

    /// A suite observer gets every key (hostile ones too), one rule on the daemon; a transaction's
    /// changes are all visible when the first of them is delivered.
    @Test(
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func suiteObserverSeesEveryKeyAndWholeTransactions() async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own, not
        // the suite's.
        let world = try MessagingFixture(bus: TestBus())
        let observing = try world.defaults()
        let (changes, record) = DefaultsHarness.recorder()
        let seenTogether = Locked<[String: PropertyListValue?]>([:])
        let observer = try observing.listen { change in
            if change.key == "theme" {
                seenTogether.withLock { $0["themeVersion"] = try? observing.value(forKey: "themeVersion") }
            }
            record(change)
        }
        defer { observer.cancel() }
        #expect(try await MessagingHarness.settledRuleCount(world.bus, observing.notificationCenter().connection) == 1)

        let writer = try world.defaults()
        try writer.transaction { suite in
            try suite.set("dark", forKey: "theme")
            try suite.set(7, forKey: "themeVersion")
        }
        try writer.set(true, forKey: "ключ с/пробелом")
        let got = try await MessagingHarness.next(3, from: changes, "three changes")
        #expect(got.map(\.key) == ["theme", "themeVersion", "ключ с/пробелом"])
        #expect(got.map(\.value) == [.string("dark"), .integer(7), .bool(true)])
        #expect(seenTogether.withLock { $0["themeVersion"] } == .some(.integer(7)))
    }

    @Test func ownWritesCanBeIgnored() async throws {
        let defaults = try world.defaults()
        let (changes, record) = DefaultsHarness.recorder()
        let observer = try defaults.listen(
            forKey: "k", options: ObserverOptions(ignoresOwnPosts: true), handler: record)
        defer { observer.cancel() }
        try defaults.set(1, forKey: "k")
        let output = try await DefaultsHarness.peer(
            ["defaults-increment", world.root.path, world.group, "k", "1", world.bus.address.rawValue], world)
        #expect(output.status == 0, "\(output.stderr)")
        let got = try await MessagingHarness.next(1, from: changes, "the other process's write")
        #expect(got.first?.value == .integer(2) && got.first?.isOwnWrite == false)
    }

    @Test func streamStartsWithTheCurrentValue() async throws {
        let defaults = try world.defaults()
        try defaults.set("EUR", forKey: "currency")
        // Written to the bus before the observer's rule is added on the same connection (the
        // daemon keeps one connection's messages in order), so these posts cannot reach it: a post
        // still queued for the I/O thread could be sent after the rule (see the report of issue 18).
        defaults.flush()
        let stream = try await defaults.changes(forKey: "currency", initial: true)
        try world.defaults().set("USD", forKey: "currency")
        let got = try await MessagingHarness.next(2, from: stream, "the initial value and the change")
        #expect(got.map(\.reason) == [.initial, .changed])
        #expect(got.map(\.value) == [.string("EUR"), .string("USD")])
        let suite = try await defaults.changes(initial: true)
        let initial = try await MessagingHarness.next(1, from: suite, "the initial suite")
        #expect(initial.first?.key == "currency" && initial.first?.reason == .initial)
    }

    /// Observers survive a bus restart: while it is away they are woken through the
    /// `Preferences` directory (the changes another writer makes then arrive as `.changed`), and
    /// when it is back they are on the bus again, with nothing delivered twice.
    @Test func observersAreWokenThroughTheDirectoryWhileTheBusIsAway() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let world = try MessagingFixture(bus: TestBus())
        let observing = try world.defaults()
        try observing.set(1, forKey: "unchanged")
        // Written to the bus before the observer's rule is added on the same connection (the
        // daemon keeps one connection's messages in order), so these posts cannot reach it: a post
        // still queued for the I/O thread could be sent after the rule (see the report of issue 18).
        observing.flush()
        let (key, recordKey) = DefaultsHarness.recorder()
        let keyObserver = try observing.listen(forKey: "changed", handler: recordKey)
        defer { keyObserver.cancel() }
        let (suite, recordSuite) = DefaultsHarness.recorder()
        let suiteObserver = try observing.listen(handler: recordSuite)
        defer { suiteObserver.cancel() }
        let (sources, continuation) = AsyncStream<WakeSource>.makeStream()
        let watching = observing.onWakeSourceChange { continuation.yield($0) }
        defer { watching.cancel() }
        #expect(observing.wakeSource == .bus)

        world.bus.kill()
        _ = try await MessagingHarness.until(sources, "the switch to the directory") {
            if case .directory(let error) = $0 { return error.code == .disconnected }
            return false
        }
        let writer = try world.defaults()
        let report = try writer.transaction { suite in
            try suite.set("new", forKey: "changed")
            try suite.set(true, forKey: "added")
        }
        #expect(report.notificationError != nil)
        let changed = try await MessagingHarness.next(1, from: key, "the key's change through the directory")
        #expect(changed == [GroupDefaults.Change(key: "changed", value: .string("new"), reason: .changed)])
        let suiteChanged = try await MessagingHarness.next(2, from: suite, "the suite's changes through the directory")
        #expect(suiteChanged.map(\.key) == ["added", "changed"])
        #expect(suiteChanged.allSatisfy { $0.reason == .changed })

        try world.bus.start()
        _ = try await MessagingHarness.until(sources, "the return to the bus") { $0 == .bus }
        // Back on the bus: a post reaches the observers (a change the directory watch, now
        // stopped, would not report with the writer's generation), and nothing came twice.
        try writer.set(0, forKey: "sentinel")
        writer.flush()
        #expect(try await MessagingHarness.next(1, from: suite, "the sentinel").first?.key == "sentinel")
    }

    /// An observer started while there is no bus is woken through the `Preferences` directory by
    /// another process's write, and moves to the bus when it comes.
    @Test func observersStartedWithoutABusMoveToItWhenItComes() async throws {
        let world = try MessagingFixture(bus: TestBus())
        world.bus.kill()
        let observing = try world.defaults()
        let (key, recordKey) = DefaultsHarness.recorder()
        let observer = try observing.listen(forKey: "colour", handler: recordKey)
        defer { observer.cancel() }
        guard case .directory = observing.wakeSource else {
            Issue.record("expected the directory watch without a bus, got \(observing.wakeSource)")
            return
        }
        let (sources, continuation) = AsyncStream<WakeSource>.makeStream()
        let watching = observing.onWakeSourceChange { continuation.yield($0) }
        defer { watching.cancel() }
        // Another process writes while there is no bus: woken through the directory.
        try await world.runCLI(["defaults", "write", "--group", world.group, "colour", "\"red\""], allowFailure: true)
        #expect(
            try await MessagingHarness.next(1, from: key, "the write without a bus")
                == [GroupDefaults.Change(key: "colour", value: .string("red"), reason: .changed)])
        try world.bus.start()
        _ = try await MessagingHarness.until(sources, "the move to the bus") { $0 == .bus }
        try await world.runCLI(["defaults", "write", "--group", world.group, "colour", "\"blue\""])
        let onBus = try await MessagingHarness.next(1, from: key, "the write on the bus")
        #expect(onBus.map(\.value) == [.string("blue")])
        #expect(onBus.map(\.reason) == [.changed])
    }

    /// 4 processes × 50 `update` increments of one key end at exactly 200; 4 × 50 distinct keys
    /// are all kept.
    @Test func noIncrementAndNoKeyIsLostAcrossProcesses() async throws {
        let root = world.root.path
        let bus = world.bus.address.rawValue
        let (changes, record) = DefaultsHarness.recorder()
        let observer = try world.defaults().listen(forKey: "counter", handler: record)
        defer { observer.cancel() }
        try await withThrowingTaskGroup(of: ProcessOutput.self) { group in
            for peer in 0..<4 {
                group.addTask {
                    try await DefaultsHarness.peer(
                        ["defaults-increment", root, world.group, "counter", "50", bus], world)
                }
                group.addTask {
                    try await DefaultsHarness.peer(
                        ["defaults-set-distinct", root, world.group, "p\(peer)", "50", bus], world)
                }
            }
            for try await output in group { #expect(output.status == 0, "\(output.stderr)") }
        }
        let values = try world.defaults().values()
        #expect(values["counter"] == .integer(200))
        #expect(values.count == 201)
        // The observer's last delivery carries the final value.
        _ = try await MessagingHarness.until(changes, "the final count") { $0.value == .integer(200) }
    }

    /// A writer killed with SIGKILL at random instants leaves the old suite or the new one, always
    /// readable, with every key it acknowledged.
    @Test func killedWriterLeavesAReadableSuite() throws {
        let peer = try StoragePeer.executable()
        let defaults = try world.defaults()
        let arguments = ["defaults-write-loop", world.root.path, world.group, "seq"]
        var written = 0
        for kill in 0..<40 {
            let pid = try StoragePeer.spawnAndWaitForReady(peer, arguments)
            let deadline = ContinuousClock.now + .microseconds(Int.random(in: 0...5_000))
            while ContinuousClock.now < deadline {
                _ = try defaults.values()
            }
            #expect(Glibc.kill(pid, SIGKILL) == 0)
            _ = try StoragePeer.wait(pid)
            let values = try defaults.values()
            guard case .integer(let seq)? = values["seq"] else {
                Issue.record("kill \(kill): no counter in \(values)")
                return
            }
            // Each write was a transaction of `seq` and `pad-(seq % 5)`: the pair is consistent.
            #expect(values["pad-\(seq % 5)"] == .string(String(repeating: "x", count: seq % 700)), "kill \(kill)")
            written += seq + 1
        }
        #expect(written > 40, "the writers wrote more than their first transaction")
        let names = try FileManager.default.contentsOfDirectory(atPath: "\(world.root.path)/\(world.group)/Preferences")
        #expect(!names.contains { $0.contains("corrupt") })
    }

    /// A foreign program following the README (Python here): flock on the lock file, read the
    /// JSON, write a temporary file, rename it, post with `dbus-send`. Each reads the other's types.
    @Test func foreignPythonWriterInteroperates() async throws {
        let defaults = try world.defaults()
        try defaults.set(1.0, forKey: "double")
        try defaults.set(Data([1, 2, 3]), forKey: "data")
        try defaults.set(Date(timeIntervalSince1970: 1_700_000_000), forKey: "date")
        // Written to the bus before the observer's rule is added on the same connection (the
        // daemon keeps one connection's messages in order), so these posts cannot reach it: a post
        // still queued for the I/O thread could be sent after the rule (see the report of issue 18).
        defaults.flush()
        let (changes, record) = DefaultsHarness.recorder()
        let observer = try defaults.listen(handler: record)
        defer { observer.cancel() }

        let script = #"""
            import base64, fcntl, json, os, subprocess, sys
            path, bus, name_prefix = sys.argv[1], sys.argv[2], sys.argv[3]
            with open(path + ".lock", "a") as lock:
                os.chmod(path + ".lock", 0o600)
                fcntl.flock(lock, fcntl.LOCK_EX)
                with open(path) as f:
                    suite = json.load(f)
                assert isinstance(suite["double"], float), suite
                assert base64.b64decode(suite["data"]["$data"]) == bytes([1, 2, 3]), suite
                assert suite["date"]["$date"] == 1700000000, suite
                changed = {"py int": 41, "py float": 2.0, "py date": {"$date": 86400.5},
                           "py data": {"$data": base64.b64encode(b"\x00\xff").decode()},
                           "py url": {"$url": "https://example.org/x"}, "py list": [1, "two", {"k": True}]}
                suite.update(changed)
                tmp = os.path.join(os.path.dirname(path), ".py.tmp")
                with open(tmp, "w") as f:
                    os.fchmod(f.fileno(), 0o600)
                    json.dump(suite, f)
                os.replace(tmp, path)
            for key in changed:
                subprocess.run(["dbus-send", "--bus=" + bus, "--type=signal", "/org/wormhole/Notify1",
                                "org.wormhole.Notify1.Posted", "string:" + name_prefix + key], check=True)
            """#
        let output = try await MessagingHarness.run(
            "/usr/bin/env",
            [
                "python3", "-c", script, world.suitePath(), world.bus.address.rawValue,
                defaults.notificationPrefix.rawValue,
            ])
        #expect(output.status == 0, "\(output.stderr)")
        let got = try await MessagingHarness.next(6, from: changes, "the Python writer's changes")
        #expect(Set(got.map(\.key)) == ["py int", "py float", "py date", "py data", "py url", "py list"])
        #expect(try defaults.value(forKey: "py int") == .integer(41))
        #expect(try defaults.value(forKey: "py float") == .double(2.0))
        #expect(try defaults.value(forKey: "py date") == .date(Date(timeIntervalSince1970: 86400.5)))
        #expect(try defaults.value(forKey: "py data") == .data(Data([0, 255])))
        #expect(try defaults.value(forKey: "py url") == .url(URL(string: "https://example.org/x")!))
        #expect(
            try defaults.value(forKey: "py list")
                == .array([.integer(1), .string("two"), .dictionary(["k": .bool(true)])]))
        #expect(try (defaults.value(forKey: "double")?.doubleValue ?? 0) == 1.0)
    }

    /// A write that fails midway (the file-size limit, as on a full disk) is a thrown error; the
    /// old suite is intact and no temporary file is left.
    @Test func failedWriteLeavesTheOldSuiteAndNoTemporaryFile() async throws {
        let defaults = try world.defaults()
        try defaults.set("small", forKey: "kept")
        let before = world.suiteText()
        let output = try await DefaultsHarness.peer(
            ["defaults-write-limited", world.root.path, world.group, "big", "100000", "4096"], world)
        #expect(output.status == 1 && output.stderr.contains("File too large"), "\(output.stderr)")
        #expect(world.suiteText() == before)
        let names = try FileManager.default.contentsOfDirectory(atPath: "\(world.root.path)/\(world.group)/Preferences")
        #expect(names.sorted() == ["\(world.group).json", "\(world.group).json.changes", "\(world.group).json.lock"])
    }

    /// `.synchronized` durability writes the same suite (fsync'ed).
    @Test func synchronizedDurabilityWrites() throws {
        let defaults = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(world.group), durability: .synchronized,
            containerRoot: world.root.path,
            busAddress: world.bus.address, sharedStateDirectory: world.state.path, logger: MessagingHarness.logger)
        try defaults.update(forKey: "n") { _ in .integer(5) }
        #expect(try world.defaults().value(forKey: "n") == .integer(5))
    }
}

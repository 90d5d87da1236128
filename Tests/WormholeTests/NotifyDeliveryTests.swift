import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// The tests share the suite's bus: each observes names no other test posts.
@Suite("Notification delivery: filtering, prefixes, malformed signals, suspension, state", .sharedBus)
struct NotifyDeliveryTests {
    let bus: TestBus
    let table: NotifyTempDirectory
    init() throws {
        try self.init(bus: TestBus.shared())
    }

    init(bus: TestBus) throws {
        self.bus = bus
        table = try NotifyTempDirectory()
    }

    /// This harness on a bus of its own, for a test that counts what the process's one connection
    /// to its bus holds or received (every test of the suite shares the shared bus's).
    static func ownBus() throws -> NotifyDeliveryTests { try NotifyDeliveryTests(bus: TestBus()) }

    func center() throws -> DarwinNotificationCenter { try NotifyHarness.center(bus, table: table.path) }
    func name(_ string: String) -> NotificationName { NotifyHarness.name(string) }

    static let path = try! ObjectPath(NotifyContract.objectPath)
    static let posted = try! MemberName("Posted")
    static let plain = try! InterfaceName(NotifyContract.plainInterface)
    static func bucket(_ name: String) -> InterfaceName {
        try! InterfaceName(NotifyContract.bucketInterface(for: name))
    }

    @Test("malformed Posted signals never crash an observer, which keeps delivering the next good post")
    func malformedSignals() async throws {
        let target = "malformed/box/a"
        let observing = try center()
        let (handled, handler) = NotifyHarness.recorder()
        let observer = try observing.listen(
            name: name(target), on: .queue(DispatchQueue(label: "test.malformed")), handler: handler)
        defer { observer.cancel() }
        let (ioHandled, ioHandler) = NotifyHarness.recorder()
        let ioObserver = try observing.listen(name: name(target), on: .ioThread, handler: ioHandler)
        defer { ioObserver.cancel() }
        let prefixed = try await observing.notifications(prefix: name("malformed/box/"))
        // Everything named Posted reaches this connection; the observers' routes are offered each
        // signal their rules match, in the order sent.
        let everything = try await observing.connection.signals(matching: MatchRule(member: Self.posted))

        let sender = try BusConnection(address: bus.address)
        let bad: [(ObjectPath, InterfaceName, [DBusValue])] = [
            (Self.path, Self.plain, []),  // no arguments
            (Self.path, Self.bucket(target), []),
            (Self.path, Self.plain, [.int32(5)]),  // first argument not a string
            (Self.path, Self.bucket(target), [.int32(5), .string(target)]),
            (Self.path, Self.plain, [.uint64(1), .string(target)]),
            (Self.path, Self.plain, [.objectPath(try ObjectPath("/malformed/box/a"))]),
            // The wrong bucket and a foreign interface reach the prefix observer (its rule names no interface).
            (Self.path, Self.bucket("not the name"), [.string(target), .uint64(2)]),
            (Self.path, Self.bucket("not the name"), [.string(target)]),
            (Self.path, try InterfaceName("org.example.Other"), [.string(target), .uint64(3)]),
            // The wrong path reaches the name observers (their rules name no path).
            (try ObjectPath("/org/wormhole/Other"), Self.plain, [.string(target), .uint64(4)]),
        ]
        for (path, interface, arguments) in bad {
            try sender.emit(Signal(path: path, interface: interface, member: Self.posted, arguments: arguments))
        }
        // A hand-typed post with extra arguments is delivered, the extras ignored.
        try await NotifyHarness.dbusSend(
            bus, interface: NotifyContract.bucketInterface(for: target),
            ["string:\(target)", "uint64:9", "string:extra", "int32:-1"])
        let seen = try await NotifyHarness.first(from: everything, "the good post") { $0.arguments.count == 4 }
        #expect(seen.arguments[0] == .string(target))

        for source in [handled, ioHandled] {
            let delivered = try await NotifyHarness.next(1, from: source)
            #expect(delivered.map(\.name.rawValue) == [target])
            #expect(
                delivered.map(\.state) == [9], "the first delivery is the good post: every malformed one was dropped")
        }
        #expect(try await NotifyHarness.next(1, from: prefixed).map(\.state) == [9])

        // Still alive.
        let poster = try center()
        try poster.post(name(target), state: 10)
        #expect(try await NotifyHarness.next(1, from: handled).map(\.state) == [10])
        #expect(try await NotifyHarness.next(1, from: ioHandled).map(\.state) == [10])
        #expect(try await NotifyHarness.next(1, from: prefixed).map(\.state) == [10])
    }

    @Test("hand-typed posts on the plain interface and on the bucket both reach observers")
    func handTyped() async throws {
        let target = "com.example.app.refresh"
        let observing = try center()
        let stream = try await observing.notifications(name: name(target))
        try await NotifyHarness.dbusSend(bus, ["string:\(target)"])
        try await NotifyHarness.dbusSend(
            bus, interface: "org.wormhole.Notify1.BE6A2", ["string:\(target)", "uint64:7"])
        let delivered = try await NotifyHarness.next(2, from: stream)
        #expect(delivered.map(\.name.rawValue) == [target, target])
        #expect(delivered.map(\.state) == [nil, 7])
        #expect(delivered.map(\.isOwnPost) == [false, false])
        #expect(observing.lastState(of: name(target)) == 7)
    }

    @Test(
        "prefix observation delivers the family and nothing else",
        arguments: [
            (
                "group/box/", ["group/box/a", "group/box/deep/b"],
                ["group/boxer", "group/other/a", "group/box", "group/", "box/a"]
            ),
            (
                #"it's \ dir/"#, [#"it's \ dir/x"#, #"it's \ dir/y/z"#],
                [#"it's \ dirx"#, #"it's \ di/x"#, "it's/", #"its \ dir/x"#]
            ),
        ])
    func prefixFamily(prefix: String, family: [String], strangers: [String]) async throws {
        let observing = try center()
        let posting = try center()
        let stream = try await observing.notifications(prefix: name(prefix))
        let (handled, handler) = NotifyHarness.recorder()
        let observer = try observing.listen(
            prefix: name(prefix), on: .queue(DispatchQueue(label: "test.prefix")), handler: handler)
        defer { observer.cancel() }
        for stranger in strangers { try posting.post(name(stranger), state: 0) }
        for (index, member) in family.enumerated() { try posting.post(name(member), state: UInt64(index + 1)) }
        let sentinel = prefix + "sentinel"
        try posting.post(name(sentinel), state: 99)
        for source in [try await NotifyHarness.next(3, from: stream), try await NotifyHarness.next(3, from: handled)] {
            #expect(source.map(\.name.rawValue) == family + [sentinel])
            #expect(source.map(\.state) == [1, 2, 99])
        }
    }

    @Test("an observer of A is never woken for B")
    func neverWokenForOthers() async throws {
        // It counts the signals the process's one connection to its bus received: a bus of its
        // own, not the suite's.
        let this = try Self.ownBus()
        let observing = try this.center()
        let posting = try this.center()
        let stream = try await observing.notifications(name: name("iso/a"))
        for index in 0..<500 { try posting.post(name("iso/b"), state: UInt64(index)) }
        for index in 0..<500 { try posting.post(name("iso/a/\(index)")) }
        for index in 0..<3 { try posting.post(name("iso/a"), state: UInt64(index)) }
        let delivered = try await NotifyHarness.next(3, from: stream)
        #expect(delivered.map(\.state) == [0, 1, 2])
        #expect(observing.connection.signalsReceived == 3, "the bus daemon filtered every other name")
    }

    @Test(
        "two rules per observed name, one per prefix, shared between observers and removed with the last",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func ruleCounting() async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own, not
        // the suite's.
        let this = try Self.ownBus()
        let observing = try this.center()
        let connection = observing.connection
        let baseline = try await NotifyHarness.settledRuleCount(this.bus, connection)
        let first = try observing.listen(name: name("rules/x"), on: .ioThread) { _ in }
        #expect(try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline + 2)
        let stream = try await observing.notifications(name: name("rules/x"))
        let token = try observing.makeCheckToken(for: name("rules/x"))
        #expect(
            try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline + 2, "identical rules are shared"
        )
        let prefix = try observing.listen(prefix: name("rules/"), on: .ioThread) { _ in }
        #expect(try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline + 3)
        let other = try observing.listen(name: name("rules/y"), on: .ioThread) { _ in }
        #expect(try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline + 5)

        first.cancel()
        token.cancel()
        #expect(
            try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline + 5,
            "the stream still holds rules/x")
        let iteration = Task { for await _ in stream {} }
        iteration.cancel()
        await iteration.value
        #expect(try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline + 3)
        prefix.cancel()
        other.cancel()
        #expect(try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline)
    }

    @Test("posts while suspended coalesce into one delivery with the count and the latest state")
    func suspension() async throws {
        let observing = try center()
        let posting = try center()
        let target = name("suspend/a")
        let (handled, handler) = NotifyHarness.recorder()
        let observer = try observing.listen(
            name: target, on: .queue(DispatchQueue(label: "test.suspend")), handler: handler)
        defer { observer.cancel() }
        let (witnessed, witness) = NotifyHarness.recorder()
        let witnessObserver = try observing.listen(name: name("suspend/witness"), on: .ioThread, handler: witness)
        defer { witnessObserver.cancel() }

        observer.suspend()
        #expect(observer.isSuspended)
        for state in 1...5 { try posting.post(target, state: UInt64(state)) }
        // Signals are dispatched in order on one thread: once the witness has its post, the
        // suspended observer has been offered all five.
        try posting.post(name("suspend/witness"))
        _ = try await NotifyHarness.next(1, from: witnessed, "the witness post")
        observer.resume()
        #expect(!observer.isSuspended)
        try posting.post(target, state: 6)
        let delivered = try await NotifyHarness.next(2, from: handled)
        #expect(delivered.map(\.coalescedCount) == [5, 1])
        #expect(delivered.map(\.state) == [5, 6])
        #expect(delivered.map(\.reason) == [.posted, .posted])
        #expect(delivered.map(\.isOwnPost) == [true, true], "posts from this process are delivered by default")

        // Resuming with nothing pending delivers nothing.
        observer.suspend()
        observer.resume()
        try posting.post(target, state: 7)
        #expect(try await NotifyHarness.next(1, from: handled).map(\.coalescedCount) == [1])
    }

    @Test("ignoresOwnPosts skips this process's posts but delivers another process's")
    func ignoringOwnPosts() async throws {
        let observing = try center()
        let other = try center()
        let target = name("own/a")
        let (ignoring, ignoringHandler) = NotifyHarness.recorder()
        let ignoringObserver = try observing.listen(
            name: target, on: .queue(DispatchQueue(label: "test.ignoring")),
            options: ObserverOptions(ignoresOwnPosts: true),
            handler: ignoringHandler)
        defer { ignoringObserver.cancel() }
        let (all, allHandler) = NotifyHarness.recorder()
        let allObserver = try observing.listen(
            name: target, on: .queue(DispatchQueue(label: "test.all")), handler: allHandler)
        defer { allObserver.cancel() }
        let stream = try await observing.notifications(name: target, options: ObserverOptions(ignoresOwnPosts: true))

        try observing.post(target, state: 1)
        // Posts from two connections have no order on the bus (dbus-broker may route the second
        // first): wait for the first delivery before the second post.
        var own = try await NotifyHarness.next(1, from: all)
        try other.post(target, state: 2)
        own += try await NotifyHarness.next(1, from: all)
        #expect(own.map(\.state) == [1, 2])
        #expect(own.map(\.isOwnPost) == [true, true])

        let runtime = try NotifyTempDirectory()
        let output = try await NotifyHarness.run(
            try productPath("wormholectl"),
            ["post", target.rawValue, "--state", "3", "--bus-address", bus.address.rawValue],
            environment: ["XDG_RUNTIME_DIR": runtime.path])
        #expect(output.status == 0, "\(output.stderr)")
        for source in [ignoring, all] {
            let foreign = try await NotifyHarness.next(1, from: source)
            #expect(foreign.map(\.state) == [3])
            #expect(foreign.map(\.isOwnPost) == [false])
        }
        #expect(try await NotifyHarness.next(1, from: stream).map(\.state) == [3])
    }

    @Test("lastState, sharedState, and a post without state carrying the last posted state")
    func states() async throws {
        let target = name("state/a")
        let observing = try center()
        let posting = try center()
        let bystander = try center()  // shares the table, never posts this name before
        let stream = try await observing.notifications(name: target)
        #expect(observing.lastState(of: target) == nil)
        #expect(observing.sharedState(of: target) == nil)

        try posting.post(target, state: 7)
        #expect(posting.lastState(of: target) == 7)
        #expect(observing.sharedState(of: target) == 7, "the shared table answers at once, before any signal")
        #expect(bystander.lastState(of: target) == nil, "lastState only knows what this center saw")
        #expect(try await NotifyHarness.next(1, from: stream).map(\.state) == [7])
        #expect(observing.lastState(of: target) == 7, "a received state is remembered")

        try posting.post(target)
        try bystander.post(target)
        #expect(try await NotifyHarness.next(2, from: stream).map(\.state) == [7, 7], "the state belongs to the name")

        try await NotifyHarness.dbusSend(bus, ["string:\(target.rawValue)"])
        #expect(try await NotifyHarness.next(1, from: stream).map(\.state) == [nil])
        #expect(observing.lastState(of: target) == 7, "a post without state leaves the state alone")
        #expect(observing.sharedState(of: target) == 7)

        try await NotifyHarness.dbusSend(
            bus, interface: target.bucketInterface, ["string:\(target.rawValue)", "uint64:8"])
        #expect(try await NotifyHarness.next(1, from: stream).map(\.state) == [8])
        #expect(observing.lastState(of: target) == 8)
        #expect(observing.sharedState(of: target) == 7, "dbus-send posts are not in the table")

        // A center with its own table, which never saw a state for the name, posts 0.
        let elsewhere = try NotifyTempDirectory()
        let loner = try NotifyHarness.center(bus, table: elsewhere.path)
        try loner.post(target)
        #expect(try await NotifyHarness.next(1, from: stream).map(\.state) == [0])
        #expect(loner.sharedState(of: target) == nil)
        try loner.post(target, state: 9)
        try loner.post(target)
        #expect(try await NotifyHarness.next(2, from: stream).map(\.state) == [9, 9])
        #expect(loner.sharedState(of: target) == 9)
        #expect(observing.sharedState(of: target) == 7, "separate tables are separate")
    }
}

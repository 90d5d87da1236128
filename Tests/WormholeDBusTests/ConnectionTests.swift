// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Synchronization
import Testing
import WormholeDBus
import WormholeTestSupport

let testPath = try! ObjectPath("/org/wormhole/Test")
let testInterface = try! InterfaceName("org.wormhole.Test")
let said = try! MemberName("Said")

func said(_ arguments: DBusValue...) -> Signal {
    Signal(path: testPath, interface: testInterface, member: said, arguments: arguments)
}

/// Collects the next `count` signals from a stream, in order.
func collect(_ stream: SignalStream, count: Int) async -> [Signal] {
    var result: [Signal] = []
    for await signal in stream {
        result.append(signal)
        if result.count == count { break }
    }
    return result
}

/// The tests share the suite's bus, each on an interface of its own; the two that kill the bus
/// have a bus of their own.
@Suite("Bus connections on a private dbus-daemon", .sharedBus)
struct ConnectionTests {
    let bus: TestBus
    /// This test's interface, which no other test of the suite emits on.
    let interface: InterfaceName
    init() throws {
        bus = try TestBus.shared()
        interface = try InterfaceName(uniqueName(testInterface.rawValue))
    }

    /// A `Said` signal on this test's interface.
    func signal(_ arguments: DBusValue...) -> Signal {
        Signal(path: testPath, interface: interface, member: said, arguments: arguments)
    }

    @Test("two connections in one process exchange a signal")
    func twoConnections() async throws {
        let sender = try BusConnection(address: bus.address)
        let receiver = try BusConnection(address: bus.address)
        let stream = try await receiver.signals(matching: MatchRule(interface: interface, member: said))
        try sender.emit(
            signal(
                .string("hello"), .uint64(42), .bytes([1, 2, 3]), .boolean(true), .int32(-7),
                .double(2.5), .strings(["a", "b"]), .objectPath(testPath), .byte(9)))
        let received = await collect(stream, count: 1)
        let signal = try #require(received.first)
        #expect(signal.sender == sender.uniqueName)
        #expect(try signal.string(at: 0) == "hello")
        #expect(try signal.uint64(at: 1) == 42)
        #expect(try signal.bytes(at: 2) == [1, 2, 3])
        #expect(
            signal.arguments[3...] == [
                .boolean(true), .int32(-7), .double(2.5), .strings(["a", "b"]),
                .objectPath(testPath), .byte(9),
            ])
    }

    @Test("arg0 rules deliver only matching signals")
    func arg0Filtering() async throws {
        let sender = try BusConnection(address: bus.address)
        let receiver = try BusConnection(address: bus.address)
        let stream = try await receiver.signals(matching: MatchRule(interface: interface, arguments: [0: "wanted"]))
        try sender.emit(signal(.string("unwanted")))
        try sender.emit(signal(.string("wanted"), .uint64(1)))
        try sender.emit(signal(.string("wanted-not")))
        try sender.emit(signal(.string("wanted"), .uint64(2)))
        let received = await collect(stream, count: 2)
        #expect(try received.map { try $0.uint64(at: 1) } == [1, 2])
        #expect(receiver.signalsReceived == 2, "the daemon filtered; the connection saw only matches")
    }

    @Test("arg0path rules deliver a prefix family")
    func arg0PathFiltering() async throws {
        let sender = try BusConnection(address: bus.address)
        let receiver = try BusConnection(address: bus.address)
        let stream = try await receiver.signals(
            matching: MatchRule(interface: interface, argumentPaths: [0: "group/box/"]))
        for name in ["group/box/a", "group/other/a", "group/boxer", "group/box/deep/b", "group/box/"] {
            try sender.emit(signal(.string(name)))
        }
        let received = await collect(stream, count: 3)
        #expect(try received.map { try $0.string(at: 0) } == ["group/box/a", "group/box/deep/b", "group/box/"])
    }

    @Test(
        "quotes and backslashes in rule values work end to end",
        arguments: [
            "it's", #"back\slash"#, #"both '\' mixed''"#, "plain",
            // A quote followed by a combining mark is one Character: still escaped (found by Tests/fuzz.sh).
            "p'\u{0651}", "x'\u{0651},arg1='y",
        ])
    func escaping(name: String) async throws {
        let sender = try BusConnection(address: bus.address)
        let receiver = try BusConnection(address: bus.address)
        let stream = try await receiver.signals(matching: MatchRule(interface: interface, arguments: [0: name]))
        try sender.emit(signal(.string(name + "x")))
        try sender.emit(signal(.string(name)))
        let received = await collect(stream, count: 1)
        #expect(try received.first?.string(at: 0) == name)
        #expect(receiver.signalsReceived == 1)
    }

    @Test("match rule string form escapes a quote as '\\''")
    func ruleString() throws {
        let rule = MatchRule(
            interface: testInterface, member: said, arguments: [0: "it's"], argumentPaths: [1: #"a\b/"#])
        #expect(
            rule.description
                == #"type='signal',interface='org.wormhole.Test',member='Said',arg0='it'\''s',arg1path='a\b/'"#)
    }

    @Test("wrong argument types are reported, not crashed on")
    func typeMismatch() async throws {
        let sender = try BusConnection(address: bus.address)
        let receiver = try BusConnection(address: bus.address)
        let stream = try await receiver.signals(matching: MatchRule(interface: interface, member: said))
        try sender.emit(signal(.int32(5)))
        try sender.emit(signal())
        let received = await collect(stream, count: 2)
        #expect(throws: BusError.self) { try received[0].string(at: 0) }
        do {
            _ = try received[0].string(at: 0)
        } catch let error as BusError {
            #expect(error.code == .typeMismatch)
            #expect(error.message.contains("int32 5"))
        }
        #expect(throws: BusError.self) { try received[1].uint64(at: 0) }
    }

    @Test("a bad or unreachable address produces an error naming it")
    func badAddress() throws {
        #expect { try BusAddress("nonsense-without-colon") } throws: { error in
            let error = error as? BusError
            return error?.code == .invalidAddress && error?.message.contains("nonsense-without-colon") == true
        }
        let missing = try BusAddress("unix:path=/nonexistent/wormhole/bus")
        #expect { try BusConnection(address: missing) } throws: { error in
            let error = error as? BusError
            return error?.code == .connectionFailed && error?.message.contains("/nonexistent/wormhole/bus") == true
        }
        #expect { try BusAddress.session(environment: [:]) } throws: { ($0 as? BusError)?.code == .noSessionBus }
    }

    @Test("invalid names and strings are refused with the value named")
    func invalidValues() throws {
        #expect { try ObjectPath("no/slash") } throws: { ($0 as? BusError)?.message.contains("'no/slash'") == true }
        #expect { try InterfaceName("nodots") } throws: { ($0 as? BusError)?.code == .invalidInterfaceName }
        #expect { try MemberName("has.dot") } throws: { ($0 as? BusError)?.code == .invalidMemberName }
        #expect { try ObjectPath("/a\0b") } throws: { ($0 as? BusError)?.message.contains("NUL") == true }
        let connection = try BusConnection(address: bus.address)
        #expect { try connection.emit(signal(.string("nul\0inside"))) } throws: {
            ($0 as? BusError)?.code == .invalidString
        }
    }

    @Test(
        "ending an iteration, cancelling its task or dropping a stream removes the rule",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func streamOwnsRule() async throws {
        let receiver = try BusConnection(address: bus.address)
        let baseline = try bus.matchRuleCount(of: receiver.uniqueName)
        do {
            let stream = try await receiver.signals(matching: MatchRule(interface: interface, arguments: [0: "one"]))
            #expect(try bus.matchRuleCount(of: receiver.uniqueName) == baseline + 1)
            _ = stream
        }
        try await waitForRuleCount(receiver, baseline)

        let stream = try await receiver.signals(matching: MatchRule(interface: interface, arguments: [0: "two"]))
        #expect(try bus.matchRuleCount(of: receiver.uniqueName) == baseline + 1)
        let task = Task { for await _ in stream {} }
        task.cancel()
        await task.value
        try await waitForRuleCount(receiver, baseline)
    }

    /// Rule removal is asynchronous; round-trip a rule through the same connection, which the
    /// daemon handles in order, and then check.
    func waitForRuleCount(_ connection: BusConnection, _ expected: Int) async throws {
        let probe = MatchRule(interface: interface, arguments: [0: "probe"])
        try await connection.addMatch(probe)
        try await connection.removeMatch(probe)
        #expect(try bus.matchRuleCount(of: connection.uniqueName) == expected)
    }

    @Test(
        "identical rules are shared and counted",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func ruleReferenceCounting() async throws {
        let receiver = try BusConnection(address: bus.address)
        let baseline = try bus.matchRuleCount(of: receiver.uniqueName)
        let rule = MatchRule(interface: interface, arguments: [0: "shared"])
        try await receiver.addMatch(rule)
        try await receiver.addMatch(rule)
        #expect(try bus.matchRuleCount(of: receiver.uniqueName) == baseline + 1)
        try await receiver.removeMatch(rule)
        #expect(try bus.matchRuleCount(of: receiver.uniqueName) == baseline + 1)
        try await receiver.removeMatch(rule)
        #expect(try bus.matchRuleCount(of: receiver.uniqueName) == baseline)
    }

    @Test("callback handlers run on the chosen queue and stop when cancelled")
    func callbackHandlers() async throws {
        let sender = try BusConnection(address: bus.address)
        let receiver = try BusConnection(address: bus.address)
        let queue = DispatchQueue(label: "test.handler")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let (events, continuation) = AsyncStream<(UInt64, Bool)>.makeStream()
        // dbus-broker has no Debug.Stats: there, the cancel is proven by the third signal alone.
        let baseline = TestBusDaemon.isBroker ? nil : try bus.matchRuleCount(of: receiver.uniqueName)
        let subscription = try receiver.subscribe(MatchRule(interface: interface, member: said), on: .queue(queue)) {
            signal in
            continuation.yield(((try? signal.uint64(at: 0)) ?? 0, DispatchQueue.getSpecific(key: key) == 7))
        }
        try sender.emit(signal(.uint64(1)))
        var iterator = events.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first?.0 == 1)
        #expect(first?.1 == true, "delivered on the caller's queue")
        subscription.cancel()
        if let baseline { try await waitForRuleCount(receiver, baseline) }
        try sender.emit(signal(.uint64(2)))
        // emit hands the signal to the sender's I/O thread: wait until it is on the bus, so that
        // it cannot reach the rule added next.
        sender.flush()
        // A second, still-active subscription proves the signal was sent and delivered after the cancel.
        let second = try await receiver.signals(matching: MatchRule(interface: interface, member: said))
        try sender.emit(signal(.uint64(3)))
        let after = await collect(second, count: 1)
        #expect(try after.first?.uint64(at: 0) == 3)
        continuation.finish()
        var rest: [UInt64] = []
        while let event = await iterator.next() { rest.append(event.0) }
        #expect(rest.isEmpty, "a cancelled handler is never called again")
    }

    @Test("emitting from many threads while another waits: every signal arrives")
    func concurrentEmit() async throws {
        let receiver = try BusConnection(address: bus.address)
        let sender = try BusConnection(address: bus.address)
        let stream = try await receiver.signals(
            matching: MatchRule(interface: interface, member: said), bufferLimit: 100_000)
        let threads = 8
        let perThread = 500
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread {
                try! sender.emit(signal(.uint64(UInt64(thread * perThread + index))))
            }
        }
        let received = await collect(stream, count: threads * perThread)
        #expect(Set(try received.map { try $0.uint64(at: 0) }) == Set((0..<UInt64(threads * perThread))))
    }

    @Test("the bus daemon going away is detected and streams finish")
    func disconnectDetected() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let bus = try TestBus()
        let connection = try BusConnection(address: bus.address)
        let events = connection.events()
        let stream = try await connection.signals(matching: MatchRule(interface: interface))
        bus.kill()
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == .disconnected)
        for await _ in stream {}
        #expect(connection.isConnected == false)
        #expect { try connection.emit(signal()) } throws: { ($0 as? BusError)?.code == .disconnected }
    }

    @Test("automatic reconnection re-adds rules after the daemon restarts at the same address")
    func reconnect() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let bus = try TestBus()
        let receiver = try BusConnection(address: bus.address, reconnect: .automatic)
        let events = receiver.events()
        let stream = try await receiver.signals(matching: MatchRule(interface: interface, member: said))
        var eventIterator = events.makeAsyncIterator()
        bus.kill()
        #expect(await eventIterator.next() == .disconnected)
        try bus.start()
        #expect(await eventIterator.next() == .reconnected)
        let sender = try BusConnection(address: bus.address)
        try sender.emit(signal(.string("after restart")))
        let received = await collect(stream, count: 1)
        #expect(try received.first?.string(at: 0) == "after restart")
    }
}

/// The tests share the suite's bus, each on an interface of its own.
@Suite("Signals across processes", .sharedBus)
struct CrossProcessTests {
    let bus: TestBus
    /// This test's interface, which no other test of the suite emits on.
    let interface: InterfaceName
    init() throws {
        bus = try TestBus.shared()
        interface = try InterfaceName(uniqueName(testInterface.rawValue))
    }

    /// A `Said` signal on this test's interface.
    func signal(_ arguments: DBusValue...) -> Signal {
        Signal(path: testPath, interface: interface, member: said, arguments: arguments)
    }

    @Test("a signal emitted here reaches a listener in another process")
    func toChild() async throws {
        let child = try ChildProcess(
            try productPath("wormhole-test-peer"),
            ["listen", bus.address.rawValue, interface.rawValue, "2", "for-child"])
        #expect(await child.stderrLines.firstLine { $0 == "ready" } == "ready")
        let sender = try BusConnection(address: bus.address)
        try sender.emit(signal(.string("not-for-child"), .uint64(0)))
        try sender.emit(signal(.string("for-child"), .uint64(1)))
        try sender.emit(signal(.string("for-child"), .uint64(2)))
        let output = child.wait()
        #expect(output.status == 0)
        #expect(output.stdout == "s:for-child t:1\ns:for-child t:2\n")
    }

    @Test("a signal emitted by another process reaches a stream here")
    func fromChild() async throws {
        let receiver = try BusConnection(address: bus.address)
        let stream = try await receiver.signals(matching: MatchRule(interface: interface, member: said))
        let output = try run(
            try productPath("wormhole-test-peer"),
            [
                "emit", bus.address.rawValue, testPath.rawValue, interface.rawValue, said.rawValue,
                "s:from child", "t:18446744073709551615",
            ])
        #expect(output.status == 0, "\(output.stderr)")
        let received = await collect(stream, count: 1)
        #expect(try received.first?.string(at: 0) == "from child")
        #expect(try received.first?.uint64(at: 1) == UInt64.max)
    }
}

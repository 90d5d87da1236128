// SPDX-License-Identifier: Apache-2.0
// Contract v1.2 §1: a signal a send call accepted is on the bus before the sending process exits
// normally, with or without a flush. Children that send once and exit (releasing the facade
// first, keeping it until exit, or returning from `main`) while a listener here counts what
// reached the bus; a sentinel sent after the last child exited marks the end (the bus delivers
// in order, so whatever a child put on the bus before it exited arrives before it).

import Foundation
import Synchronization
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

@Suite("Sends survive the sender's exit", .serialized)
struct ExitDrainTests {
    static let perKind = 100
    static let parallel = 4

    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture(bus: TestBus()) }

    /// The notification name the child's send produces (see `send-once` in the test peer).
    static func expectedName(kind: String, group: String, identifier: String) -> String {
        switch kind {
        case "journal": "\(group)/wormhole/\(identifier)/journal"
        case "post": "\(group)/post/\(identifier)"
        case "defaults": "\(group)/Preferences/\(group)/\(identifier)"
        default: "\(group)/wormhole/\(identifier)"
        }
    }

    /// Emits a sentinel, confirmed by the bus, and returns the signals `signals` got before it,
    /// with the name each carries: everything the children put on the bus (the bus delivers in order).
    func untilSentinel(_ signals: SignalStream) async throws -> [(name: String, signal: Signal)] {
        let sentinel = try BusConnection(address: fixture.bus.address)
        try sentinel.emit(
            Signal(
                path: try ObjectPath("/org/wormhole/Notify1"), interface: try InterfaceName("org.wormhole.Notify1"),
                member: try MemberName("Posted"), arguments: [.string("sentinel")]))
        #expect(sentinel.flush() == nil)
        var before: [(name: String, signal: Signal)] = []
        for await signal in signals {
            guard case .string(let name)? = signal.arguments.first else { continue }
            if name == "sentinel" { break }
            before.append((name, signal))
        }
        return before
    }

    @Test(
        "100 children per kind send once and exit without a flush: every signal reaches the bus",
        arguments: ["mailbox", "journal", "post", "defaults", "transient"])
    func shortLivedSenders(kind: String) async throws {
        let group = fixture.group
        let member = kind == "transient" ? "Message" : "Posted"
        let listener = try BusConnection(address: fixture.bus.address)
        let signals = try await listener.signals(
            matching: MatchRule(path: try ObjectPath("/org/wormhole/Notify1")), bufferLimit: 100_000)
        let peer = try productPath("wormhole-test-peer")
        let modes = ["release", "keep", "return"]
        var failures: [String] = []
        for start in stride(from: 0, to: Self.perKind, by: Self.parallel) {
            let children = try (start..<min(start + Self.parallel, Self.perKind)).map { n in
                try ChildProcess(
                    peer,
                    [
                        "send-once", kind, fixture.root.path, group, "id\(n)", fixture.bus.address.rawValue,
                        modes[n % modes.count],
                    ],
                    environment: ["XDG_RUNTIME_DIR": fixture.state.path])
            }
            for child in children {
                let output = child.wait()
                if output.status != 0 { failures.append("exit \(output.status): \(output.stderr)") }
            }
        }
        #expect(failures.isEmpty, "children failed: \(failures.prefix(3))")
        var seen = Set<String>()
        for (name, signal) in try await untilSentinel(signals) where signal.member.rawValue == member {
            seen.insert(name)
        }
        let expected = Set(
            (0..<Self.perKind).map { Self.expectedName(kind: kind, group: group, identifier: "id\($0)") })
        #expect(
            seen.intersection(expected).count == Self.perKind,
            "\(kind): \(expected.subtracting(seen).count) of \(Self.perKind) missing")
    }

    /// The second append of a process goes out on the connection's I/O thread (the first one
    /// connected): its post is on the bus before the process exits, whether it appended on the
    /// main thread and called `exit(0)`, or appended in an `.ioThread` handler and exited there.
    @Test(
        "a journal's later append, then exit without a flush (main thread, or an I/O-thread handler): its post is on the bus",
        arguments: ["main", "handler"])
    func journalPostOnTheIOThreadBeforeExit(mode: String) async throws {
        let group = fixture.group
        let listener = try BusConnection(address: fixture.bus.address)
        let signals = try await listener.signals(
            matching: MatchRule(path: try ObjectPath("/org/wormhole/Notify1")), bufferLimit: 10_000)
        let peer = try productPath("wormhole-test-peer")
        let count = 10
        for n in 0..<count {
            let output = try ChildProcess(
                peer, ["journal-exit", mode, fixture.root.path, group, "j\(n)", fixture.bus.address.rawValue],
                environment: ["XDG_RUNTIME_DIR": fixture.state.path]
            ).wait()
            #expect(output.status == 0, "\(output.stderr)")
        }
        var second = Set<String>()
        for (name, signal) in try await untilSentinel(signals) {
            if signal.arguments.count > 1, case .uint64(2) = signal.arguments[1] { second.insert(name) }
        }
        let expected = Set((0..<count).map { Self.expectedName(kind: "journal", group: group, identifier: "j\($0)") })
        #expect(
            second.intersection(expected).count == count,
            "\(mode): no post of record 2 for \(expected.subtracting(second).sorted())")
    }

    @Test("a process that exits from a handler on the I/O thread, right after posting there: the post is on the bus")
    func exitOnTheIOThread() async throws {
        let listener = try BusConnection(address: fixture.bus.address)
        let signals = try await listener.signals(
            matching: MatchRule(path: try ObjectPath("/org/wormhole/Notify1")), bufferLimit: 10_000)
        let peer = try productPath("wormhole-test-peer")
        let count = 20
        for n in 0..<count {
            let output = try ChildProcess(
                peer, ["post-exit-in-handler", fixture.bus.address.rawValue, "com.example.exit.n\(n)"],
                environment: ["XDG_RUNTIME_DIR": fixture.state.path]
            ).wait()
            #expect(output.status == 0, "\(output.stderr)")
        }
        let seen = Set(try await untilSentinel(signals).map(\.name))
        #expect(seen.intersection((0..<count).map { "com.example.exit.n\($0)" }).count == count)
    }

    @Test(
        "a flush reports a bus that does not answer, within its timeout, and a closed connection's drain does not hang exit"
    )
    func flushIsBounded() async throws {
        let sender = try BusConnection(address: fixture.bus.address)
        try sender.emit(
            Signal(
                path: try ObjectPath("/org/wormhole/Notify1"), interface: try InterfaceName("org.wormhole.Notify1"),
                member: try MemberName("Posted"), arguments: [.string("before-pause")]))
        #expect(sender.flush(timeout: .seconds(5)) == nil)
        #expect(sender.flush(timeout: .seconds(5)) == nil, "nothing unconfirmed: returns at once")
        fixture.bus.pause()
        defer { fixture.bus.resume() }
        try sender.emit(
            Signal(
                path: try ObjectPath("/org/wormhole/Notify1"), interface: try InterfaceName("org.wormhole.Notify1"),
                member: try MemberName("Posted"), arguments: [.string("during-pause")]))
        let error = sender.flush(timeout: .milliseconds(300))
        #expect(error?.code == .timedOut)
    }
}

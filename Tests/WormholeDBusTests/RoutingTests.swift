// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Synchronization
import Testing
import WormholeDBus
import WormholeSystem
import WormholeTestSupport

/// Each delivery is decided once, in the connection's route table, by the bus daemon's rules.
/// The tests share the suite's bus, each on an interface of its own (and the owner's name is
/// this suite's alone); the one that kills the bus has a bus of its own.
@Suite("Routing signals to subscriptions", .sharedBus)
struct RoutingTests {
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

    static let ownerName = "org.wormhole.Test.Owner"

    /// Takes a well-known name for `connection` (RequestName, replacing nobody).
    static func own(_ name: String, by connection: BusConnection) async throws {
        let reply = try await connection.callBusDaemon("RequestName", [.string(name), .uint32(4)])
        #expect(reply.first == .uint32(1), "primary owner of \(name)")
    }

    @Test("a rule with a well-known sender delivers the owner's signals, and follows the name to a new owner")
    func wellKnownSender() async throws {
        let owner = try BusConnection(address: bus.address)
        let other = try BusConnection(address: bus.address)
        let receiver = try BusConnection(address: bus.address)
        try await Self.own(Self.ownerName, by: owner)
        let fromOwner = try await receiver.signals(
            matching: MatchRule(sender: Self.ownerName, interface: interface, member: said))
        // A second subscription without a sender makes the daemon send this connection every `said`.
        let everything = try await receiver.signals(matching: MatchRule(interface: interface, member: said))
        try other.emit(signal(.uint64(1)))
        try owner.emit(signal(.uint64(2)))
        // Two senders: the daemon may deliver them in either order.
        #expect(Set(try await next(2, from: everything, "both signals").map { try $0.uint64(at: 0) }) == [1, 2])
        #expect(try await next(1, from: fromOwner, "the owner's signal").map { try $0.uint64(at: 0) } == [2])

        // The name moves to `other`: its signals now match the rule, the old owner's do not.
        _ = try await owner.callBusDaemon("ReleaseName", [.string(Self.ownerName)])
        try await Self.own(Self.ownerName, by: other)
        try await confirmOwner(other.uniqueName, on: receiver)
        try owner.emit(signal(.uint64(3)))
        try other.emit(signal(.uint64(4)))
        #expect(Set(try await next(2, from: everything, "both signals").map { try $0.uint64(at: 0) }) == [3, 4])
        #expect(try await next(1, from: fromOwner, "the new owner's signal").map { try $0.uint64(at: 0) } == [4])
    }

    /// Waits until `receiver` has processed the owner change: the daemon queued the
    /// `NameOwnerChanged` to it before the reply to this later call, so the reply proves it.
    private func confirmOwner(_ unique: String, on receiver: BusConnection) async throws {
        let owner = try await receiver.callBusDaemon("GetNameOwner", [.string(Self.ownerName)])
        #expect(owner.first == .string(unique))
    }

    @Test("without reconnection, subscribing after the bus went away fails at once instead of waiting forever")
    func subscribeAfterLoss() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let bus = try TestBus()
        let connection = try BusConnection(address: bus.address, reconnect: .never)
        let rule = MatchRule(interface: interface, member: said)
        let events = connection.events()
        let stream = try await connection.signals(matching: rule)
        bus.kill()
        #expect(try await next(1, from: events, "the disconnection") == [.disconnected])
        for await _ in stream {}
        // The same rule was active before the loss: this used to wait for an answer nothing would send.
        let outcome = try await race("the subscription") {
            do {
                _ = try await connection.signals(matching: rule)
                return "subscribed"
            } catch let error as BusError {
                return "\(error.code)"
            }
        }
        #expect(outcome == "disconnected")
        let blocking = try await race("the subscription") {
            do {
                _ = try connection.subscribe(rule) { _ in }
                return "subscribed"
            } catch let error as BusError {
                return "\(error.code)"
            }
        }
        #expect(blocking == "disconnected")
    }

    @Test("thousands of subscriptions in one connection: each signal reaches exactly its own")
    func manySubscriptions() async throws {
        let receiver = try BusConnection(address: bus.address)
        let sender = try BusConnection(address: bus.address)
        let counts = Locked([Int: Int]())
        var subscriptions: [SignalSubscription] = []
        for index in 0..<2_000 {
            let rule = MatchRule(interface: interface, member: said, arguments: [0: "name.\(index)"])
            subscriptions.append(
                try receiver.subscribe(rule, on: .ioThread) { _ in counts.withLock { $0[index, default: 0] += 1 } })
        }
        let last = try await receiver.signals(
            matching: MatchRule(interface: interface, member: said, arguments: [0: "last"]))
        for index in stride(from: 0, to: 2_000, by: 97) { try sender.emit(signal(.string("name.\(index)"))) }
        try sender.emit(signal(.string("name.unknown")))
        try sender.emit(signal(.string("last")))
        _ = try await next(1, from: last, "the last signal")
        let expected = Dictionary(uniqueKeysWithValues: stride(from: 0, to: 2_000, by: 97).map { ($0, 1) })
        #expect(counts.withLock { $0 } == expected)
        withExtendedLifetime(subscriptions) {}
    }
}

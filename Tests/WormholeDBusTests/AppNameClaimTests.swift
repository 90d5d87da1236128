// SPDX-License-Identifier: Apache-2.0
import Testing
import WormholeDBus
import WormholeTestSupport

/// The sender name of contract §8 on a real dbus-daemon: `<APPID>.Wormhole.c<unique>`, owned
/// before the first signal, asked for once per connection and again after a reconnect.
@Suite("App sender names (contract §8)", .sharedBus)
struct AppNameClaimTests {
    let appID = "org.example.Lines"

    static func owner(of name: String, on bus: BusConnection) async throws -> String? {
        guard case .string(let owner)? = try await bus.callBusDaemon("GetNameOwner", [.string(name)]).first else {
            return nil
        }
        return owner
    }

    @Test("the name form: ':1.42' owns 'org.example.Lines.Wormhole.c1_42'")
    func nameForm() {
        #expect(BusConnection.appSenderName(appID: appID, unique: ":1.42") == "org.example.Lines.Wormhole.c1_42")
        #expect(BusConnection.appSenderName(appID: "a.b", unique: ":12.3456") == "a.b.Wormhole.c12_3456")
    }

    @Test("a claim owns the name on the bus, and a second claim answers from memory")
    func claims() async throws {
        let bus = try TestBus.shared()
        let connection = try BusConnection(address: bus.address)
        defer { connection.close() }
        #expect(connection.ownedAppName == nil)
        let name = try connection.claimAppName(appID: appID)
        #expect(name == BusConnection.appSenderName(appID: appID, unique: connection.uniqueName))
        #expect(connection.ownedAppName == name)
        #expect(try await Self.owner(of: name, on: connection) == connection.uniqueName)
        // Released behind its back: a claim that asked the bus again would own it again.
        _ = try await connection.callBusDaemon("ReleaseName", [.string(name)])
        #expect(try connection.claimAppName(appID: appID) == name)
        let owner = try? await Self.owner(of: name, on: connection)
        #expect(owner == nil, "the second claim did not ask the bus")
    }

    @Test("a name the bus gives to another connection is refused with nameRefused, and remembered")
    func refused() async throws {
        let bus = try TestBus.shared()
        let connection = try BusConnection(address: bus.address)
        let squatter = try BusConnection(address: bus.address)
        defer {
            connection.close()
            squatter.close()
        }
        let name = BusConnection.appSenderName(appID: appID, unique: connection.uniqueName)
        _ = try await squatter.callBusDaemon("RequestName", [.string(name), .uint32(4)])
        for _ in 0..<2 {
            #expect { try connection.claimAppName(appID: appID) } throws: {
                ($0 as? BusError)?.code == .nameRefused && ($0 as? BusError)?.value == name
            }
        }
    }

    @Test("on the I/O thread the claim is pipelined: the bus gives the name before it routes the signal that follows")
    func pipelinedOnIOThread() async throws {
        let bus = try TestBus.shared()
        let appID = "org.example.Pipelined\(UInt32.random(in: 0...UInt32.max))"
        let interface = try InterfaceName("org.example.ClaimTest")
        let (trigger, answer) = (try MemberName("Trigger"), try MemberName("Answer"))
        let path = try ObjectPath("/org/example/ClaimTest")
        let sender = try BusConnection(address: bus.address)
        let watcher = try BusConnection(address: bus.address)
        defer {
            sender.close()
            watcher.close()
        }
        let (stream, continuation) = AsyncStream<String>.makeStream()
        try await watchOwners(below: appID, on: watcher) { continuation.yield("owner \($0) \($1)") }
        _ = try await watcher.addRoute([MatchRule(interface: interface, member: answer)]) { signal in
            continuation.yield("answer \(signal.sender ?? "")")
        }
        // The sender claims and emits from a handler on its I/O thread, where it cannot wait.
        _ = try await sender.addRoute([MatchRule(interface: interface, member: trigger)]) { _ in
            do {
                _ = try sender.claimAppName(appID: appID)
                try sender.emit(Signal(path: path, interface: interface, member: answer))
            } catch {
                continuation.yield("error \(error)")
            }
        }
        try watcher.emit(Signal(path: path, interface: interface, member: trigger))
        let seen = try await within("the name and the answer") {
            var seen: [String] = []
            for await event in stream {
                seen.append(event)
                if seen.count == 2 { break }
            }
            return seen
        }
        let unique = sender.uniqueName
        #expect(
            seen == [
                "owner \(BusConnection.appSenderName(appID: appID, unique: unique)) \(unique)", "answer \(unique)",
            ])
    }

    @Test("a name over 255 bytes is refused without asking the bus")
    func tooLong() throws {
        let bus = try TestBus.shared()
        let connection = try BusConnection(address: bus.address)
        defer { connection.close() }
        let long = "org.example." + String(repeating: "x", count: 240)
        #expect { try connection.claimAppName(appID: long) } throws: { ($0 as? BusError)?.code == .nameRefused }
    }

    @Test("after a reconnect (a new unique name) the next claim owns the new name")
    func reclaimsAfterReconnect() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let bus = try TestBus()
        let connection = try BusConnection(address: bus.address, reconnect: .automatic)
        defer { connection.close() }
        let first = try connection.claimAppName(appID: appID)
        var events = connection.events().makeAsyncIterator()
        bus.kill()
        #expect(await events.next() == .disconnected)
        try bus.start()
        #expect(await events.next() == .reconnected)
        #expect(connection.ownedAppName == nil)
        let second = try connection.claimAppName(appID: appID)
        #expect(second == BusConnection.appSenderName(appID: appID, unique: connection.uniqueName))
        #expect(try await Self.owner(of: second, on: connection) == connection.uniqueName)
        _ = first
    }
}

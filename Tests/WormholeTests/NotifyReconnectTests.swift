// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeSystem
import WormholeTestSupport

@Suite("Notifications across a bus daemon restart")
struct NotifyReconnectTests {
    let bus: TestBus
    let table: NotifyTempDirectory
    init() throws {
        bus = try TestBus()
        table = try NotifyTempDirectory()
    }

    @Test(
        "observers get exactly one catch-up after a restart and then new posts; posting while down throws .disconnected"
    )
    func restart() async throws {
        let target = NotifyHarness.name("com.example/reconnect")
        let observing = try NotifyHarness.center(bus, table: table.path)
        let posting = try NotifyHarness.center(bus, table: table.path)
        let (handled, handler) = NotifyHarness.recorder()
        let observer = try observing.listen(
            name: target, on: .queue(DispatchQueue(label: "test.reconnect")), handler: handler)
        defer { observer.cancel() }
        let (prefixHandled, prefixHandler) = NotifyHarness.recorder()
        // Every call of an .ioThread handler, the catch-up included, runs on the I/O thread.
        let offThread = Locked<[DarwinNotification]>([])
        let connection = observing.connection
        let prefixObserver = try observing.listen(
            prefix: NotifyHarness.name("com.example/"), on: .ioThread
        ) { note in
            if !connection.isOnIOThread { offThread.withLock { $0.append(note) } }
            prefixHandler(note)
        }
        defer { prefixObserver.cancel() }
        let stream = try await observing.notifications(name: target)
        let observingEvents = observing.connection.events()
        let postingEvents = posting.connection.events()

        bus.kill()
        _ = try await NotifyHarness.first(from: observingEvents, "the observer's disconnect") { $0 == .disconnected }
        _ = try await NotifyHarness.first(from: postingEvents, "the poster's disconnect") { $0 == .disconnected }
        let error = #expect(throws: BusError.self) { try posting.post(target, state: 1) }
        #expect(error?.code == .disconnected)
        #expect(error?.message.contains(bus.socketPath) == true, "the error names the bus")

        try bus.start()
        _ = try await NotifyHarness.first(from: postingEvents, "the poster's reconnect") { $0 == .reconnected }
        // The catch-up comes once the observer's rules are back on the bus.
        let handledCatchUp = try await NotifyHarness.next(1, from: handled)
        let streamedCatchUp = try await NotifyHarness.next(1, from: stream)
        let prefixCatchUp = try await NotifyHarness.next(1, from: prefixHandled)
        for delivery in handledCatchUp + streamedCatchUp {
            #expect(delivery.reason == .catchUp)
            #expect(delivery.name == target)
            #expect(delivery.state == nil)
        }
        #expect(prefixCatchUp.map(\.reason) == [.catchUp])
        #expect(prefixCatchUp.map(\.name.rawValue) == ["com.example/"])

        try posting.post(target, state: 2)
        try posting.post(NotifyHarness.name("com.example/other"), state: 3)
        try posting.post(target, state: 4)
        for source in [try await NotifyHarness.next(2, from: handled), try await NotifyHarness.next(2, from: stream)] {
            #expect(source.map(\.reason) == [.posted, .posted], "one catch-up, then posts")
            #expect(source.map(\.state) == [2, 4])
        }
        let prefixed = try await NotifyHarness.next(3, from: prefixHandled)
        #expect(prefixed.map(\.reason) == [.posted, .posted, .posted])
        #expect(prefixed.map(\.state) == [2, 3, 4])
        #expect(offThread.withLock { $0 }.isEmpty, "the catch-up took the same path as the posts")
        #expect(observing.connection.isConnected)
    }

    /// A connection of "another process" (a plain connection, not a center) whose unique name is
    /// one of `names`: every daemon numbers names from `:1.0`, so a few attempts find one.
    static func stranger(named names: Set<String>, on bus: TestBus) throws -> BusConnection {
        var others: [BusConnection] = []
        for _ in 0..<20 {
            let connection = try BusConnection(address: bus.address)
            if names.contains(connection.uniqueName) { return connection }
            others.append(connection)
        }
        throw TestFailure("no connection got one of \(names); got \(others.map(\.uniqueName))")
    }

    static let posted = try! MemberName("Posted")

    static func post(_ name: NotificationName, state: UInt64, from connection: BusConnection) throws {
        try connection.emit(
            Signal(
                path: try ObjectPath(NotifyContract.objectPath), interface: try InterfaceName(name.bucketInterface),
                member: posted, arguments: [.string(name.rawValue), .uint64(state)]))
    }

    @Test("after a restart, another process that gets a unique name we held before is not taken for us")
    func ownPostsAfterRestart() async throws {
        let target = NotifyHarness.name("own/after-restart")
        // Fillers first, so the centers' names are not the ones a restarted daemon hands out first.
        let fillers = try (0..<4).map { _ in try BusConnection(address: bus.address) }
        let observing = try NotifyHarness.center(bus, table: table.path)
        let posting = try NotifyHarness.center(bus, table: table.path)
        let oldNames: Set<String> = [observing.connection.uniqueName, posting.connection.uniqueName]
        let stream = try await observing.notifications(name: target, options: ObserverOptions(ignoresOwnPosts: true))
        let postingEvents = posting.connection.events()
        for filler in fillers { filler.close() }

        bus.kill()
        try bus.start()
        _ = try await NotifyHarness.first(from: postingEvents, "the poster's reconnect") { $0 == .reconnected }
        #expect(try await NotifyHarness.next(1, from: stream).map(\.reason) == [.catchUp])
        let currentNames: Set<String> = [observing.connection.uniqueName, posting.connection.uniqueName]
        let stranger = try Self.stranger(named: oldNames.subtracting(currentNames), on: bus)

        try posting.post(target, state: 1)  // ours: skipped
        try Self.post(target, state: 2, from: stranger)  // another process's, with a name we once had
        let delivered = try await NotifyHarness.next(1, from: stream)
        #expect(delivered.map(\.state) == [2])
        #expect(delivered.map(\.isOwnPost) == [false])
    }

    @Test("a connection on another bus with the same unique name as one of ours is not taken for us")
    func ownPostsAcrossBuses() async throws {
        let target = NotifyHarness.name("own/across-buses")
        let fillers = try (0..<4).map { _ in try BusConnection(address: bus.address) }
        let here = try NotifyHarness.center(bus, table: table.path)
        let otherBus = try TestBus()
        let observing = try NotifyHarness.center(otherBus, table: table.path)
        let stream = try await observing.notifications(name: target, options: ObserverOptions(ignoresOwnPosts: true))
        let stranger = try Self.stranger(named: [here.connection.uniqueName], on: otherBus)
        try observing.post(target, state: 1)  // ours: skipped
        try Self.post(target, state: 2, from: stranger)
        let delivered = try await NotifyHarness.next(1, from: stream)
        #expect(delivered.map(\.state) == [2])
        #expect(delivered.map(\.isOwnPost) == [false])
        withExtendedLifetime(fillers) {}
    }
}

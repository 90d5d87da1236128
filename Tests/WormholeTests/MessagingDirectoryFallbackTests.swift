// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeSystem
import WormholeTestSupport

/// Storage in memory (no files): a listener cannot fall back to a directory watch.
private final class MemoryTransiting: WormholeTransiting {
    private let messages = Locked<[MessageIdentifier: Data]>([:])
    func writeMessage(_ data: Data, identifier: MessageIdentifier) throws {
        messages.withLock { $0[identifier] = data }
    }
    func messageData(identifier: MessageIdentifier) throws -> Data? { messages.withLock { $0[identifier] } }
    func deleteMessage(identifier: MessageIdentifier) throws {
        _ = messages.withLock { $0.removeValue(forKey: identifier) }
    }
    func deleteAllMessages() throws { messages.withLock { $0 = [:] } }
    func storedIdentifiers() throws -> [MessageIdentifier] { messages.withLock { Array($0.keys) } }
}

/// Listeners without a bus: woken through inotify on the wormhole directory, back on the bus
/// when it can be reached (issue 8, "No-bus fallback").
@Suite("Messaging: listening through the directory while there is no bus")
struct MessagingDirectoryFallbackTests {
    let fixture: MessagingFixture
    // Every test stops the bus: each has a bus of its own.
    init() throws { fixture = try MessagingFixture(bus: TestBus()) }

    /// The wake-source changes of `wormhole`, as a stream.
    private static func sources(_ wormhole: MessageCenter) -> (AsyncStream<WakeSource>, Subscription) {
        let (stream, continuation) = AsyncStream<WakeSource>.makeStream()
        let subscription = wormhole.onWakeSourceChange(on: .ioThread) { continuation.yield($0) }
        return (stream, subscription)
    }

    private func sendFromAnotherProcess(_ identifier: String, count: Int) async throws {
        let output = try await MessagingHarness.run(
            try productPath("wormhole-test-peer"),
            ["store-many", fixture.root.path, fixture.group, identifier, "\(count)", fixture.bus.address.rawValue],
            environment: ["XDG_RUNTIME_DIR": fixture.state.path])
        #expect(output.status == 0, "\(output.stderr)")
    }

    @Test(
        "started with the bus down, a listener is woken through the directory by another process, then moves to the bus"
    )
    func startsWithoutTheBus() async throws {
        fixture.bus.kill()
        let receiver = try fixture.wormhole()
        let (changes, subscription) = Self.sources(receiver)
        defer { subscription.cancel() }
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(identifier: "count", on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        guard case .directory(let error) = receiver.wakeSource else {
            Issue.record("expected the directory watch, got \(receiver.wakeSource)")
            return
        }
        #expect(error.code == .connectionFailed)
        #expect(error.message.contains(fixture.bus.address.rawValue), "\(error.message)")

        // 1,000 sends from another process with no bus: the last delivery is the last message,
        // none goes backwards, none is a repeat of the one before.
        try await sendFromAnotherProcess("count", count: 1000)
        let received = try await MessagingHarness.until(deliveries, "the last message through the directory") {
            $0.message?.n == 999
        }
        #expect(received.allSatisfy { $0.reason == .posted && $0.sentAt == nil })
        let values = received.compactMap(\.message?.n)
        #expect(values.count == received.count, "every delivery decoded")
        #expect(
            values == values.sorted() && Set(values).count == values.count, "in order, no repeats: \(values.prefix(20))"
        )

        // The bus appears: the listener's rules are added. A transient message (which only the
        // bus carries) proves it; the catch-up asked for on the switch may come first.
        try fixture.bus.start()
        _ = try await MessagingHarness.until(changes, "the switch to the bus") { $0 == .bus }
        #expect(receiver.wakeSource == .bus)
        try fixture.wormhole().passTransientMessage(MessagingCounter(n: 1000), identifier: "count")
        let onBus = try await MessagingHarness.until(deliveries, "the transient message on the bus") {
            $0.reason == .transient
        }
        #expect(onBus.last?.message?.n == 1000)
        #expect(onBus.dropLast().allSatisfy { $0.reason == .catchUp }, "\(onBus.map(\.reason))")
    }

    @Test("a listener that loses the bus is woken through the directory meanwhile, catches up, and goes back")
    func losesTheBus() async throws {
        let receiver = try fixture.wormhole()
        let (changes, subscription) = Self.sources(receiver)
        defer { subscription.cancel() }
        let queue = DispatchQueue(label: "t")
        let (one, onOne) = MessagingHarness.recorder(MessagingCounter.self)
        let single = try receiver.listen(identifier: "count", on: .queue(queue), handler: onOne)
        defer { single.cancel() }
        let (all, onAll) = MessagingHarness.recorder(MessagingCounter.self)
        let every = try receiver.listen(on: .queue(queue), handler: onAll)
        defer { every.cancel() }
        #expect(receiver.wakeSource == .bus)

        fixture.bus.kill()
        let lost = try await MessagingHarness.until(changes, "the switch to the directory") { $0 != .bus }
        guard case .directory(let error) = lost.last else { return }
        #expect(error.code == .disconnected)

        try await sendFromAnotherProcess("count", count: 10)
        #expect(
            try await MessagingHarness.until(one, "9 through the directory") { $0.message?.n == 9 }.last?.sentAt == nil)
        let allSeen = try await MessagingHarness.until(all, "9 through the directory (every identifier)") {
            $0.message?.n == 9
        }
        #expect(allSeen.allSatisfy { $0.identifier.rawValue == "count" })
        // A clear is a delivery too: the mailbox is empty.
        try fixture.wormhole().clearMessage(identifier: "count")
        let cleared = try #require(try await MessagingHarness.next(1, from: one, "the clear").first)
        #expect(cleared.error?.code == .noMessage)

        try fixture.bus.start()
        _ = try await MessagingHarness.until(changes, "the switch back to the bus") { $0 == .bus }
        try fixture.wormhole().passTransientMessage(MessagingCounter(n: 11), identifier: "count")
        let onBus = try await MessagingHarness.until(one, "the transient message on the bus") {
            $0.reason == .transient
        }
        #expect(onBus.last?.message?.n == 11)
    }

    @Test("a stream started without a bus is woken through the directory")
    func streamWithoutTheBus() async throws {
        fixture.bus.kill()
        let receiver = try fixture.wormhole()
        let stream = try await receiver.messages(identifier: "s", as: MessagingCounter.self)
        try await sendFromAnotherProcess("s", count: 3)
        var iterator = stream.makeAsyncIterator()
        var last: Int?
        while last != 2 {
            let delivery = try #require(await iterator.next())
            last = try delivery.result.get().n
        }
        #expect(last == 2)
    }

    @Test("the directory removed under a listener is made again and watched; other names in it are ignored")
    func directoryRemoved() async throws {
        fixture.bus.kill()
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        let directory = "\(fixture.root.path)/\(fixture.group)/wormhole"
        // Not mailboxes: a hidden name, a name that is no identifier, a directory, a temporary.
        for name in [".hidden.json", "bad name.json", ".x.123-ab.tmp"] {
            try Data("{}".utf8).write(to: URL(fileURLWithPath: "\(directory)/\(name).new"))
            #expect(rename("\(directory)/\(name).new", "\(directory)/\(name)") == 0)
        }
        #expect(mkdir("\(directory)/dir.json", 0o700) == 0)
        try FileManager.default.removeItem(atPath: directory)
        // Made again by the watch (a writer would make it too); a message written into it arrives.
        try await sendFromAnotherProcess("after", count: 1)
        let received = try await MessagingHarness.until(deliveries, "the message in the new directory") {
            $0.identifier.rawValue == "after"
        }
        #expect(received.allSatisfy { $0.identifier.rawValue == "after" }, "\(received.map(\.identifier))")
        #expect(received.last?.message == MessagingCounter(n: 0))
    }

    @Test("listeners made and released on other threads while the directory watch delivers: no deadlock, nothing lost")
    func churn() async throws {
        fixture.bus.kill()
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let steady = try receiver.listen(identifier: "count", on: .ioThread, handler: handler)
        // 4 threads each make and drop 200 listeners (released, not cancelled: the deinit
        // unregisters) while another process writes 300 messages.
        let churners = (0..<4).map { index in
            Task.detached {
                for round in 0..<200 {
                    let listener = try receiver.listen(
                        identifier: MessageIdentifier(round % 2 == 0 ? "count" : "other\(index)"),
                        as: MessagingCounter.self
                    ) { _ in }
                    if round % 3 == 0 { listener.cancel() }
                }
            }
        }
        try await sendFromAnotherProcess("count", count: 300)
        for churner in churners { try await churner.value }
        _ = try await MessagingHarness.until(deliveries, "the last message") { $0.message?.n == 299 }
        #expect(receiver.wakeSource != .bus)
        steady.cancel()
    }

    @Test("with wakesThroughDirectoryWithoutBus false, or a custom transiting, a listener without a bus throws")
    func optedOut() throws {
        fixture.bus.kill()
        let receiver = try fixture.wormhole()
        #expect {
            _ = try receiver.listen(
                identifier: "x", as: MessagingCounter.self,
                options: MessageCenter.ListenOptions(wakesThroughDirectoryWithoutBus: false)
            ) { _ in }
        } throws: { ($0 as? BusError)?.code == .connectionFailed }
        #expect(receiver.wakeSource == .bus)

        // Storage of its own: no directory the library knows to watch.
        let custom = try fixture.wormhole(transiting: .custom(MemoryTransiting()))
        #expect {
            _ = try custom.listen(identifier: "x", as: MessagingCounter.self) { _ in }
        } throws: { ($0 as? BusError)?.code == .connectionFailed }
    }
}

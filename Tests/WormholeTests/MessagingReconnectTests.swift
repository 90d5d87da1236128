// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

@Suite("Messaging: the bus going away and coming back")
struct MessagingReconnectTests {
    let fixture: MessagingFixture
    // Every test stops the bus: each has a bus of its own.
    init() throws { fixture = try MessagingFixture(bus: TestBus()) }

    @Test("passMessage with the bus down stores the message and reports the notification error")
    func sendWhileDown() throws {
        fixture.bus.kill()
        let wormhole = try fixture.wormhole()
        let report = try wormhole.passMessage(MessagingCounter(n: 1), identifier: "offline")
        #expect(!report.notified)
        #expect((report.notificationError as? BusError)?.code == .connectionFailed)
        #expect(report.sentAt > 0)
        let stored = FileManager.default.contents(atPath: fixture.messagePath("offline"))
        #expect(stored.map { String(decoding: $0, as: UTF8.self) } == #"{"n":1}"#)
        #expect(try wormhole.message(identifier: "offline", as: MessagingCounter.self) == MessagingCounter(n: 1))
        // A failed connection is retried by the next send, not remembered.
        try fixture.bus.start()
        #expect(try wormhole.passMessage(MessagingCounter(n: 2), identifier: "offline").notified)
    }

    @Test("a running listener reconnects and catches up with what changed, and only that")
    func catchUp() async throws {
        // Without the directory watch, so that what changed while the bus was away comes as the
        // catch-up (MessagingDirectoryFallbackTests covers the default).
        let options = MessageCenter.ListenOptions(wakesThroughDirectoryWithoutBus: false)
        // Stored before anyone listens, and never changed: not news after the outage either. Its
        // post is routed before the listeners' rules exist (they are on another connection).
        let early = try fixture.wormhole()
        try early.passMessage(MessagingCounter(n: 0), identifier: "old")
        try await MessagingFixture.settle(try early.notificationCenter())
        let receiver = try fixture.wormhole()
        let queue = DispatchQueue(label: "test.messaging.catch-up")
        let (old, onOld) = MessagingHarness.recorder(MessagingCounter.self)
        let oldListener = try receiver.listen(identifier: "old", on: .queue(queue), options: options, handler: onOld)
        defer { oldListener.cancel() }
        let (all, onAll) = MessagingHarness.recorder(MessagingCounter.self)
        let allListener = try receiver.listen(on: .queue(queue), options: options, handler: onAll)
        defer { allListener.cancel() }
        let (single, onSingle) = MessagingHarness.recorder(MessagingCounter.self)
        let singleListener = try receiver.listen(
            identifier: "changed", on: .queue(queue), options: options, handler: onSingle)
        defer { singleListener.cancel() }

        let before = try fixture.wormhole()
        try before.passMessage(MessagingCounter(n: 1), identifier: "changed")
        try before.passMessage(MessagingCounter(n: 1), identifier: "unchanged")
        let first = try await MessagingHarness.next(2, from: all, "the messages before the outage")
        #expect(first.map(\.identifier.rawValue) == ["changed", "unchanged"])
        #expect(
            try await MessagingHarness.next(1, from: single, "the message before the outage").first?.message?.n == 1)

        let events = try receiver.notificationCenter().connection.events()
        fixture.bus.kill()
        _ = try await MessagingHarness.until(events, "the disconnection") { $0 == .disconnected }

        let during = try fixture.wormhole()
        let report = try during.passMessage(MessagingCounter(n: 2), identifier: "changed")
        #expect(!report.notified, "nobody can be told while the bus is down")
        #expect(try during.message(identifier: "changed", as: MessagingCounter.self) == MessagingCounter(n: 2))

        try fixture.bus.start()
        let caughtUp = try #require(try await MessagingHarness.next(1, from: all, "the catch-up").first)
        #expect(caughtUp.identifier.rawValue == "changed")
        #expect(caughtUp.reason == .catchUp)
        #expect(caughtUp.message == MessagingCounter(n: 2))
        #expect(caughtUp.sentAt == nil)
        let singleCaughtUp = try #require(try await MessagingHarness.next(1, from: single, "the catch-up").first)
        #expect(singleCaughtUp.reason == .catchUp)
        #expect(singleCaughtUp.message == MessagingCounter(n: 2))

        // The unchanged message is not delivered again: the next delivery is a post made now.
        let after = try fixture.wormhole()
        try after.passMessage(MessagingCounter(n: 3), identifier: "sentinel")
        let next = try #require(try await MessagingHarness.next(1, from: all, "the sentinel").first)
        #expect(next.identifier.rawValue == "sentinel", "got \(next.identifier) (\(next.reason)) before the sentinel")
        #expect(next.reason == .posted)
        after.passMessage(identifier: "old")
        let woken = try #require(try await MessagingHarness.next(1, from: old, "the wake-up of the old message").first)
        #expect(woken.reason == .posted, "the old message was delivered again as \(woken.reason)")
        #expect(woken.message == MessagingCounter(n: 0))
    }
}

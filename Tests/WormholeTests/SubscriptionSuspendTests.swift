// SPDX-License-Identifier: Apache-2.0
// Suspend and resume for every kind of subscription (one `Subscription` handle): nothing is
// delivered while suspended; the resume delivers what came meanwhile, merged as the kind merges a
// burst, through the subscription's delivery queue; then deliveries go on.

import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeTestSupport

@Suite("Suspending and resuming every kind of subscription", .sharedBus)
struct SubscriptionSuspendTests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    /// Passes a message through a wormhole of its own and waits until it is delivered: every post
    /// this process made before it has reached this process's subscriptions by then (one
    /// connection to the bus, one doorbell endpoint, each in order).
    func witness() async throws {
        let wormhole = try fixture.wormhole(directory: "witness")
        let (witnessed, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try wormhole.listen(identifier: "witness", as: MessagingCounter.self, on: .ioThread) {
            handler($0)
        }
        defer { listener.cancel() }
        try wormhole.passMessage(MessagingCounter(n: 0), identifier: "witness")
        _ = try await MessagingHarness.next(1, from: witnessed, "the witness message")
    }

    @Test("a message listener keeps each mailbox once while suspended and delivers the latest on resume")
    func messageListener() async throws {
        let receiver = try fixture.wormhole()
        let sender = try fixture.wormhole()
        let (handled, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(
            as: MessagingCounter.self, on: .queue(DispatchQueue(label: "test.suspend.listener")), handler: handler)
        defer { listener.cancel() }

        listener.suspend()
        #expect(listener.isSuspended)
        for n in 1...5 {
            try sender.passMessage(MessagingCounter(n: n), identifier: "a")
            try sender.passMessage(MessagingCounter(n: 10 + n), identifier: "b")
        }
        try await witness()
        listener.resume()
        #expect(!listener.isSuspended)
        var delivered = try await MessagingHarness.next(2, from: handled, "the resumed deliveries")
        // After the resumed round (sent before it, the new message could be what it reads).
        try sender.passMessage(MessagingCounter(n: 99), identifier: "a")
        delivered += try await MessagingHarness.next(1, from: handled, "the delivery after the resume")
        #expect(delivered.map(\.identifier.rawValue) == ["a", "b", "a"])
        #expect(delivered.map { $0.message?.n } == [5, 15, 99], "each mailbox once, with its latest message")
        #expect(delivered.map(\.reason) == [.posted, .posted, .posted])
    }

    @Test("a journal listener reads nothing while suspended and every record, in order, on resume")
    func journalListener() async throws {
        let receiver = try fixture.wormhole()
        let sender = try fixture.wormhole()
        let journal = sender.journal("events")
        let (records, handler) = journalRecorder()
        let listener = try receiver.journal("events").listen(
            as: JSONDocument.self, on: .queue(DispatchQueue(label: "test.suspend.journal")), handler: handler)
        defer { listener.cancel() }

        listener.suspend()
        for n in 1...5 { _ = try journal.append(MessagingCounter(n: n)) }
        try await witness()
        listener.resume()
        var delivered = try await next(5, from: records, "the resumed records")
        _ = try journal.append(MessagingCounter(n: 6))
        delivered += try await next(1, from: records, "the record after the resume")
        let numbers = delivered.map { (try? $0.get().message.decode(as: MessagingCounter.self))?.n }
        #expect(numbers == [1, 2, 3, 4, 5, 6])
    }

    @Test("a defaults observer keeps each key once while suspended and delivers its latest value on resume")
    func defaultsObserver() async throws {
        let defaults = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(fixture.group), containerRoot: fixture.root.path,
            busAddress: fixture.bus.address, sharedStateDirectory: fixture.state.path, logger: MessagingHarness.logger)
        let (changes, continuation) = AsyncStream<GroupDefaults.Change>.makeStream()
        let observer = try defaults.listen(on: .queue(DispatchQueue(label: "test.suspend.defaults"))) {
            continuation.yield($0)
        }
        defer { observer.cancel() }

        observer.suspend()
        for n in 1...5 {
            try defaults.set(n, forKey: "k")
            try defaults.set(10 + n, forKey: "other")
        }
        try await witness()
        observer.resume()
        var delivered = try await next(2, from: changes, "the resumed changes")
        try defaults.set(99, forKey: "k")
        delivered += try await next(1, from: changes, "the change after the resume")
        #expect(delivered.map(\.key) == ["k", "other", "k"])
        #expect(delivered.map(\.value) == [.integer(5), .integer(15), .integer(99)])
        #expect(delivered.map(\.reason) == [.changed, .changed, .changed])
    }
}

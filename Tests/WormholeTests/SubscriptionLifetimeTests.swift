// SPDX-License-Identifier: Apache-2.0
// One lifetime rule for every handle (SubscriptionHandle): active until cancel() or until the
// last reference is released; cancel() idempotent; no handler call starts after cancel()
// returns. And one delivery path per observer: two calls of one handler never overlap,
// whatever the DeliveryQueue, with resume() and catch-ups taking the same path as posts.

import Dispatch
import Foundation
import Synchronization
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// Counts handler calls and detects two calls running at once.
final class OverlapDetector: Sendable {
    private let inside = Atomic<Int>(0)
    private let overlapCount = Atomic<Int>(0)
    private let callCount = Atomic<Int>(0)

    var overlaps: Int { overlapCount.load(ordering: .acquiring) }
    var calls: Int { callCount.load(ordering: .acquiring) }

    /// Call at the start and end of a handler; `work` widens the window a second call could hit.
    func enter() {
        if inside.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue != 1 {
            overlapCount.wrappingAdd(1, ordering: .relaxed)
        }
        var value: UInt64 = 0x9e37_79b9
        for step in 0..<5_000 { value = (value &* 6_364_136_223_846_793_005) &+ UInt64(step) }
        if value == 42 { overlapCount.wrappingAdd(1_000_000, ordering: .relaxed) }  // keeps the loop
        callCount.wrappingAdd(1, ordering: .relaxed)
        inside.wrappingSubtract(1, ordering: .acquiringAndReleasing)
    }
}

/// A flag set once `cancel()` has returned, and a count of handler calls that began after it.
final class AfterCancelWitness: Sendable {
    private let cancelled = Atomic<Bool>(false)
    private let lateCount = Atomic<Int>(0)

    var lateCalls: Int { lateCount.load(ordering: .acquiring) }
    func cancelReturned() { cancelled.store(true, ordering: .releasing) }
    func called() { if cancelled.load(ordering: .acquiring) { lateCount.wrappingAdd(1, ordering: .relaxed) } }
}

@Suite("Subscription handles: one lifetime rule, one delivery path", .sharedBus)
struct SubscriptionLifetimeTests {
    let bus: TestBus
    let table: NotifyTempDirectory
    /// This test's names start with it: the suite's tests (and cases) share one bus.
    let scope = uniqueName("lifetime", separator: "-") + "/"
    init() throws {
        try self.init(bus: TestBus.shared())
    }

    init(bus: TestBus) throws {
        self.bus = bus
        table = try NotifyTempDirectory()
    }

    /// This harness on a bus of its own, for a test that counts the match rules of the process's
    /// one connection to its bus (every test of the suite adds rules to the shared bus's).
    static func ownBus() throws -> SubscriptionLifetimeTests { try SubscriptionLifetimeTests(bus: TestBus()) }

    func center() throws -> DarwinNotificationCenter { try NotifyHarness.center(bus, table: table.path) }
    /// `string` in this test's scope.
    func name(_ string: String) -> NotificationName { NotifyHarness.name(scope + string) }

    /// Posts `target` then a witness name from one connection (so in that order), and waits until
    /// the witness observer saw it: by then `target`'s signal was handled, or never arrived.
    func postThenWitness(
        _ target: NotificationName, from posting: DarwinNotificationCenter, on observing: DarwinNotificationCenter
    ) async throws {
        let (witnessed, witness) = NotifyHarness.recorder()
        let witnessName = name("lifetime/witness")
        let witnessObserver = try observing.listen(name: witnessName, on: .ioThread, handler: witness)
        try posting.post(target, state: 1)
        try posting.post(witnessName, state: 2)
        _ = try await NotifyHarness.next(1, from: witnessed, "the witness post")
        witnessObserver.cancel()
    }

    @Test(
        "releasing an observer (name or prefix) stops its deliveries and removes its bus rules",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ), arguments: [false, true])
    func releasedObserver(prefix: Bool) async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own, not
        // the suite's.
        let this = try Self.ownBus()
        let observing = try this.center()
        let posting = try this.center()
        let connection = observing.connection
        let baseline = try await NotifyHarness.settledRuleCount(this.bus, connection)
        let calls = Atomic<Int>(0)
        var observer: Subscription? =
            prefix
            ? try observing.listen(prefix: name("lifetime/family/"), on: .ioThread) { _ in
                calls.wrappingAdd(1, ordering: .relaxed)
            }
            : try observing.listen(name: name("lifetime/family/x"), on: .ioThread) { _ in
                calls.wrappingAdd(1, ordering: .relaxed)
            }
        #expect(observer?.isCancelled == false)
        #expect(try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline + (prefix ? 1 : 2))
        observer = nil
        #expect(try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline, "its rules went with it")
        try await this.postThenWitness(name("lifetime/family/x"), from: posting, on: observing)
        #expect(calls.load(ordering: .relaxed) == 0)
    }

    @Test(
        "releasing a message listener or a check token removes their bus rules",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func releasedListenerAndToken() async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own, not
        // the suite's.
        let fixture = try MessagingFixture(bus: TestBus())
        let receiver = try fixture.wormhole()
        let connection = try receiver.notificationCenter().connection
        let baseline = try await MessagingHarness.settledRuleCount(fixture.bus, connection)
        let calls = Atomic<Int>(0)
        var listener: Subscription? = try receiver.listen(identifier: "released", as: MessagingCounter.self) { _ in
            calls.wrappingAdd(1, ordering: .relaxed)
        }
        var all: Subscription? = try receiver.listen(as: MessagingCounter.self) { _ in
            calls.wrappingAdd(1, ordering: .relaxed)
        }
        var token: NotificationCheckToken? = try receiver.notificationCenter().makeCheckToken(
            for: receiver.notificationName(for: MessageIdentifier("token")))
        #expect(listener?.isCancelled == false && all?.isCancelled == false && token?.isCancelled == false)
        // A listener holds the two Posted rules and the two Message rules of its name (contract
        // §1, §7), a listener of all messages one of each, a check token two.
        #expect(try await MessagingHarness.settledRuleCount(fixture.bus, connection) == baseline + 8)
        listener = nil
        all = nil
        token = nil
        #expect(try await MessagingHarness.settledRuleCount(fixture.bus, connection) == baseline)

        // A send now reaches a fresh listener but not the released ones.
        let (seen, recorder) = MessagingHarness.recorder(MessagingCounter.self)
        let witness = try receiver.listen(identifier: "witness", as: MessagingCounter.self, handler: recorder)
        try fixture.wormhole().passMessage(MessagingCounter(n: 1), identifier: "released")
        try fixture.wormhole().passMessage(MessagingCounter(n: 2), identifier: "witness")
        #expect(try await MessagingHarness.next(1, from: seen, "the witness message").map(\.message?.n) == [2])
        #expect(calls.load(ordering: .relaxed) == 0)
        witness.cancel()
    }

    @Test(
        "releasing a stream that was never iterated removes its bus rules",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func releasedStreams() async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own, not
        // the suite's.
        let fixture = try MessagingFixture(bus: TestBus())
        let receiver = try fixture.wormhole()
        let center = try receiver.notificationCenter()
        let connection = center.connection
        let baseline = try await MessagingHarness.settledRuleCount(fixture.bus, connection)
        var messages: MessageStream<MessagingCounter>? = try await receiver.messages(identifier: "unread")
        var all: MessageStream<MessagingCounter>? = try await receiver.messages()
        var notes: NotificationStream? = try await center.notifications(name: name("lifetime/unread"))
        #expect(messages != nil && all != nil && notes != nil)
        // Posted and Message rules for the streams of messages (4 + 2), Posted rules for the notifications (2).
        #expect(try await MessagingHarness.settledRuleCount(fixture.bus, connection) == baseline + 8)
        messages = nil
        all = nil
        notes = nil
        #expect(try await MessagingHarness.settledRuleCount(fixture.bus, connection) == baseline)
    }

    @Test(
        "a stream kept in a variable ends its subscription when the task iterating it is cancelled",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func cancelledIterationEndsKeptStreams() async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own.
        let fixture = try MessagingFixture(bus: TestBus())
        let receiver = try fixture.wormhole()
        let connection = try receiver.notificationCenter().connection
        let baseline = try await MessagingHarness.settledRuleCount(fixture.bus, connection)
        let messages: MessageStream<MessagingCounter> = try await receiver.messages(identifier: "kept")
        let records: JournalRecordStream<JSONDocument> = try await receiver.journal("kept").records()
        // Posted and Message rules for the messages (2 + 2), Posted rules for the journal (2).
        #expect(try await MessagingHarness.settledRuleCount(fixture.bus, connection) == baseline + 6)
        let iterations = [
            Task { for await _ in messages {} },
            Task { for try await _ in records {} },
        ]
        for iteration in iterations {
            iteration.cancel()
            _ = await iteration.result
        }
        // The streams are still held here: the cancelled iterations ended their subscriptions.
        #expect(try await MessagingHarness.settledRuleCount(fixture.bus, connection) == baseline)
        withExtendedLifetime((messages, records)) {}
    }

    @Test(
        "cancel() twice releases a shared rule once, and isCancelled says so",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func cancelTwice() async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own, not
        // the suite's.
        let this = try Self.ownBus()
        let observing = try this.center()
        let posting = try this.center()
        let connection = observing.connection
        let baseline = try await NotifyHarness.settledRuleCount(this.bus, connection)
        let target = name("lifetime/twice")
        let first = try observing.listen(name: target, on: .ioThread) { _ in }
        let (kept, keptHandler) = NotifyHarness.recorder()
        let second = try observing.listen(name: target, on: .ioThread, handler: keptHandler)
        let token = try observing.makeCheckToken(for: target)
        first.cancel()
        first.cancel()
        token.cancel()
        token.cancel()
        #expect(first.isCancelled && token.isCancelled && !second.isCancelled)
        #expect(
            try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline + 2,
            "the second still holds them")
        try posting.post(target, state: 7)
        #expect(try await NotifyHarness.next(1, from: kept).map(\.state) == [7])

        let fixture = try MessagingFixture()
        let listener = try fixture.wormhole().listen(identifier: "twice", as: MessagingCounter.self) { _ in }
        listener.cancel()
        listener.cancel()
        #expect(listener.isCancelled)
        second.cancel()
        #expect(try await NotifyHarness.settledRuleCount(this.bus, connection) == baseline)
    }

    @Test("no handler call starts after cancel() returns", arguments: ["serial", "ioThread", "concurrent"])
    func noCallAfterCancel(delivery: String) async throws {
        let observing = try center()
        let posting = try center()
        let target = name("lifetime/after-cancel")
        let witness = AfterCancelWitness()
        let (firstSeen, firstContinuation) = AsyncStream<Void>.makeStream()
        let choice: DeliveryQueue =
            switch delivery {
            case "ioThread": .ioThread
            case "concurrent": .queue(DispatchQueue(label: "test.concurrent", attributes: .concurrent))
            default: .serial
            }
        let observer = try observing.listen(name: target, on: choice) { _ in
            witness.called()
            firstContinuation.yield()
        }
        // A burst in flight while we cancel.
        let burst = Task.detached {
            for state in 0..<2_000 { try posting.post(target, state: UInt64(state)) }
        }
        _ = try await NotifyHarness.next(1, from: firstSeen, "the first delivery")
        observer.cancel()
        witness.cancelReturned()
        try await burst.value
        try await postThenWitness(target, from: posting, on: observing)
        #expect(witness.lateCalls == 0)
    }

    @Test(
        "two calls of one observer's handler never overlap: posts, resume() and a concurrent queue",
        arguments: ["ioThread", "concurrent"])
    func noOverlap(delivery: String) async throws {
        let observing = try center()
        let posting = try center()
        let target = name("lifetime/overlap")
        let detector = OverlapDetector()
        let (finished, finishedContinuation) = AsyncStream<Void>.makeStream()
        let choice: DeliveryQueue =
            delivery == "ioThread" ? .ioThread : .queue(DispatchQueue(label: "test.overlap", attributes: .concurrent))
        let observer = try observing.listen(name: target, on: choice) { note in
            detector.enter()
            if note.state == UInt64.max { finishedContinuation.yield() }
        }
        let burst = Task.detached {
            for state in 0..<1_000 { try posting.post(target, state: UInt64(state)) }
        }
        // resume() delivers on this thread (ioThread) or the queue while posts are delivered.
        for _ in 0..<300 {
            observer.suspend()
            observer.resume()
        }
        try await burst.value
        try posting.post(target, state: UInt64.max)
        _ = try await NotifyHarness.next(1, from: finished, "the last post")
        #expect(detector.calls > 1)
        #expect(detector.overlaps == 0)
        observer.cancel()
    }

    @Test("two calls of one listener's handler never overlap, even on a concurrent queue")
    func listenerNoOverlap() async throws {
        let fixture = try MessagingFixture()
        let receiver = try fixture.wormhole()
        let sender = try fixture.wormhole()
        let detector = OverlapDetector()
        let (finished, finishedContinuation) = AsyncStream<Void>.makeStream()
        let concurrent = DispatchQueue(label: "test.listener-overlap", attributes: .concurrent)
        let listener = try receiver.listen(as: MessagingCounter.self, on: .queue(concurrent)) { delivery in
            detector.enter()
            if delivery.message?.n == -1 { finishedContinuation.yield() }
        }
        for n in 0..<300 { try sender.passMessage(MessagingCounter(n: n), identifier: MessageIdentifier("id\(n % 7)")) }
        try sender.passMessage(MessagingCounter(n: -1), identifier: "end")
        _ = try await MessagingHarness.next(1, from: finished, "the end message")
        #expect(detector.overlaps == 0)
        listener.cancel()
    }
}

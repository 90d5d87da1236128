// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Synchronization
import Testing
import WormholeDBus
import WormholeSystem
import WormholeTestSupport

/// One thread owns each libdbus connection; other threads only hand it work. This storm is the
/// proof the issue asked for: run it under ThreadSanitizer and AddressSanitizer too
/// (`Tests/sanitizers.sh`), where it must report nothing.
@Suite("One owner per connection, under a storm of emits and bus restarts")
struct OwnershipStressTests {
    static let restarts = Int(ProcessInfo.processInfo.environment["WORMHOLE_STRESS_RESTARTS"] ?? "") ?? 50

    /// Counts what the emitting threads did, and tells them to stop.
    final class Storm: Sendable {
        let stop = Atomic<Bool>(false)
        let sent = Atomic<Int>(0)
        let refused = Atomic<Int>(0)
        let subscribed = Atomic<Int>(0)
        let unexpected = Locked<[String]>([])
        let finished = DispatchGroup()
        /// Whether the bus is up; emitters that were refused wait for it instead of spinning.
        private let up = NSCondition()
        nonisolated(unsafe) private var isUp = true  // guarded by `up`

        func setBus(up value: Bool) {
            up.lock()
            isUp = value
            if value { up.broadcast() }
            up.unlock()
        }

        func waitForBus() {
            up.lock()
            while !isUp && !stop.load(ordering: .relaxed) { up.wait() }
            up.unlock()
        }

        func note(_ error: any Error) {
            if (error as? BusError)?.code == .disconnected { return }
            unexpected.withLock { $0.append("\(error)") }
        }
    }

    @Test("8 threads emit (and one subscribes and cancels) while the daemon is killed and restarted 50 times")
    func emitThroughRestarts() async throws {
        let bus = try TestBus()
        let sender = try BusConnection(address: bus.address, reconnect: .automatic)
        let receiver = try BusConnection(address: bus.address, reconnect: .automatic)
        let senderEvents = sender.events()
        let receiverEvents = receiver.events()
        let marker = MatchRule(interface: testInterface, member: said, arguments: [0: "marker"])
        let markers = try await receiver.signals(matching: marker)
        let storm = Storm()
        // Progress, as events: every 100 storm signals the receiver got, and every subscription
        // the churning thread made and cancelled. Each cycle waits for both before the next kill,
        // so every cycle really has emits and rule changes in flight.
        let (received, onReceived) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let (churned, onChurned) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let receivedCount = Atomic<Int>(0)
        let stormSignals = try receiver.subscribe(MatchRule(interface: testInterface, member: said), on: .ioThread) {
            _ in
            let count = receivedCount.add(1, ordering: .relaxed).newValue
            if count % 100 == 0 { onReceived.yield(count) }
        }

        for thread in 0..<8 {
            storm.finished.enter()
            Thread {
                defer { storm.finished.leave() }
                var index: UInt64 = 0
                while !storm.stop.load(ordering: .relaxed) {
                    for _ in 0..<50 {
                        do {
                            try sender.emit(said(.string("storm.\(thread)"), .uint64(index)))
                            storm.sent.add(1, ordering: .relaxed)
                        } catch {
                            storm.refused.add(1, ordering: .relaxed)
                            storm.note(error)
                            storm.waitForBus()
                        }
                        index += 1
                    }
                    sender.flush()
                }
            }.start()
        }
        storm.finished.enter()
        Thread {
            defer { storm.finished.leave() }
            var round = 0
            while !storm.stop.load(ordering: .relaxed) {
                let rule = MatchRule(interface: testInterface, member: said, arguments: [0: "churn.\(round % 7)"])
                do {
                    let subscription = try receiver.subscribe(rule, on: .ioThread) { _ in }
                    onChurned.yield(storm.subscribed.add(1, ordering: .relaxed).newValue)
                    subscription.cancel()
                } catch {
                    storm.note(error)
                    storm.waitForBus()
                }
                round += 1
            }
        }.start()

        for _ in 0..<Self.restarts {
            storm.setBus(up: false)
            bus.kill()
            _ = try await until(senderEvents, "the sender's disconnection") { $0 == .disconnected }
            _ = try await until(receiverEvents, "the receiver's disconnection") { $0 == .disconnected }
            try bus.start()
            _ = try await until(senderEvents, "the sender's reconnection") { $0 == .reconnected }
            _ = try await until(receiverEvents, "the receiver's reconnection") { $0 == .reconnected }
            storm.setBus(up: true)
            let before = receivedCount.load(ordering: .relaxed)
            _ = try await until(received, "storm signals after the restart") { $0 >= before + 200 }
            let churnedBefore = storm.subscribed.load(ordering: .relaxed)
            // Its AddMatch is answered behind the storm's signals the receiver still reads: with the
            // whole suite on 2 cores, once over 10 s.
            _ = try await until(churned, "a subscription after the restart", seconds: 60) { $0 > churnedBefore }
        }
        storm.stop.store(true, ordering: .relaxed)
        storm.setBus(up: true)
        storm.finished.wait()

        #expect(storm.unexpected.withLock { $0 }.isEmpty, "only .disconnected while the bus was down")
        #expect(storm.sent.load(ordering: .relaxed) > 0)
        #expect(storm.subscribed.load(ordering: .relaxed) > 0)
        // Both connections survived: a signal sent now arrives, and no churned rule is left behind.
        try sender.emit(said(.string("marker"), .uint64(1)))
        #expect(try await next(1, from: markers, "the marker after the storm").first?.uint64(at: 1) == 1)
        if !TestBusDaemon.isBroker {  // dbus-broker has no Debug.Stats to count rules with
            #expect(
                try bus.matchRuleCount(of: receiver.uniqueName) == 2, "only the marker's and the storm's rules are left"
            )
        }
        stormSignals.cancel()
    }
}

/// The first element of `sequence` that satisfies `predicate`, within the wait guard.
func until<S: AsyncSequence & Sendable>(
    _ sequence: S, _ what: String, seconds: Double = waitGuardSeconds,
    _ predicate: @escaping @Sendable (S.Element) -> Bool
) async throws -> S.Element where S.Element: Sendable, S.Failure == Never {
    try await within(what, seconds: seconds) {
        for await element in sequence where predicate(element) { return element }
        throw TestFailure("the sequence ended before \(what)")
    }
}

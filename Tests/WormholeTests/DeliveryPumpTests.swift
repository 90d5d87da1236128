// SPDX-License-Identifier: Apache-2.0
// The delivery pump and the `Subscription` handle on their own, with no bus, no files and no
// facade: a reader of plain numbers (`NumberReader`) drives them the way every kind of
// subscription does (it records what is pending, wakes the pump, and drains one batch per
// round through the shared drain). Nothing here sleeps to wait: a handler that must be slow
// blocks on a gate the test opens, and every wait is a semaphore with a bound.

import Dispatch
import Testing
import WormholeDBus
import WormholeSystem

@testable import Wormhole

@Suite("The delivery pump and its Subscription, without a bus")
struct DeliveryPumpTests {
    /// Long enough for any loaded machine; a wait that runs out is a failure, not a delay.
    static let bound = 20.0

    /// What the reader saw: every number whose handler call started, in order, how many rounds
    /// ran, and how many handler calls ran at once at most.
    struct Log: Sendable {
        var delivered: [Int] = []
        var rounds = 0
        var running = 0
        var mostAtOnce = 0
        var forgotten = 0
    }

    /// A reader of plain numbers: `offer` records them and wakes the pump; a round takes what is
    /// pending once (one batch per round, so what comes during a round needs the next one) and
    /// calls `handler` for each number through the shared drain, which stops when cancelled.
    final class NumberReader: SubscriptionCore {
        let pump: DeliveryPump
        let log = Locked(Log())
        private let pending = Locked<[Int]>([])
        private let handler: @Sendable (Int) -> Void

        init(_ delivery: DeliveryQueue, handler: @escaping @Sendable (Int) -> Void = { _ in }) {
            pump = DeliveryPump(executor: delivery.makeExecutor(label: "test.pump"))
            self.handler = handler
        }

        func offer(_ numbers: Int...) {
            pending.withLock { $0.append(contentsOf: numbers) }
            wake()
        }

        func drainPending() {
            log.withLock { $0.rounds += 1 }
            var taken = false
            drain { () -> [Int]? in
                if taken { return nil }
                taken = true
                return pending.withLock { $0.takeAll() }
            } deliver: { number in
                log.withLock { log in
                    log.running += 1
                    log.mostAtOnce = max(log.mostAtOnce, log.running)
                    log.delivered.append(number)
                }
                handler(number)
                log.withLock { $0.running -= 1 }
            }
        }

        func forgetPending() {
            pending.withLock { $0 = [] }
            log.withLock { $0.forgotten += 1 }
        }
    }

    /// A handler's gate: the handler of `number` says it entered and waits until the test opens
    /// the gate (opened at the end of the test whatever happens, so no thread is left waiting).
    final class Gate: Sendable {
        let number: Int
        let entered = DispatchSemaphore(value: 0)
        private let open = DispatchSemaphore(value: 0)

        init(at number: Int) { self.number = number }

        func pass(_ delivered: Int) {
            guard delivered == number else { return }
            entered.signal()
            _ = open.wait(timeout: .now() + DeliveryPumpTests.bound)
        }

        func release() { open.signal() }
    }

    /// Signals when `number` was delivered.
    final class Arrival: Sendable {
        let number: Int
        let semaphore = DispatchSemaphore(value: 0)
        init(of number: Int) { self.number = number }
        func saw(_ delivered: Int) { if delivered == number { semaphore.signal() } }
    }

    static func waited(_ semaphore: DispatchSemaphore) -> Bool {
        semaphore.wait(timeout: .now() + bound) == .success
    }

    /// Waits until every job submitted to `queue` so far has finished (a barrier on a concurrent
    /// queue), so that the log is final.
    static func settled(_ queue: DispatchQueue) -> Bool {
        let done = DispatchSemaphore(value: 0)
        queue.async(flags: .barrier) { done.signal() }
        return waited(done)
    }

    /// Offers 1 to a reader on `queue` whose handler of 1 is held, runs `during` while it is
    /// held, lets it go, and returns the log once `last` was delivered and `queue` is idle.
    static func heldRound(on queue: DispatchQueue, last: Int, during: (NumberReader) -> Void) -> Log {
        let gate = Gate(at: 1)
        let arrival = Arrival(of: last)
        defer { gate.release() }
        let reader = NumberReader(.queue(queue)) { number in
            gate.pass(number)
            arrival.saw(number)
        }
        let subscription = Subscription(core: reader) {}
        defer { subscription.cancel() }

        reader.offer(1)
        #expect(waited(gate.entered), "the first round is in its handler")
        during(reader)
        gate.release()
        #expect(waited(arrival.semaphore), "what was offered during the round is delivered after it")
        #expect(settled(queue))
        return reader.log.withLock { $0 }
    }

    @Test("wakes during a round cost one more round, which reads what they recorded in one batch")
    func coalescing() {
        let log = Self.heldRound(on: DispatchQueue(label: "test.pump.coalescing"), last: 101) { reader in
            for number in 2...101 { reader.offer(number) }
        }
        #expect(log.delivered == Array(1...101))
        #expect(log.rounds == 2, "100 wakes during the first round made exactly one more round")
    }

    @Test("a slow handler on a concurrent queue is never overlapped by the next round")
    func slowHandler() {
        let queue = DispatchQueue(label: "test.pump.concurrent", attributes: .concurrent)
        let log = Self.heldRound(on: queue, last: 50) { reader in
            // Offered from several threads while the handler is held: each is a wake.
            DispatchQueue.concurrentPerform(iterations: 49) { index in reader.offer(index + 2) }
            // Whatever a wake queued has started by the time a job queued after it ran: a round
            // started beside the held one (a broken pump) is in its handler by then.
            let marker = DispatchSemaphore(value: 0)
            queue.async { marker.signal() }
            #expect(Self.waited(marker))
        }
        #expect(log.mostAtOnce == 1, "two handler calls of one subscription never overlap, even on a concurrent queue")
        #expect(log.delivered.first == 1 && Set(log.delivered) == Set(1...50) && log.delivered.count == 50)
        #expect(log.rounds == 2)
    }

    @Test("nothing is delivered while suspended; resume delivers what was kept, then deliveries go on")
    func suspendAndResume() {
        // Rounds run inline (the I/O thread's executor): every delivery a call allows has
        // happened when it returns, so what did not happen will not.
        let reader = NumberReader(.ioThread)
        let subscription = Subscription(core: reader) {}
        defer { subscription.cancel() }

        reader.offer(1)
        #expect(reader.log.withLock(\.delivered) == [1])
        subscription.suspend()
        #expect(subscription.isSuspended)
        reader.offer(2)
        reader.offer(3)
        #expect(reader.log.withLock(\.delivered) == [1], "nothing is delivered while suspended")
        subscription.resume()
        #expect(!subscription.isSuspended)
        #expect(reader.log.withLock(\.delivered) == [1, 2, 3], "the resume delivered what was kept")
        subscription.resume()
        reader.offer(4)
        #expect(reader.log.withLock(\.delivered) == [1, 2, 3, 4], "then deliveries go on")
        #expect(reader.log.withLock(\.rounds) == 3)
    }

    @Test("cancel during a round: the handler call running finishes, no other starts, detach runs once")
    func cancelDuringRound() {
        let queue = DispatchQueue(label: "test.pump.cancel")
        let gate = Gate(at: 1)
        let detached = Locked(0)
        defer { gate.release() }
        let reader = NumberReader(.queue(queue)) { gate.pass($0) }
        let subscription = Subscription(core: reader) { detached.withLock { $0 += 1 } }

        reader.offer(1, 2, 3)
        #expect(Self.waited(gate.entered), "the round is in the handler of 1")
        subscription.cancel()
        #expect(subscription.isCancelled)
        reader.offer(4)
        gate.release()
        #expect(Self.settled(queue))
        let log = reader.log.withLock { $0 }
        #expect(log.delivered == [1], "2 and 3 were in the round's batch, 4 came after the cancel: none is delivered")
        #expect(log.rounds == 1)
        #expect(log.forgotten == 1)
        subscription.cancel()
        #expect(detached.withLock { $0 } == 1, "cancelling twice detaches once")
    }

    @Test("cancel from inside the handler: no further call, in this round or after")
    func cancelFromHandler() {
        let handle = Locked<Subscription?>(nil)
        let detached = Locked(0)
        let reader = NumberReader(.ioThread) { number in
            if number == 2 { handle.withLock { $0 }?.cancel() }
        }
        let subscription = Subscription(core: reader) { detached.withLock { $0 += 1 } }
        handle.withLock { $0 = subscription }
        defer { handle.withLock { $0 = nil } }

        reader.offer(1, 2, 3)
        #expect(reader.log.withLock(\.delivered) == [1, 2], "the call that cancelled finished; 3 never started")
        reader.offer(4)
        subscription.resume()
        #expect(reader.log.withLock(\.delivered) == [1, 2])
        #expect(reader.log.withLock(\.rounds) == 1)
        #expect(detached.withLock { $0 } == 1)
    }

    @Test("the inline fast path is taken only while the pump is idle: never beside a round, never while suspended")
    func inlineDeliveryOnlyWhenIdle() {
        let gate = Gate(at: 3)
        let last = Arrival(of: 5)
        defer { gate.release() }
        let reader = NumberReader(.ioThread) { number in
            gate.pass(number)
            last.saw(number)
        }
        let inline = Locked<[Int]>([])
        let subscription = Subscription(core: reader) {}
        defer { subscription.cancel() }

        // Idle: the caller delivers itself, here.
        let first = reader.deliverInline {
            false
        } deliver: {
            inline.withLock { $0.append(1) }
        }
        #expect(first && inline.withLock { $0 } == [1])
        // Suspended: the pump cannot be claimed; the caller queues.
        subscription.suspend()
        let held = reader.deliverInline {
            false
        } deliver: {
            inline.withLock { $0.append(2) }
        }
        #expect(!held && inline.withLock { $0 } == [1])
        subscription.resume()
        // A round runs on another thread (held in the handler of 3): the caller queues, and that
        // round's thread delivers what it queued after the handler returns.
        DispatchQueue.global().async { reader.offer(3) }
        #expect(Self.waited(gate.entered))
        let beside = reader.deliverInline {
            false
        } deliver: {
            inline.withLock { $0.append(4) }
        }
        #expect(!beside, "a round is running: no delivery beside it")
        reader.offer(5)
        gate.release()
        #expect(Self.waited(last.semaphore))
        #expect(inline.withLock { $0 } == [1])
        #expect(reader.log.withLock(\.delivered) == [3, 5])
        #expect(reader.log.withLock(\.mostAtOnce) == 1)
    }
}

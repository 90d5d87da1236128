// SPDX-License-Identifier: Apache-2.0
// The process's one place for work off the loop (WorkPool, WorkLane) and the one bounded wait
// (BoundedWait), each on a pool of the test's own: the counts are the pool's, not the process's
// (other suites use ProcessRuntime.shared.pool meanwhile). Counted, not timed: every wait here
// ends on an event, its deadline only a bound should the code under test be broken.

import Dispatch
import Testing
import WormholeSystem

@Suite("The work pool and the bounded wait")
struct WorkPoolTests {
    /// A bound for waits that end on an event; reached only when the code is broken.
    static func bound() -> DispatchTime { .now() + .seconds(20) }

    @Test("the pool's threads exist only while it has work, never more than its maximum")
    func threadsOnlyWhileWorking() {
        let pool = WorkPool(name: "test-pool", maximumThreads: 3)
        #expect(pool.threadCount == 0, "a pool with no work has no thread")
        let gate = BoundedWait(false)
        let running = BoundedWait(0)
        for _ in 0..<5 {
            pool.submit {
                running.change { $0 += 1 }
                _ = gate.wait(until: Self.bound()) { $0 ? true : nil }
            }
        }
        // Three jobs hold the three threads; the other two wait for one of them.
        #expect(running.wait(until: Self.bound()) { $0 == 3 ? true : nil } == true)
        #expect(pool.threadCount == 3)
        #expect(pool.threadsStarted == 3, "no thread beyond the maximum")
        gate.change { $0 = true }
        #expect(pool.waitUntilIdle(until: Self.bound()), "the threads end once the work is done")
        #expect(running.read { $0 } == 5, "every job ran")
        #expect(pool.threadCount == 0)
        #expect(pool.threadsStarted == 3, "the waiting jobs ran on the threads already there")
    }

    @Test("a lane runs its jobs one at a time, in the order submitted")
    func laneKeepsOrder() {
        let pool = WorkPool(name: "test-pool", maximumThreads: 4)
        let lane = pool.makeLane()
        let other = pool.makeLane()
        let order = Locked<[Int]>([])
        // Jobs of the lane running now, and whether two ever ran at once.
        let inside = Locked((running: 0, overlapped: false))
        let done = BoundedWait(0)
        for index in 0..<200 {
            lane.submit {
                inside.withLock {
                    $0.running += 1
                    if $0.running > 1 { $0.overlapped = true }
                }
                order.withLock { $0.append(index) }
                inside.withLock { $0.running -= 1 }
                done.change { $0 += 1 }
            }
            // Another lane's jobs run beside it on the same pool.
            other.submit { done.change { $0 += 1 } }
        }
        #expect(done.wait(until: Self.bound()) { $0 == 400 ? true : nil } == true)
        #expect(order.withLock { $0 } == Array(0..<200))
        #expect(!inside.withLock { $0.overlapped }, "two jobs of one lane never run at once")
        #expect(pool.waitUntilIdle(until: Self.bound()))
    }

    @Test("a lane's delayed job runs after the loop's deadline, with no thread waiting meanwhile")
    func laneDelayedJob() {
        let pool = WorkPool(name: "test-pool", maximumThreads: 1)
        let lane = pool.makeLane()
        let ran = BoundedWait<Void?>(nil)
        lane.submit(after: 20) { ran.answer(()) }
        #expect(pool.threadCount == 0, "the delay is kept by the loop, not by a thread of the pool")
        #expect(ran.answer(until: Self.bound()) != nil)
        #expect(pool.waitUntilIdle(until: Self.bound()))
    }

    @Test("a bounded wait returns the first answer, or nothing once its deadline passed")
    func boundedWait() {
        let answer = BoundedWait<Int?>(nil)
        #expect(answer.answer(until: .now() + .milliseconds(20)) == nil, "no answer: the deadline ends the wait")
        #expect(answer.answer(5))
        #expect(!answer.answer(6), "the first answer stays")
        #expect(answer.answer(until: .now()) == 5, "an answer given before the wait is seen at once")
        let count = BoundedWait(0)
        count.enter()
        #expect(!count.waitForNone(until: .now() + .milliseconds(20)))
        DispatchQueue.global().async { count.leave() }
        #expect(count.waitForNone(until: Self.bound()))
    }
}

// SPDX-License-Identifier: Apache-2.0
package import Dispatch
import Synchronization

/// The process's one place for work that must not run on the loop because it blocks: connecting
/// (which waits for the loop to greet the bus), attaching subscriptions once a bus appears, a
/// journal's first post and a sandboxed app's posts (which wait for the bus's confirmation).
/// ``ProcessRuntime/pool`` is the one instance; docs/architecture.md, *Threads and queues*,
/// lists what runs on it.
///
/// Its threads (`wormhole-work`) exist only while it has work: a job submitted while every
/// thread is busy starts one more, up to ``maximumThreads``, and a thread that finds nothing
/// left to do ends. An idle process, and a listener during a bus outage, hold none. Jobs start
/// in the order they were submitted; a ``WorkLane`` runs its own jobs one after the other, in
/// order, for an owner whose steps must not overlap.
package final class WorkPool: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        /// Where the next job is in `jobs` (taken jobs are dropped in bulk).
        var head = 0
        var threads = 0
        /// Threads between jobs, about to take the next one.
        var idle = 0
        var pending: Int { jobs.count - head }
    }

    /// The most threads at a time: jobs wait (for the bus, at most their own bounds), so a few
    /// let one slow wait not hold up the others, while a burst cannot make a thread per job.
    package let maximumThreads: Int
    private let name: String
    /// Every change wakes ``waitUntilIdle(until:)`` (the pool's paths are rare: connecting,
    /// first posts, a bus's arrival).
    private let state = BoundedWait(State())
    /// Threads started over the pool's life (tests read it).
    private let started = Atomic<UInt64>(0)

    package init(name: String = "wormhole-work", maximumThreads: Int = 4) {
        precondition(maximumThreads > 0)
        self.name = name
        self.maximumThreads = maximumThreads
    }

    /// Threads running now.
    package var threadCount: Int { state.read { $0.threads } }
    /// Threads started since the pool was made.
    package var threadsStarted: UInt64 { started.load(ordering: .relaxed) }

    /// Runs `job` on one of the pool's threads, starting one when every thread is busy and there
    /// is room for another.
    package func submit(_ job: @escaping @Sendable () -> Void) {
        let start = state.change { state -> Bool in
            state.jobs.append(job)
            guard state.pending > state.idle, state.threads < maximumThreads else { return false }
            state.threads += 1
            state.idle += 1
            return true
        }
        if start {
            started.add(1, ordering: .relaxed)
            DetachedThread.start(name: name) { [self] in work() }
        }
    }

    /// Whether every job submitted ran and every thread ended before `deadline`.
    package func waitUntilIdle(until deadline: DispatchTime) -> Bool {
        state.wait(until: deadline) { $0.threads == 0 && $0.pending == 0 ? true : nil } ?? false
    }

    /// A lane on this pool: its jobs run one at a time, in the order submitted.
    package func makeLane() -> WorkLane { WorkLane(pool: self) }

    /// A thread's life: takes jobs until none is left, then ends.
    private func work() {
        while let job = take() {
            job()
            state.change { $0.idle += 1 }
        }
    }

    private func take() -> (@Sendable () -> Void)? {
        state.change { state -> (@Sendable () -> Void)? in
            guard state.pending > 0 else {
                state.idle -= 1
                state.threads -= 1
                state.jobs = []
                state.head = 0
                return nil
            }
            let job = state.jobs[state.head]
            state.head += 1
            if state.head >= 64, state.head * 2 >= state.jobs.count {
                state.jobs.removeFirst(state.head)
                state.head = 0
            }
            // Busy from now on; counted idle again once the job returned.
            state.idle -= 1
            return job
        }
    }
}

/// Jobs of one owner on the process's ``WorkPool``, run one at a time in the order submitted (a
/// serial queue without a thread of its own): at most one of the pool's threads works for a
/// lane at a time, and none while the lane is empty.
package final class WorkLane: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        /// Whether a job of the pool is running this lane's jobs.
        var scheduled = false
    }

    private let pool: WorkPool
    private let state = Locked(State())

    fileprivate init(pool: WorkPool) { self.pool = pool }

    /// Runs `job` after the lane's earlier jobs, on one of the pool's threads.
    package func submit(_ job: @escaping @Sendable () -> Void) {
        let schedule = state.withLock { state -> Bool in
            state.jobs.append(job)
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
        if schedule { pool.submit { [self] in drain() } }
    }

    /// Submits `job` `milliseconds` from now: the process's loop keeps the time
    /// (``LoopDeadline``), no thread waits for it. Should the loop be stopping (the process
    /// exits), it is submitted at once.
    package func submit(after milliseconds: UInt64, _ job: @escaping @Sendable () -> Void) {
        do throws(SystemFailure) {
            try LoopDeadline.schedule(after: milliseconds) { [self] in submit(job) }
        } catch {
            submit(job)
        }
    }

    private func drain() {
        while true {
            let next = state.withLock { state -> (@Sendable () -> Void)? in
                if state.jobs.isEmpty {
                    state.scheduled = false
                    return nil
                }
                return state.jobs.removeFirst()
            }
            guard let next else { return }
            next()
        }
    }
}

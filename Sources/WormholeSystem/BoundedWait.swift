// SPDX-License-Identifier: Apache-2.0
package import Dispatch
import Glibc

/// The package's one way for a thread to block until another thread does something: a value
/// behind a pthread mutex, with a condition variable that every change signals. Every wait names
/// its deadline ("no call waits without a bound"): there is no wait without one, and a caller that
/// means to wait as long as its user wants (the command line's wait for a bus, ended by
/// `--timeout` or Ctrl-C) passes `.distantFuture` where it can be read.
///
/// It serves every blocking caller: one answer handed to a waiting thread (a confirmation by the
/// bus, a route's rules acknowledged, a greeting, a claimed sender name), a latch (a connection's
/// loop stopped), a count (posts in flight) and a generation (room in the outgoing queue).
/// docs/architecture.md, *Threads and queues*, lists who waits on what.
///
/// Why not `DispatchSemaphore`: a semaphore carries no value, so each caller paired it with a
/// lock of its own, and a wait without a deadline was one missing argument away. Why not
/// `Synchronization.Mutex`: ThreadSanitizer does not see futexes (``Locked``).
///
/// `@unchecked Sendable`: `state` is only touched with `mutex` held.
package final class BoundedWait<State>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var state: State

    package init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        var status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
        // Deadlines are on the monotonic clock, as `DispatchTime` is: a change of the wall clock
        // neither ends a wait early nor stretches it.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        status = pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        precondition(status == 0, "pthread_cond_init failed: \(status)")
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Changes the state and wakes every waiter (each checks its own condition again).
    @discardableResult
    package func change<Result>(_ body: (inout State) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        let result = body(&state)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
        return result
    }

    /// Reads the state without waking anyone.
    package func read<Result>(_ body: (State) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(state)
    }

    /// Blocks until `ready` returns a value (it is called with the lock held, first at once, then
    /// after each change), or until `deadline` passes: `nil` then. `ready` may change the state
    /// (take what it waited for).
    package func wait<Result>(until deadline: DispatchTime, for ready: (inout State) -> Result?) -> Result? {
        var end = Self.monotonic(deadline)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let result = ready(&state) { return result }
            if pthread_cond_timedwait(condition, mutex, &end) == ETIMEDOUT { return ready(&state) }
        }
    }

    /// `deadline` as a time of `CLOCK_MONOTONIC`: now on that clock plus what is left of it.
    private static func monotonic(_ deadline: DispatchTime) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let current = DispatchTime.now().uptimeNanoseconds
        let left = deadline.uptimeNanoseconds > current ? deadline.uptimeNanoseconds - current : 0
        // `.distantFuture`, and anything past a century, waits a century.
        let capped = min(left, 100 * 365 * 86_400 * 1_000_000_000)
        let nanoseconds = Int(now.tv_nsec) + Int(capped % 1_000_000_000)
        return timespec(
            tv_sec: now.tv_sec + Int(capped / 1_000_000_000) + nanoseconds / 1_000_000_000,
            tv_nsec: nanoseconds % 1_000_000_000)
    }
}

/// A wait for one answer: `BoundedWait<Value?>(nil)`, answered once with ``answer(_:)``.
extension BoundedWait {
    /// Hands over the answer, unless one was given already (the first one stays); whether this
    /// one was the first.
    @discardableResult
    package func answer<Value>(_ value: Value) -> Bool where State == Value? {
        change { state in
            if state != nil { return false }
            state = value
            return true
        }
    }

    /// The answer once given (it stays, for every other waiter), or `nil` when `deadline` passed first.
    package func answer<Value>(until deadline: DispatchTime) -> Value? where State == Value? {
        wait(until: deadline) { $0 }
    }
}

extension BoundedWait where State == Int {
    /// Counts one more piece of work in flight.
    package func enter() { change { $0 += 1 } }

    /// Counts one piece of work done.
    package func leave() { change { $0 -= 1 } }

    /// Whether every piece of work counted ended before `deadline`.
    package func waitForNone(until deadline: DispatchTime) -> Bool {
        wait(until: deadline) { $0 == 0 ? true : nil } ?? false
    }
}

// SPDX-License-Identifier: Apache-2.0
import Glibc

/// A value that threads share behind a `pthread_mutex_t`.
///
/// Why not `Synchronization.Mutex`: on Linux it is built directly on futexes, which
/// ThreadSanitizer does not see, so every access through it is reported as a race and a
/// sanitizer run proves nothing. A pthread mutex is intercepted by both ThreadSanitizer and
/// the thread checkers of valgrind, so the ownership storm can be checked with 0 reports.
/// The cost is the same on the uncontended path (one atomic compare-and-swap each way).
///
/// `@unchecked Sendable`: `value` is only touched while `mutex` is held.
package final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let mutex = PThreadMutex()
    /// Only touched with `mutex` held, so the dynamic exclusivity check of a class's property
    /// (a thread-local access set, per call) proves nothing the mutex does not.
    @usableFromInline @exclusivity(unchecked) var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value. Inlinable, so a caller in another module
    /// gets a copy specialised for its types (no generic metadata looked up per call).
    @inlinable
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return try body(&value)
    }
}

/// A bare pthread mutex, for a critical section that guards no value of its own.
/// `@unchecked Sendable`: the mutex is the synchronisation.
package final class PThreadMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        // pthread_mutex_init initialises the raw memory itself.
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    package func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }
}

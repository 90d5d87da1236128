// SPDX-License-Identifier: Apache-2.0
import CWormholeSystem
import Glibc
import WormholeSystem

/// The deliveries of one context that wait for `wh_context_dispatch`, and the eventfd that is
/// readable while any of them may run.
///
/// The library's loop thread hands every delivery of a subscription made through the context to
/// ``enqueue(_:for:)`` (the Swift subscriptions deliver on `DeliveryQueue.ioThread`, so nothing
/// runs on a thread of the library but this append); the app's thread runs them in
/// ``dispatch()``. A suspended subscription's entries stay queued and do not count as ready, so
/// the descriptor does not wake a loop for what may not run.
///
/// `@unchecked Sendable`: every mutable field, and every ``CSubscriptionState`` of the
/// subscriptions queued here, is touched only with `mutex` held.
final class CDeliveryQueue: @unchecked Sendable {
    /// One delivery: the subscription it belongs to and the call that runs its handler.
    struct Entry {
        let subscription: CSubscription
        let run: () -> Void
    }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// Signalled whenever a handler call ends (a cancelling thread waits for one).
    private let ended = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Held by the thread in `dispatch()`, so two threads dispatching take turns.
    private let dispatching = PThreadMutex()
    /// The eventfd: readable while `ready > 0`.
    let descriptor: Int32
    private var entries: [Entry] = []
    private var head = 0
    /// Entries whose subscription is not suspended.
    private var ready = 0
    /// Whether the eventfd holds a count (it is written once per 0-to-ready change).
    private var signalled = false
    /// The thread running a handler now, if any.
    private var runningThread: pthread_t?
    private var closed = false

    init() throws {
        let descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard descriptor >= 0 else {
            throw CFailure(.io, name: "io", "eventfd failed: \(String(cString: strerror(errno)))")
        }
        self.descriptor = descriptor
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(ended, nil)
    }

    deinit {
        if !closed { Glibc.close(descriptor) }
        pthread_cond_destroy(ended)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        ended.deallocate()
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Whether the calling thread is running one of this queue's handlers now.
    var isOnDispatchingThread: Bool {
        locked { runningThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    func isCancelled(_ subscription: CSubscription) -> Bool {
        locked { subscription.state.cancelled }
    }

    /// Queues a delivery (from the library's loop thread, or a resuming thread); dropped when
    /// the subscription is cancelled or the queue closed.
    func enqueue(_ run: @escaping () -> Void, for subscription: CSubscription) {
        locked {
            let state = subscription.state
            guard !closed, !state.cancelled else { return }
            entries.append(Entry(subscription: subscription, run: run))
            state.pending += 1
            if !state.suspended { addReady(1) }
        }
    }

    /// Runs the handlers of the entries ready now, on the calling thread; returns how many ran.
    func dispatch() -> Int {
        if isOnDispatchingThread { return 0 }
        dispatching.lock()
        defer { dispatching.unlock() }
        var budget = locked { ready }
        var ran = 0
        while budget > 0, let entry = takeReady() {
            entry.run()
            ran += 1
            budget -= 1
            let destroy = locked { () -> Bool in
                runningThread = nil
                let state = entry.subscription.state
                state.running = false
                pthread_cond_broadcast(ended)
                return state.cancelled && state.takeDestroy()
            }
            if destroy { entry.subscription.destroy() }
        }
        return ran
    }

    /// Takes the first entry whose subscription is not suspended, and marks it running.
    private func takeReady() -> Entry? {
        locked {
            guard ready > 0 else { return nil }
            var index = head
            while index < entries.count, entries[index].subscription.state.suspended { index += 1 }
            guard index < entries.count else { return nil }
            let entry = entries[index]
            if index == head {
                head += 1
                if head > 256 && head * 2 > entries.count {
                    entries.removeFirst(head)
                    head = 0
                }
            } else {
                entries.remove(at: index)
            }
            entry.subscription.state.pending -= 1
            entry.subscription.state.running = true
            runningThread = pthread_self()
            addReady(-1)
            return entry
        }
    }

    /// Changes the ready count and the eventfd with it. With `mutex` held.
    private func addReady(_ change: Int) {
        ready += change
        if ready > 0 && !signalled {
            var one: UInt64 = 1
            _ = write(descriptor, &one, 8)
            signalled = true
        } else if ready == 0 && signalled {
            var count: UInt64 = 0
            _ = read(descriptor, &count, 8)
            signalled = false
        }
    }

    /// Marks a subscription suspended or resumed: its queued entries stop or start counting.
    func setSuspended(_ suspended: Bool, _ subscription: CSubscription) {
        locked {
            let state = subscription.state
            guard state.suspended != suspended, !state.cancelled else { return }
            state.suspended = suspended
            addReady(suspended ? -state.pending : state.pending)
        }
    }

    /// Marks a subscription cancelled and drops its entries. Returns false when it already was;
    /// otherwise whether its handler runs now on another thread.
    func cancel(_ subscription: CSubscription) -> (first: Bool, runningElsewhere: Bool) {
        locked {
            let state = subscription.state
            guard !state.cancelled else { return (false, false) }
            state.cancelled = true
            if state.pending > 0 {
                // Only the entries not taken yet (from `head` on) are the subscription's pending ones.
                let kept = entries[head...].filter { $0.subscription !== subscription }
                let removed = entries.count - head - kept.count
                entries = Array(kept)
                head = 0
                if !state.suspended { addReady(-removed) }
                state.pending = 0
            }
            let here = runningThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            return (true, state.running && !here)
        }
    }

    /// Waits until the subscription's handler is not running, then whether its destroy
    /// function is the caller's to run (false while it runs on this thread: the dispatcher runs
    /// it when the handler returns).
    func settle(_ subscription: CSubscription) -> Bool {
        locked {
            let state = subscription.state
            let here = runningThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            if here && state.running { return false }
            while state.running { pthread_cond_wait(ended, mutex) }
            return state.takeDestroy()
        }
    }

    /// Drops every entry and closes the descriptor (the context is freed).
    func close() {
        locked {
            guard !closed else { return }
            closed = true
            entries.removeAll()
            head = 0
            ready = 0
            Glibc.close(descriptor)
        }
    }
}

/// What the delivery queue knows of one subscription; only touched with its queue's mutex held.
final class CSubscriptionState {
    var pending = 0
    var suspended = false
    var cancelled = false
    var running = false
    private var destroyTaken = false

    /// True the first time only: whoever gets it runs the destroy function.
    func takeDestroy() -> Bool {
        if destroyTaken { return false }
        destroyTaken = true
        return true
    }
}

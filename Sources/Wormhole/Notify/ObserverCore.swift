// SPDX-License-Identifier: Apache-2.0
import WormholeDBus
import WormholeSystem

/// A notification listener's reader for the ``DeliveryPump``, the one path every delivery takes
/// (posts, catch-ups and resumed deliveries alike), behind its ``PostRoute``. Every post is
/// delivered, in order (a notification has no state to coalesce into), except while suspended,
/// when the latest stands for all.
final class ObserverCore: SubscriptionCore {
    private struct State {
        var suspended = false
        var pending: DarwinNotification?
        var cancelled = false
        /// Posts waiting for the pump's next round.
        var backlog: [DarwinNotification] = []
    }

    let pump: DeliveryPump
    private let handler: @Sendable (DarwinNotification) -> Void
    private let state = Locked(State())

    init(executor: DeliveryExecutor, handler: @escaping @Sendable (DarwinNotification) -> Void) {
        pump = DeliveryPump(executor: executor)
        self.handler = handler
    }

    var isSuspended: Bool { state.withLock { $0.suspended } }

    /// Delivers through the pump, or keeps the latest while suspended.
    func offer(_ note: DarwinNotification) {
        let now = state.withLock { state -> DarwinNotification? in
            if state.cancelled { return nil }
            if state.suspended {
                var merged = note
                if let earlier = state.pending {
                    merged.coalescedCount = earlier.coalescedCount + note.coalescedCount
                    if note.reason == .posted && earlier.reason == .catchUp { merged.reason = .catchUp }
                }
                state.pending = merged
                return nil
            }
            return note
        }
        if let now { dispatch(now) }
    }

    /// On the I/O thread with nothing queued: calls the handler here, with no queueing (the
    /// common case of a listener that keeps up). Otherwise queues `note` for the pump.
    private func dispatch(_ note: DarwinNotification) {
        if pump.executor.queue == nil, pump.claim() {
            let direct = state.withLock { state -> Bool in
                if state.cancelled { return false }
                if state.backlog.isEmpty { return true }
                state.backlog.append(note)
                return false
            }
            if direct {
                HopTrace.mark(.handlerEntered)
                handler(note)
            } else {
                drainPending()
            }
            finishClaim()
            return
        }
        let queued = state.withLock { state -> Bool in
            if state.cancelled { return false }
            state.backlog.append(note)
            return true
        }
        if queued { wake() }
    }

    /// The pump's round: every post queued, in order, until cancelled. Whether the listener is
    /// cancelled is checked under the lock that ``cancel()`` takes before each call.
    func drainPending() {
        while true {
            let batch = state.withLock { state -> [DarwinNotification] in
                if state.cancelled { return [] }
                defer { state.backlog = [] }
                return state.backlog
            }
            if batch.isEmpty { return }
            for note in batch {
                if isCancelled { return }
                handler(note)
            }
        }
    }

    /// Holds the pump (posts already queued wait too) and keeps the latest post from now on.
    func suspend() {
        state.withLock { $0.suspended = true }
        pump.suspended()
    }

    /// Queues the latest post kept while suspended after those queued before, then lets the pump
    /// deliver them (with `.ioThread`, on the calling thread).
    func resume() {
        let queued = state.withLock { state -> Bool in
            state.suspended = false
            defer { state.pending = nil }
            guard !state.cancelled, let pending = state.pending else { return false }
            state.backlog.append(pending)
            return true
        }
        if queued { wake() }
        resumeRounds()
    }

    func forgetPending() {
        state.withLock { state in
            state.cancelled = true
            state.backlog = []
            state.pending = nil
        }
    }
}

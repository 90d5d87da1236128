// SPDX-License-Identifier: Apache-2.0
import WormholeDBus
import WormholeSystem

/// A notification listener's reader for the ``DeliveryPump``, the one path every delivery takes
/// (posts, catch-ups and resumed deliveries alike), behind its ``PostRoute``. Every post is
/// delivered, in order (a notification has no state to coalesce into), except while suspended,
/// when the latest stands for all.
final class ObserverCore: SubscriptionCore {
    /// What the reader keeps; whether it is suspended or cancelled is the pump's.
    private struct State {
        /// The latest post while suspended, standing for all of them.
        var pending: DarwinNotification?
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

    /// Delivers through the pump, or keeps the latest while suspended. The pump's state is read
    /// inside the reader's lock (its lock is a leaf), which ``resume()`` holds while it releases
    /// the kept post: a post offered meanwhile cannot pass it.
    func offer(_ note: DarwinNotification) {
        let now = state.withLock { state -> DarwinNotification? in
            if pump.isCancelled { return nil }
            if pump.isSuspended {
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
        let inline = deliverInline {
            state.withLock { state -> Bool in
                if pump.isCancelled { return true }
                if state.backlog.isEmpty { return false }
                state.backlog.append(note)
                return true
            }
        } deliver: {
            HopTrace.mark(.handlerEntered)
            handler(note)
        }
        if inline { return }
        let queued = state.withLock { state -> Bool in
            if pump.isCancelled { return false }
            state.backlog.append(note)
            return true
        }
        if queued { wake() }
    }

    /// The pump's round: every post queued, in order, until cancelled.
    func drainPending() {
        drain {
            state.withLock { $0.backlog.takeAll() }
        } deliver: {
            handler($0)
        }
    }

    /// Queues the latest post kept while suspended after those queued before, then lets the pump
    /// deliver them (with `.ioThread`, on the calling thread).
    func resume() {
        let run = state.withLock { state -> Bool in
            var released = false
            if let pending = state.pending, !pump.isCancelled {
                state.backlog.append(pending)
                released = true
            }
            state.pending = nil
            return pump.resumed(woken: released)
        }
        if run { startRounds() }
    }

    func forgetPending() {
        state.withLock { state in
            state.backlog = []
            state.pending = nil
        }
    }
}

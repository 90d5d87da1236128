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
    ///
    /// On the I/O thread with nothing queued, the handler is called here, with no queueing (the
    /// common case of a listener that keeps up): the pump is claimed in the same look that
    /// finds it neither cancelled nor suspended and the backlog empty, one lock round trip of
    /// each (``DeliveryPump/look(claimingIdle:)``). Otherwise `note` is queued for the pump.
    func offer(_ note: DarwinNotification) {
        enum Next { case none, inline, wake }
        let next = state.withLock { state -> Next in
            switch pump.look(claimingIdle: state.backlog.isEmpty) {
            case .cancelled: return .none
            case .suspended:
                var merged = note
                if let earlier = state.pending {
                    merged.coalescedCount = earlier.coalescedCount + note.coalescedCount
                    if note.reason == .posted && earlier.reason == .catchUp { merged.reason = .catchUp }
                }
                state.pending = merged
                return .none
            case .claimed: return .inline
            case .busy:
                state.backlog.append(note)
                return .wake
            }
        }
        switch next {
        case .none: return
        case .inline:
            HopTrace.mark(.handlerEntered)
            handler(note)
            runClaimedRounds()
        case .wake: wake()
        }
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

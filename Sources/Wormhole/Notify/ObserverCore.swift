import WormholeDBus
import WormholeSystem

/// The shared part of a notification listener: what it listens to, suspension, and its reader
/// for the ``DeliveryPump``, the one path every delivery takes (posts, catch-ups and resumed
/// deliveries alike). Every post is delivered, in order (a notification has no state to
/// coalesce into), except while suspended, when the latest stands for all.
final class ObserverCore: SubscriptionCore {
    private struct State {
        var suspended = false
        var pending: DarwinNotification?
        var cancelled = false
        var routeID: UInt64?
        /// Posts waiting for the pump's next round.
        var backlog: [DarwinNotification] = []
        /// Its doorbell registration (directory hash, ID), while it has one.
        var doorbell: (directory: UInt64, id: UInt64)?
        /// The merge of its rings and signals (contract §9): each post once, in its sender's order.
        var order = PostOrder()
    }

    /// The observed name, or prefix (ending in `/`).
    let target: NotificationName
    let isPrefix: Bool
    /// The target's bucket interface (exact names only), computed once.
    let bucket: InterfaceName
    let options: ObserverOptions
    let pump: DeliveryPump
    private let handler: @Sendable (DarwinNotification) -> Void
    private let state = Locked(State())

    init(
        target: NotificationName, isPrefix: Bool, options: ObserverOptions, executor: DeliveryExecutor,
        handler: @escaping @Sendable (DarwinNotification) -> Void
    ) {
        self.target = target
        self.isPrefix = isPrefix
        bucket = NotifyContract.bucket(for: target.rawValue)
        self.options = options
        pump = DeliveryPump(executor: executor)
        self.handler = handler
    }

    var routeID: UInt64? {
        get { state.withLock { $0.routeID } }
        set { state.withLock { $0.routeID = newValue } }
    }

    /// The doorbell registration, set once the observer is active on the bus.
    var doorbell: (directory: UInt64, id: UInt64)? {
        get { state.withLock { $0.doorbell } }
        set { state.withLock { $0.doorbell = newValue } }
    }

    /// Takes the doorbell registration away (to unregister it once).
    func takeDoorbell() -> (directory: UInt64, id: UInt64)? {
        state.withLock { state in
            defer { state.doorbell = nil }
            return state.doorbell
        }
    }

    /// A ring for this observer came: the rings to deliver now, in order (``PostOrder``).
    func order(_ ring: PostOrder.Ring) -> [PostOrder.Ring] {
        state.withLock { state in state.cancelled ? [] : state.order.ring(ring) }
    }

    /// A numbered signal for this observer came: whether to deliver it, and the rings that
    /// waited for it.
    func order(signalFrom sender: String, name: String, serial: UInt32) -> (deliver: Bool, then: [PostOrder.Ring]) {
        state.withLock { state in state.order.signal(sender: sender, name: name, serial: serial) }
    }

    /// The connection dropped the signal of a post this observer's ring delivered.
    func absorbed(sender: String, name: String, serial: UInt32) {
        state.withLock { $0.order.absorbed(sender: sender, name: name, serial: serial) }
    }

    /// Forgets the rings and signals seen: the connection is new, and no signal of before will
    /// come on it.
    func resetOrder() { state.withLock { $0.order.reset() } }

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

    func suspend() { state.withLock { $0.suspended = true } }

    func resume() {
        let pending = state.withLock { state -> DarwinNotification? in
            state.suspended = false
            defer { state.pending = nil }
            return state.cancelled ? nil : state.pending
        }
        if let pending { dispatch(pending) }
    }

    func forgetPending() {
        state.withLock { state in
            state.cancelled = true
            state.backlog = []
            state.pending = nil
        }
    }
}

import WormholeDBus

/// The shared part of a notification listener: what it listens to, suspension, and its reader
/// for the ``DeliveryPump``, the one path every delivery takes (posts, catch-ups and resumed
/// deliveries alike). Every post is delivered, in order (a notification has no state to
/// coalesce into), except while suspended, when the latest stands for all.
final class ObserverCore: PumpedDelivery {
    private struct State {
        var suspended = false
        var pending: DarwinNotification?
        var cancelled = false
        var routeID: UInt64?
        /// Posts waiting for the pump's next round.
        var backlog: [DarwinNotification] = []
        /// Its doorbell registration (directory hash, ID), while it has one.
        var doorbell: (directory: UInt64, id: UInt64)?
        /// The rings delivered whose bus signal has not come yet (at most ``ringMemory``), and
        /// every ring in the order it came (`rungOrder[rungHead...]`; some already consumed).
        var rung = Set<RingKey>()
        var rungOrder: [RingKey] = []
        var rungHead = 0
        /// Rung too far ahead of the bus: not registered with the doorbell until the bus catches up.
        var doorbellPaused = false
        /// Signals delivered by the bus alone since the pause.
        var signalsWhilePaused = 0
    }

    /// A post as both its ring and its signal identify it.
    struct RingKey: Hashable {
        var sender: String
        var serial: UInt32
    }

    /// How far the doorbell may run ahead of the bus for one observer: rings delivered whose
    /// signals have not come. When the bus holds a backlog for it (it was stopped or slow while a
    /// storm was posted: the daemon keeps the signals, tens of thousands, while the new rings
    /// arrive at once; measured, 55,122 of 100,000 posts delivered twice when rings were only
    /// remembered up to 4,096), the observer stops being rung (its registration is removed)
    /// and is woken by the bus alone until that backlog is down to ``doorbellResumeAt``, or the
    /// bus alone delivered as many signals as the pause began with (what is still remembered then
    /// are signals that will never come: replaced in their sender's full queue, or lost).
    static let doorbellPauseAt = 8_192
    static let doorbellResumeAt = 1_024
    /// The most rings remembered, whatever happens: a signal that never comes (its sender was
    /// killed between ring and signal, its signal was replaced by a newer one in its sender's
    /// full queue, the bus went away) leaves one here. Past this the oldest is forgotten, and
    /// its post, if its signal still comes, is delivered twice; pausing keeps the count far below.
    static let ringMemory = 65_536

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

    var isCancelled: Bool { state.withLock { $0.cancelled } }

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

    /// A ring is being delivered: its signal, when it comes, is not delivered again. Returns
    /// true when the observer is now too far ahead of the bus and must stop being rung.
    func noteRing(sender: String, serial: UInt32) -> Bool {
        state.withLock { state -> Bool in
            let key = RingKey(sender: sender, serial: serial)
            state.rung.insert(key)
            state.rungOrder.append(key)
            // The oldest first, in O(1) each; what was consumed meanwhile is just passed over.
            while state.rung.count > Self.ringMemory {
                state.rung.remove(state.rungOrder[state.rungHead])
                state.rungHead += 1
            }
            if state.rungOrder.count - state.rungHead > 2 * Self.ringMemory {
                // Mostly consumed: keep what is still pending, in order.
                state.rungOrder = state.rungOrder[state.rungHead...].filter { state.rung.contains($0) }
                state.rungHead = 0
            } else if state.rungHead > 4_096 && state.rungHead * 2 > state.rungOrder.count {
                state.rungOrder.removeFirst(state.rungHead)
                state.rungHead = 0
            }
            if !state.doorbellPaused && state.rung.count >= Self.doorbellPauseAt {
                state.doorbellPaused = true
                return true
            }
            return false
        }
    }

    /// Whether the signal from `sender` with `serial` was rung already (then it is forgotten;
    /// only looked up when `mayHaveRung`), and whether the observer, paused, has caught up enough
    /// to be rung again. `final`: the signal is delivered by the bus unless it was rung.
    func consumeRing(sender: String, serial: UInt32, mayHaveRung: Bool, final: Bool) -> (consumed: Bool, resume: Bool) {
        state.withLock { state -> (consumed: Bool, resume: Bool) in
            let consumed = mayHaveRung && state.rung.remove(RingKey(sender: sender, serial: serial)) != nil
            var resume = false
            if state.doorbellPaused && !state.cancelled {
                if !consumed && final { state.signalsWhilePaused += 1 }
                if state.rung.count <= Self.doorbellResumeAt || state.signalsWhilePaused >= Self.doorbellPauseAt {
                    state.doorbellPaused = false
                    state.signalsWhilePaused = 0
                    resume = true
                }
            }
            guard consumed else { return (false, resume) }
            if state.rung.isEmpty {
                // Everything rung has been seen: the order is no longer needed (and a storm's
                // memory is given back).
                if state.rungOrder.count > 4_096 {
                    state.rungOrder = []
                    state.rung = []
                } else {
                    state.rungOrder.removeAll(keepingCapacity: true)
                }
                state.rungHead = 0
            }
            return (true, resume)
        }
    }

    /// Forgets every ring whose signal has not come (the bus restarted: those signals never
    /// will), and is rung again if it was paused.
    func forgetRings() -> Bool {
        state.withLock { state in
            state.rung = []
            state.rungOrder = []
            state.rungHead = 0
            state.signalsWhilePaused = 0
            defer { state.doorbellPaused = false }
            return state.doorbellPaused && !state.cancelled
        }
    }

    /// Whether it may have been rung (then a signal must be checked against its rings).
    var mayBeRung: Bool { state.withLock { $0.doorbell != nil || !$0.rung.isEmpty } }
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

    /// Marks the listener cancelled; whether it already was.
    func cancel() -> Bool {
        _ = pump.cancel()
        return state.withLock { state in
            defer {
                state.cancelled = true
                state.backlog = []
                state.pending = nil
            }
            return state.cancelled
        }
    }
}

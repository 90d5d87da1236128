import Synchronization
import WormholeDBus

/// The shared part of an observer: what it observes, suspension, coalescing, cancellation,
/// and the one path every delivery takes (posts, catch-ups and resumed deliveries alike).
final class ObserverCore: Sendable {
    private struct State {
        var suspended = false
        var pending: DarwinNotification?
        var cancelled = false
        var routeID: UInt64?
        /// A handler call is running (on whichever thread): later deliveries wait in `backlog`
        /// and the running thread makes them, so two calls never overlap.
        var running = false
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
    private let executor: DeliveryExecutor
    private let handler: @Sendable (DarwinNotification) -> Void
    private let state = Mutex(State())

    init(
        target: NotificationName, isPrefix: Bool, options: ObserverOptions, executor: DeliveryExecutor,
        handler: @escaping @Sendable (DarwinNotification) -> Void
    ) {
        self.target = target
        self.isPrefix = isPrefix
        bucket = NotifyContract.bucket(for: target.rawValue)
        self.options = options
        self.executor = executor
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

    /// Delivers through the executor, or keeps the latest while suspended.
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

    /// Runs `note` through the executor (inline, without making a closure, on the I/O thread).
    private func dispatch(_ note: DarwinNotification) {
        if executor.queue == nil {
            run(note)
        } else {
            executor.run { self.run(note) }
        }
    }

    /// Calls the handler with `note`, or hands it to the thread already calling it. Whether
    /// the observer is cancelled is checked under the same lock that ``cancel()`` takes, so no
    /// call starts once ``cancel()`` has returned.
    private func run(_ note: DarwinNotification) {
        let mine = state.withLock { state -> Bool in
            if state.cancelled { return false }
            if state.running {
                state.backlog.append(note)
                return false
            }
            state.running = true
            return true
        }
        guard mine else { return }
        var current = note
        while true {
            handler(current)
            let next = state.withLock { state -> DarwinNotification? in
                if state.cancelled || state.backlog.isEmpty {
                    state.running = false
                    state.backlog = []
                    return nil
                }
                return state.backlog.removeFirst()
            }
            guard let next else { return }
            current = next
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

    /// Marks the observer cancelled; whether it already was.
    func cancel() -> Bool {
        state.withLock { state in
            defer {
                state.cancelled = true
                state.backlog = []
                state.pending = nil
            }
            return state.cancelled
        }
    }
}

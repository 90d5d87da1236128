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
        /// The rings delivered whose bus signal has not come yet, by (sender's unique name,
        /// serial), each with the order it came in; at most ``ringMemory``.
        var rung: [RingKey: UInt64] = [:]
        var ringCount: UInt64 = 0
    }

    /// A post as both its ring and its signal identify it.
    struct RingKey: Hashable {
        var sender: String
        var serial: UInt32
    }

    /// How many rings an observer remembers until their signals come. More than can be queued
    /// unread: an endpoint's queue holds at most `net.unix.max_dgram_qlen` (512 by default)
    /// datagrams, and a ringing socket's send buffer fewer still, and a stopped observer reads
    /// them all before the signals that follow them. A signal that never comes (its sender was
    /// killed between ring and signal, or the signal was replaced by a newer one in its sender's
    /// queue, or the bus is away) leaves one here until the oldest half is dropped.
    static let ringMemory = 4_096

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

    /// A ring is being delivered: its signal, when it comes, is not delivered again.
    func noteRing(sender: String, serial: UInt32) {
        state.withLock { state in
            if state.rung.count >= Self.ringMemory {
                let oldest = state.rung.sorted { $0.value < $1.value }.prefix(Self.ringMemory / 2)
                for (key, _) in oldest { state.rung.removeValue(forKey: key) }
            }
            state.ringCount += 1
            state.rung[RingKey(sender: sender, serial: serial)] = state.ringCount
        }
    }

    /// Whether the signal from `sender` with `serial` was rung already (then it is forgotten).
    func consumeRing(sender: String, serial: UInt32) -> Bool {
        state.withLock { $0.rung.removeValue(forKey: RingKey(sender: sender, serial: serial)) != nil }
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

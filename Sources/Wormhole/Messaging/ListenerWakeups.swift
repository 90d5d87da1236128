import Dispatch
import Logging
import Synchronization
public import WormholeDBus

extension MessageCenter {
    /// How a wormhole's listeners are woken now (``MessageCenter/wakeSource``).
    public enum WakeSource: Sendable, Hashable, CustomStringConvertible {
        /// `Posted` and `Message` signals on the bus (contract §1, §3, §7): the normal way.
        case bus
        /// inotify on the wormhole directory, because the bus cannot be reached or was lost
        /// (the error says why). A file renamed onto `ID.json` or removed wakes the listeners of
        /// `ID` as a post would, with the same delivery rules (``MessageDelivery/sentAt`` is
        /// `nil`: no signal carried it). Transient messages need the bus. As soon as the bus can
        /// be reached the listeners' rules are added, the watch stops and every listener catches
        /// up (``MessageDelivery/Reason/catchUp``).
        case directory(BusError)
        /// Neither: the bus cannot be reached and the wormhole directory cannot be watched either
        /// (the error says both; typically the per-user inotify limit
        /// `fs.inotify.max_user_instances` is reached, and it names that limit). The listeners wait
        /// for the bus and catch up when it can be reached, as after ``directory(_:)``.
        case waitingForBus(BusError)

        public var description: String {
            switch self {
            case .bus: "bus"
            case .directory(let error): "directory (\(error.message))"
            case .waitingForBus(let error): "waiting for the bus (\(error.message))"
            }
        }
    }

    /// How this wormhole's listeners are woken now: ``WakeSource/bus``, or
    /// ``WakeSource/directory(_:)`` while the bus cannot be reached (`.bus` while it has none).
    public var wakeSource: WakeSource { wakeups.source }

    /// Calls `handler` with the new ``WakeSource`` each time this wormhole's listeners switch
    /// from the bus to the directory watch or back, until the subscription is cancelled or
    /// released. On the switch back it runs once the listeners' catch-up was asked for.
    public func onWakeSourceChange(
        on delivery: DeliveryQueue = .serial, _ handler: @escaping @Sendable (WakeSource) -> Void
    ) -> WakeSourceSubscription {
        wakeups.subscribe(delivery.makeExecutor(label: "wormhole.wake-source"), handler)
    }
}

/// A subscription to a wormhole's ``MessageCenter/WakeSource`` changes
/// (``MessageCenter/onWakeSourceChange(on:_:)``): active until cancelled or released.
public final class WakeSourceSubscription: SubscriptionHandle {
    private let wakeups: ListenerWakeups
    private let id: UInt64
    private let cancelled = Atomic<Bool>(false)

    init(wakeups: ListenerWakeups, id: UInt64) {
        self.wakeups = wakeups
        self.id = id
    }

    deinit { cancel() }

    public func cancel() {
        if cancelled.exchange(true, ordering: .acquiringAndReleasing) { return }
        wakeups.unsubscribe(id)
    }

    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
}

/// A wormhole's listeners, and how they are woken: on the bus when it can be reached; else (for
/// the listeners that allow it, ``MessageCenter/ListenOptions/wakesThroughDirectoryWithoutBus``)
/// through a ``DirectoryWatch`` on the wormhole directory, while the bus is waited for
/// (`BusArrivalWatch`: inotify on a `unix:path=` socket's directory, else a backoff). When the
/// bus can be reached, the listeners' rules are added (batched), the watch stops and every
/// listener catches up. A connection lost later (`disconnected`) starts the watch again until
/// the connection's own reconnect.
///
/// Transitions run on one serial queue; the state is behind a `Mutex`; the listeners' cores are
/// called outside it.
final class ListenerWakeups: Sendable {
    private struct Registration {
        weak var listener: MessageListener?
    }

    private struct State {
        var listeners: [ObjectIdentifier: Registration] = [:]
        var watch: DirectoryWatch?
        var arrival: BusArrivalWatch?
        var source: MessageCenter.WakeSource = .bus
        /// Whether the connection's events are watched (once per connection).
        var watchedConnection: ObjectIdentifier?
        var eventSubscription: EventSubscription?
        var subscribers: [UInt64: (DeliveryExecutor, @Sendable (MessageCenter.WakeSource) -> Void)] = [:]
        var nextSubscriber: UInt64 = 1
        /// The backoff after the bus was reachable but could not be listened on (seconds).
        var retryDelay = 0.0

        /// The listeners still alive (strong references: see `withLiveListeners`); forgets the others.
        mutating func live() -> [MessageListener] {
            let live = listeners.values.compactMap(\.listener)
            if live.count != listeners.count {
                listeners = Dictionary(uniqueKeysWithValues: live.map { (ObjectIdentifier($0), Registration(listener: $0)) })
            }
            return live
        }
    }

    private let centers: LazyNotificationCenter
    /// The layout of the wormhole directory; nil for a custom transiting (no directory to watch).
    private let files: MessageFiles?
    private let logger: Logger
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "wormhole.listener-wakeups")

    init(centers: LazyNotificationCenter, files: MessageFiles?, logger: Logger) {
        self.centers = centers
        self.files = files
        self.logger = logger
    }

    deinit {
        let (watch, arrival, events) = state.withLock { ($0.watch, $0.arrival, $0.eventSubscription) }
        watch?.stop()
        arrival?.cancel()
        events?.cancel()
    }

    var source: MessageCenter.WakeSource { state.withLock { $0.source } }

    /// Runs `body` under the lock with the live listeners, which are released only after the lock
    /// is: a listener's last release runs its deinit, which unregisters it and takes the lock.
    private func withLiveListeners<T: Sendable>(_ body: (inout State, [MessageListener]) -> T) -> T {
        let (result, live) = state.withLock { state -> (T, [MessageListener]) in
            let live = state.live()
            return (body(&state, live), live)
        }
        withExtendedLifetime(live) {}
        return result
    }

    /// The live listeners that the directory watch may wake.
    private func fallingBack() -> [MessageListener] {
        withLiveListeners { _, live in live }.filter { $0.fallsBack && !$0.isCancelled }
    }

    /// Whether a failure to reach the bus is one the directory watch can stand in for.
    private func canFallBack(_ error: any Error) -> BusError? {
        guard files != nil, let error = error as? BusError else { return nil }
        switch error.code {
        case .connectionFailed, .noSessionBus, .disconnected: return error
        default: return nil
        }
    }

    // MARK: Starting listeners

    /// Attaches `listeners` to the bus and registers them; when the bus cannot be reached and
    /// every one of them allows it, registers them with the directory watch instead (started
    /// here, so they are active when this returns). On any other failure the listeners are
    /// cancelled and the error thrown.
    func start(_ listeners: [MessageListener]) throws {
        do {
            let center = try centers.get()
            watchEvents(of: center)
            try attach(listeners, to: center)
            register(listeners)
        } catch {
            if let busError = fallsBack(error, listeners) {
                try fallBack(listeners, because: busError)
            } else {
                for listener in listeners { listener.cancel() }
                throw error
            }
        }
    }

    /// Registers listeners already attached to the bus (streams attach without blocking).
    func register(_ listeners: [MessageListener]) {
        state.withLock { state in
            for listener in listeners { state.listeners[ObjectIdentifier(listener)] = Registration(listener: listener) }
        }
        for listener in listeners { listener.attach(registry: self) }
    }

    /// Registers listeners the bus could not take because of `error`, and makes sure the
    /// directory watch runs and the bus is waited for. Throws `error` (with why the directory
    /// cannot be watched either) when the watch cannot start.
    func fallBack(_ listeners: [MessageListener], because error: BusError) throws {
        register(listeners)
        do {
            try startWatching(because: error)
        } catch let watchError {
            var combined = error
            let reason = (watchError as? WormholeError)?.message ?? "\(watchError)"
            combined.message += "; and the wormhole directory cannot be watched instead: \(reason)"
            guard Self.isKernelLimit(watchError) else {
                for listener in listeners { listener.cancel() }
                throw combined
            }
            // A limit the user can raise, shared with every other process: wait for the bus
            // (the listeners catch up when it comes) instead of failing.
            logger.warning("no bus, and the wormhole directory cannot be watched: waiting for the bus", metadata: ["reason": "\(combined.message)"])
            setSource(.waitingForBus(combined))
            waitForBus()
            return
        }
        logger.notice(
            "no bus: listening through the wormhole directory until it can be reached",
            metadata: ["reason": "\(error.message)", "directory": "\(files.map { $0.container.directoryPath($0.directory) } ?? "-")"])
        waitForBus()
    }

    /// Whether `error` (from attaching to the bus) lets these listeners fall back.
    func fallsBack(_ error: any Error, _ listeners: [MessageListener]) -> BusError? {
        guard let busError = canFallBack(error), listeners.allSatisfy(\.fallsBack) else { return nil }
        return busError
    }

    func unregister(_ listener: MessageListener) {
        let key = ObjectIdentifier(listener)
        let (watch, arrival) = withLiveListeners { state, live -> (DirectoryWatch?, BusArrivalWatch?) in
            state.listeners.removeValue(forKey: key)
            if live.contains(where: { ObjectIdentifier($0) != key && $0.fallsBack && !$0.isCancelled }) { return (nil, nil) }
            defer {
                state.watch = nil
                state.arrival = nil
            }
            return (state.watch, state.arrival)
        }
        watch?.stop()
        arrival?.cancel()
    }

    // MARK: Subscribers

    func subscribe(
        _ executor: DeliveryExecutor, _ handler: @escaping @Sendable (MessageCenter.WakeSource) -> Void
    ) -> WakeSourceSubscription {
        let id = state.withLock { state in
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = (executor, handler)
            return state.nextSubscriber
        }
        return WakeSourceSubscription(wakeups: self, id: id)
    }

    func unsubscribe(_ id: UInt64) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }

    /// Sets the source; tells the subscribers when it changed.
    private func setSource(_ source: MessageCenter.WakeSource) {
        let subscribers = state.withLock { state -> [(DeliveryExecutor, @Sendable (MessageCenter.WakeSource) -> Void)] in
            if state.source == source { return [] }
            state.source = source
            return Array(state.subscribers.values)
        }
        for (executor, handler) in subscribers { executor.run { handler(source) } }
    }

    // MARK: The directory watch

    /// Whether the watch failed on a per-user kernel limit (its error names the sysctl).
    private static func isKernelLimit(_ error: any Error) -> Bool {
        guard let error = error as? WormholeError else { return false }
        return error.value?.hasPrefix("fs.inotify.") == true
    }

    /// Starts the watch if it is not running, and sets the source.
    private func startWatching(because error: BusError) throws {
        guard let files else { throw error }
        try state.withLock { state throws in
            if state.watch == nil {
                state.watch = try DirectoryWatch(files: files) { [weak self] change in self?.directoryChanged(change) }
            }
        }
        setSource(.directory(error))
    }

    private func directoryChanged(_ change: DirectoryChange) {
        let listeners = fallingBack()
        switch change {
        case .mailboxes(let identifiers):
            for listener in listeners { listener.core.filesChanged(identifiers) }
        case .rescan:
            for listener in listeners { listener.core.catchUp() }
        case .failed(let error):
            logger.error("the directory watch stopped; listeners wait for the bus: \(error.message)")
            state.withLock { $0.watch = nil }
        }
    }

    /// Stops the watch (when no listener still needs it) and sets the source back to the bus.
    private func stopWatching() {
        let watch = withLiveListeners { state, live -> DirectoryWatch? in
            if live.contains(where: { !$0.isAttached && !$0.isCancelled }) {
                return nil  // some listener is still off the bus
            }
            defer { state.watch = nil }
            return state.watch
        }
        watch?.stop()
    }

    // MARK: The bus

    /// Waits for the bus in the background (once), unless there is no address to wait for.
    private func waitForBus() {
        guard let address = try? centers.address() else { return }
        let arrival = withLiveListeners { state, live -> Bool in
            if state.arrival != nil || !live.contains(where: { $0.fallsBack && !$0.isCancelled }) { return false }
            state.arrival = BusArrivalWatch(address: address, logger: logger) { [weak self] in
                guard let self else { return }
                queue.async { self.busReachable() }
            }
            return true
        }
        if arrival { logger.debug("waiting for the bus", metadata: ["address": "\(address.rawValue)"]) }
    }

    /// On `queue`: the bus can be reached. Attaches the listeners that are not, switches back.
    private func busReachable() {
        state.withLock { $0.arrival = nil }
        let pending = fallingBack().filter { !$0.isAttached }
        guard !pending.isEmpty else { return }
        do {
            let center = try centers.get()
            watchEvents(of: center)
            try attach(pending, to: center)
        } catch {
            // Reachable, yet not usable (a daemon that refuses, or an address whose guid= names a
            // daemon that was restarted): nothing will change that an fd could report, so wait
            // again after a backoff (10 ms doubling to 2 s) rather than at once.
            let delay = state.withLock { state -> Double in
                state.retryDelay = min(max(state.retryDelay * 2, 0.01), 2)
                return state.retryDelay
            }
            logger.info("the bus answered, but listening on it failed; trying again in \(Int(delay * 1000)) ms: \(error)")
            queue.asyncAfter(deadline: .now() + delay) { [weak self] in self?.waitForBus() }
            return
        }
        state.withLock { $0.retryDelay = 0 }
        switchedToBus()
    }

    /// The listeners are all on the bus again: stop the watch, catch up, tell the subscribers.
    private func switchedToBus() {
        stopWatching()
        for listener in fallingBack() { listener.core.catchUp() }
        setSource(.bus)
    }

    /// Follows the connection's losses and returns (once per connection).
    private func watchEvents(of center: DarwinNotificationCenter) {
        let connection = center.connection
        let id = ObjectIdentifier(connection)
        let isNew = state.withLock { state -> Bool in
            if state.watchedConnection == id { return false }
            state.watchedConnection = id
            return true
        }
        guard isNew else { return }
        let subscription = connection.onEvent(on: .ioThread) { [weak self] event in
            guard let self else { return }
            queue.async {
                switch event {
                case .disconnected: self.busLost(connection.address)
                case .reconnected: self.busBack(center)
                }
            }
        }
        state.withLock { $0.eventSubscription = subscription }
    }

    /// On `queue`: the connection was lost. Listeners that may are woken through the directory
    /// until the connection is back; each catches up once the watch runs (what changed between
    /// the loss and the watch).
    private func busLost(_ address: BusAddress) {
        let listeners = fallingBack()
        guard !listeners.isEmpty else { return }
        let error = BusError(.disconnected, value: address.rawValue, "lost the bus at \(quoted(address.rawValue))")
        do {
            try startWatching(because: error)
        } catch let watchError {
            logger.error("cannot watch the wormhole directory while the bus is away: \(watchError)")
            var combined = error
            combined.message += "; and the wormhole directory cannot be watched instead: \((watchError as? WormholeError)?.message ?? "\(watchError)")"
            setSource(.waitingForBus(combined))
            return
        }
        for listener in listeners { listener.core.catchUp() }
    }

    /// On `queue`: the connection is back (its rules re-added). Listeners started while it was
    /// away are attached now.
    private func busBack(_ center: DarwinNotificationCenter) {
        let pending = fallingBack().filter { !$0.isAttached }
        if !pending.isEmpty {
            do {
                try attach(pending, to: center)
            } catch {
                logger.info("back on the bus, but listening on it failed; still on the directory: \(error)")
                return
            }
        }
        switchedToBus()
    }

    /// Adds each listener's observer and transient route on `center`, batched (one round trip for
    /// all the exact names, one for their transient rules). Listeners attached before a failure
    /// stay attached (the connection re-adds their rules after a reconnect).
    private func attach(_ listeners: [MessageListener], to center: DarwinNotificationCenter) throws {
        let exact = listeners.filter { !$0.isPrefix }
        if !exact.isEmpty {
            let observers = try center.addObservers(
                exact.map { listener in
                    let core = listener.core
                    return (listener.target, { @Sendable note in core.notified(note) })
                }, on: .ioThread)
            let routes: [UInt64]
            do {
                routes = try center.addMessageRoutes(
                    exact.map { listener in
                        let core = listener.core
                        return (listener.target, { @Sendable signal in core.received(signal) })
                    })
            } catch {
                for observer in observers { observer.cancel() }
                throw error
            }
            for ((listener, observer), route) in zip(zip(exact, observers), routes) {
                listener.attach(observer: observer) { center.removeMessageRoute(route) }
            }
        }
        for listener in listeners where listener.isPrefix {
            let core = listener.core
            let observer = try center.addObserver(forPrefix: listener.target, on: .ioThread) { core.notified($0) }
            let route: UInt64
            do {
                route = try center.addMessageRoute(listener.target, isPrefix: true) { core.received($0) }
            } catch {
                observer.cancel()
                throw error
            }
            listener.attach(observer: observer) { center.removeMessageRoute(route) }
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Logging
import WormholeDBus
import WormholeSystem

/// The wake-up side of one facade's subscriptions, whatever their kind: on the bus when it can
/// be reached; else (for the subscriptions that allow it) through a ``DirectoryWatch`` on each
/// directory they read, while the bus is waited for (`BusArrivalWatch`: inotify on a
/// `unix:path=` socket's directory, else a backoff). When the bus can be reached, the
/// subscriptions' rules are added (batched), the watches stop and every subscription catches up
/// once. A connection lost later (`disconnected`) starts the watches again until the
/// connection's own reconnect. Every subscription kind contributes only its reader
/// (``WakeSubscriber``); coalescing and serial delivery are its delivery's.
///
/// Transitions that wait for the bus run on the engine's lane of the process's work pool (one at
/// a time, in order; ``WorkLane``); the state is behind a lock (`Locked`); the subscribers are
/// called outside it.
final class WakeEngine: Sendable {
    private struct State {
        /// The directory watches running, by ``WatchTarget/key``.
        var watches: [String: DirectoryWatch] = [:]
        var arrival: BusArrivalWatch?
        var source: WakeSource = .bus
        /// Whether the connection's events are watched (once per connection).
        var watchedConnection: ObjectIdentifier?
        var eventSubscription: EventSubscription?
        var subscribers: [UInt64: WakeSourceReader] = [:]
        var nextSubscriber: UInt64 = 1
        /// The backoff after the bus was reachable but could not be listened on (seconds).
        var retryDelay = 0.0
    }

    private let centers: LazyNotificationCenter
    private let logger: Logger
    private let state = Locked(State())
    /// Where the transitions that wait for the bus run, one at a time.
    private let lane = ProcessRuntime.shared.pool.makeLane()
    /// This engine's subscribers. Read and changed only inside `state`'s lock (its lock is a
    /// leaf), so the table and `watches` stay in step.
    let table = WakeSubscriberTable()

    init(centers: LazyNotificationCenter, logger: Logger) {
        self.centers = centers
        self.logger = logger
    }

    deinit {
        // The directory watches stop as they are released with the state.
        let (arrival, events) = state.withLock { ($0.arrival, $0.eventSubscription) }
        arrival?.cancel()
        events?.cancel()
    }

    var source: WakeSource { state.withLock { $0.source } }

    /// Runs `body` under the lock with the live subscribers, which are released only after the
    /// lock is: a subscriber's last release runs its deinit, which unregisters it and takes the lock.
    private func withLive<T: Sendable>(_ body: (inout State, [WakeSubscriber]) -> T) -> T {
        let (result, live) = state.withLock { state -> (T, [WakeSubscriber]) in
            let live = table.live()
            return (body(&state, live), live)
        }
        withExtendedLifetime(live) {}
        return result
    }

    static func mayFallBack(_ subscriber: WakeSubscriber) -> Bool { subscriber.mayFallBack }

    /// The live subscribers that a directory watch may wake.
    private func fallingBack() -> [WakeSubscriber] {
        withLive { _, live in live }.filter(Self.mayFallBack)
    }

    // MARK: Starting subscriptions

    /// Attaches `subscribers` to the bus and registers them; when the bus cannot be reached and
    /// every one of them allows it, registers them with the directory watches instead (started
    /// here, so they are active when this returns). On any other failure the subscribers are
    /// cancelled and the error thrown.
    func start(_ subscribers: [WakeSubscriber]) throws {
        do {
            let center = try centers.get()
            watchEvents(of: center)
            try WakeSubscriber.attach(subscribers, to: center)
            register(subscribers)
            watchBesideBus(subscribers)
        } catch {
            if let busError = fallsBack(error, subscribers) {
                try fallBack(subscribers, because: busError)
            } else {
                for subscriber in subscribers { subscriber.detach() }
                throw error
            }
        }
    }

    /// Starts a stream's subscriber: `attach` adds its rules on the bus without blocking the
    /// task, and keeps them on the subscriber; when the bus cannot be reached and the subscriber
    /// may, it is woken through its directory instead. On any other failure it is cancelled and
    /// the error thrown.
    func startStream(_ subscriber: WakeSubscriber, attach: () async throws -> Void) async throws {
        do {
            try await attach()
            register([subscriber])
        } catch {
            guard let busError = fallsBack(error, [subscriber]) else {
                subscriber.detach()
                throw error
            }
            try fallBack([subscriber], because: busError)
        }
    }

    /// Registers subscribers already attached to the bus (streams attach without blocking).
    func register(_ subscribers: [WakeSubscriber]) {
        // A stream attached on its own: its engine follows the connection's losses too.
        if let center = centers.existing(), subscribers.contains(where: \.isAttached) { watchEvents(of: center) }
        state.withLock { _ in table.add(subscribers) }
        for subscriber in subscribers { subscriber.attach(engine: self) }
        switch source {
        case .bus: if subscribers.contains(where: \.watchesBesideBus) { watchBesideBus(subscribers) }
        // Attached on a connection that is away: woken through the directory until it is back.
        case .directory(let error): try? startWatching(because: error)
        case .waitingForBus: break
        }
    }

    /// Registers subscribers the bus could not take because of `error`, and makes sure their
    /// directories are watched and the bus is waited for. Throws `error` (with why a directory
    /// cannot be watched either) when a watch cannot start on anything but a kernel limit.
    func fallBack(_ subscribers: [WakeSubscriber], because error: BusError) throws {
        register(subscribers)
        do {
            try startWatching(because: error)
        } catch let watchError {
            var combined = error
            let reason = (watchError as? WormholeError)?.message ?? "\(watchError)"
            combined.message += "; and the directory cannot be watched instead: \(reason)"
            guard Self.isKernelLimit(watchError) else {
                for subscriber in subscribers { subscriber.detach() }
                throw combined
            }
            // A limit the user can raise, shared with every other process: wait for the bus
            // (the subscriptions catch up when it comes) instead of failing.
            logger.warning(
                "no bus, and the directory cannot be watched: waiting for the bus",
                metadata: ["reason": "\(combined.message)"])
            setSource(.waitingForBus(combined))
            waitForBus()
            return
        }
        logger.notice(
            "no bus: woken through the directories until it can be reached",
            metadata: ["reason": "\(error.message)", "directories": "\(subscribers.compactMap(\.watchTarget?.key))"])
        waitForBus()
    }

    /// Whether `error` (from attaching to the bus) lets these subscribers fall back.
    func fallsBack(_ error: any Error, _ subscribers: [WakeSubscriber]) -> BusError? {
        guard let error = error as? BusError, subscribers.allSatisfy(Self.mayFallBack) else { return nil }
        switch error.code {
        case .connectionFailed, .noSessionBus, .disconnected: return error
        default: return nil
        }
    }

    /// Removes a subscriber (cancelled); stops the watch of its directory when no other
    /// subscriber needs it, and the wait for the bus when none needs any. Costs no scan of the
    /// other subscribers: a process that cancels thousands of listeners does so in linear time.
    func unregister(_ subscriber: WakeSubscriber) {
        let key = ObjectIdentifier(subscriber)
        // A watch no other subscriber needs is taken out under the lock and stops as it is
        // released here, outside it.
        let (_, arrival) = state.withLock { state -> (DirectoryWatch?, BusArrivalWatch?) in
            let unneeded = table.forget(key)
            let stale = unneeded.flatMap { state.watches.removeValue(forKey: $0) }
            guard !table.needsWatches else { return (stale, nil) }
            defer { state.arrival = nil }
            return (stale, state.arrival)
        }
        arrival?.cancel()
        // No subscription left off the bus: nothing waits for it any more (`.bus` while it has none).
        if arrival != nil { setSource(.bus) }
    }

    // MARK: Subscribers of the wake source

    func subscribe(_ executor: DeliveryExecutor, _ handler: @escaping @Sendable (WakeSource) -> Void) -> Subscription {
        let reader = WakeSourceReader(executor: executor, handler: handler)
        let id = state.withLock { state in
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = reader
            return state.nextSubscriber
        }
        return Subscription(core: reader) { [self] in _ = state.withLock { $0.subscribers.removeValue(forKey: id) } }
    }

    /// Sets the source; tells the subscribers when it changed.
    private func setSource(_ source: WakeSource) {
        let subscribers = state.withLock { state -> [WakeSourceReader] in
            if state.source == source { return [] }
            state.source = source
            return Array(state.subscribers.values)
        }
        for reader in subscribers { reader.changed(to: source) }
    }

    // MARK: The directory watches

    /// Whether a watch failed on a per-user kernel limit (its error names the sysctl).
    private static func isKernelLimit(_ error: any Error) -> Bool {
        guard let error = error as? WormholeError else { return false }
        return error.value?.hasPrefix("fs.inotify.") == true
    }

    /// Starts the watch of `target`'s directory unless one runs.
    private func startWatch(of target: WatchTarget, in state: inout State) throws(WormholeError) {
        let key = target.key
        guard state.watches[key] == nil else { return }
        state.watches[key] = try DirectoryWatch(target) { [weak self] watch, change in
            self?.directoryChanged(change, key: key, from: watch)
        }
    }

    /// Starts the watch of every directory a falling-back subscriber reads (those not running),
    /// and sets the source.
    private func startWatching(because error: BusError) throws {
        let failure = withLive { state, live -> WormholeError? in
            for subscriber in live where Self.mayFallBack(subscriber) {
                guard let target = subscriber.watchTarget else { continue }
                do throws(WormholeError) {
                    try startWatch(of: target, in: &state)
                } catch {
                    return error
                }
            }
            return nil
        }
        if let failure { throw failure }
        setSource(.directory(error))
    }

    private func directoryChanged(_ change: DirectoryChange, key: String, from watch: DirectoryWatch) {
        // A report of a watch released meanwhile (replaced or stopped) is not this engine's any more.
        guard state.withLock({ $0.watches[key] === watch }) else { return }
        let onBus = source == .bus
        let subscribers = fallingBack().filter { $0.watchTarget?.key == key && (!onBus || $0.watchesBesideBus) }
        switch change {
        case .names(let names) where onBus:
            for subscriber in subscribers { subscriber.directoryChangedBesideBus(names) }
        case .names(let names):
            for subscriber in subscribers { subscriber.directoryChanged(names) }
        case .rescan:
            for subscriber in subscribers { subscriber.catchUp() }
        case .failed(let error):
            logger.error("the watch of \(key) stopped; its subscriptions wait for the bus: \(error.message)")
            _ = state.withLock { state in state.watches[key] === watch ? state.watches.removeValue(forKey: key) : nil }
        }
    }

    /// Stops the watches (when no subscriber is still off the bus), but those kept beside the bus:
    /// they are taken out under the lock and stop as they are released, outside it.
    private func stopWatching() {
        _ = withLive { state, live -> [DirectoryWatch] in
            if live.contains(where: { !$0.isAttached && !$0.isCancelled }) {
                return []  // some subscriber is still off the bus
            }
            let kept = Set(live.filter { Self.mayFallBack($0) && $0.watchesBesideBus }.compactMap(\.watchTarget?.key))
            var stopped: [DirectoryWatch] = []
            for (key, watch) in state.watches where !kept.contains(key) {
                stopped.append(watch)
                state.watches[key] = nil
            }
            return stopped
        }
    }

    /// Starts the watches kept beside the bus that are not running, for `candidates` (just
    /// registered) or else every live subscriber. A watch that cannot start (no inotify
    /// instance to be had) is not an error: the subscriptions go on with the bus.
    private func watchBesideBus(_ candidates: [WakeSubscriber]? = nil) {
        // Just registered: only theirs (no scan of every subscriber per registration).
        let failure =
            if let candidates {
                state.withLock { state in startWatchesBesideBus(for: candidates, in: &state) }
            } else {
                withLive { state, live in startWatchesBesideBus(for: live, in: &state) }
            }
        if let failure {
            logger.info(
                "the directory is not watched beside the bus (a sender that dies before its signal is caught up only on the next post or reconnect): \(failure.message)"
            )
        }
    }

    /// Under the lock: starts the watch beside the bus of each of `subscribers` that wants one
    /// and has none running; the last failure, if any.
    private func startWatchesBesideBus(for subscribers: [WakeSubscriber], in state: inout State) -> WormholeError? {
        var failure: WormholeError?
        for subscriber in subscribers where Self.mayFallBack(subscriber) && subscriber.watchesBesideBus {
            guard let target = subscriber.watchTarget else { continue }
            // Made when missing (0700, as a send would): a listener that asked for this
            // watch may start before the first send.
            do throws(WormholeError) {
                try startWatch(of: target, in: &state)
            } catch {
                failure = error
            }
        }
        return failure
    }

    // MARK: The bus

    /// Waits for the bus in the background (once), unless there is no address to wait for.
    private func waitForBus() {
        guard let address = try? centers.address() else { return }
        let arrival = withLive { state, live -> Bool in
            if state.arrival != nil || !live.contains(where: Self.mayFallBack) { return false }
            state.arrival = BusArrivalWatch(address: address, logger: logger) { [weak self] in
                guard let self else { return }
                lane.submit { self.busReachable() }
            }
            return true
        }
        if arrival { logger.debug("waiting for the bus", metadata: ["address": "\(address.rawValue)"]) }
    }

    /// On the lane: the bus can be reached. Attaches the subscribers that are not, switches back.
    private func busReachable() {
        state.withLock { $0.arrival = nil }
        let pending = fallingBack().filter { !$0.isAttached }
        guard !pending.isEmpty else { return }
        do {
            let center = try centers.get()
            watchEvents(of: center)
            try WakeSubscriber.attach(pending, to: center)
        } catch {
            // Reachable, yet not usable (a daemon that refuses, or an address whose guid= names a
            // daemon that was restarted): nothing will change that an fd could report, so wait
            // again after a backoff (10 ms doubling to 2 s) rather than at once.
            let delay = state.withLock { state -> Double in
                state.retryDelay = min(max(state.retryDelay * 2, 0.01), 2)
                return state.retryDelay
            }
            logger.info(
                "the bus answered, but listening on it failed; trying again in \(Int(delay * 1000)) ms: \(error)")
            lane.submit(after: UInt64(delay * 1000)) { [weak self] in self?.waitForBus() }
            return
        }
        state.withLock { $0.retryDelay = 0 }
        switchedToBus()
    }

    /// The subscribers are all on the bus again: stop the watches, catch up, tell the subscribers.
    private func switchedToBus() {
        stopWatching()
        for subscriber in fallingBack() { subscriber.catchUp() }
        setSource(.bus)
        watchBesideBus()
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
        // On the I/O thread itself: an outage costs no thread of its own (the directory watches
        // are added and the catch-ups delivered there, as deliveries are). Only attaching
        // subscribers made while the bus was away waits for the bus, which the loop's own
        // thread cannot do: that one goes to the lane.
        let subscription = connection.onEvent(on: .ioThread) { [weak self] event in
            guard let self else { return }
            switch event {
            case .disconnected:
                busLost(connection.address)
            case .reconnected:
                if fallingBack().contains(where: { !$0.isAttached }) {
                    lane.submit { self.busBack(center) }
                } else {
                    busBack(center)
                }
            }
        }
        state.withLock { $0.eventSubscription = subscription }
    }

    /// On the I/O thread: the connection was lost. Subscribers that may are woken through their
    /// directories until the connection is back; each catches up once the watches run (what
    /// changed between the loss and the watch).
    private func busLost(_ address: BusAddress) {
        let subscribers = fallingBack()
        guard !subscribers.isEmpty else { return }
        let error = BusError(.disconnected, value: address.rawValue, "lost the bus at \(quoted(address.rawValue))")
        do {
            try startWatching(because: error)
        } catch let watchError {
            logger.error("cannot watch the directories while the bus is away: \(watchError)")
            var combined = error
            combined.message +=
                "; and the directory cannot be watched instead: \((watchError as? WormholeError)?.message ?? "\(watchError)")"
            setSource(.waitingForBus(combined))
            return
        }
        for subscriber in subscribers { subscriber.catchUp() }
    }

    /// On the I/O thread (on the lane when subscribers started while it was away must be attached,
    /// which waits for the bus): the connection is back (its rules re-added).
    private func busBack(_ center: DarwinNotificationCenter) {
        let pending = fallingBack().filter { !$0.isAttached }
        if !pending.isEmpty {
            do {
                try WakeSubscriber.attach(pending, to: center)
            } catch {
                logger.info("back on the bus, but listening on it failed; still on the directories: \(error)")
                return
            }
        }
        switchedToBus()
    }
}

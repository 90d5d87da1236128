import WormholeDBus
import WormholeSystem

/// A message listener's wake-ups for the ``WakeEngine``: its observer and transient route on the
/// bus, or, without a bus, the wormhole directory (see ``WakeSource``) until the bus can be
/// reached. Its reader is its core (``ListenerCore``); its handle, a ``Subscription``, ends both.
final class MessageSubscriber: WakeSubscriber {
    let core: any ListenerControl
    /// The name listened to on the bus: `<group>/<directory>/<identifier>`, or the wormhole's
    /// prefix `<group>/<directory>/` for every identifier.
    let target: NotificationName
    /// Whether ``target`` is a prefix.
    let isPrefix: Bool
    /// Whether the directory watch may wake it when the bus cannot be reached.
    let fallsBack: Bool
    /// The wormhole directory; nil for a custom transiting (no directory to watch).
    let watchTarget: WatchTarget?
    /// Removes what it holds on the bus (its post route and its route of transient messages),
    /// once attached.
    private let bus = Locked<(@Sendable () -> Void)?>(nil)
    /// Where it is registered, to be told when the bus comes and goes; set once, at start.
    private let registry = Locked<WakeEngine?>(nil)

    init(
        core: any ListenerControl, target: NotificationName, isPrefix: Bool, fallsBack: Bool, watchTarget: WatchTarget?
    ) {
        self.core = core
        self.target = target
        self.isPrefix = isPrefix
        self.fallsBack = fallsBack
        self.watchTarget = watchTarget
    }

    /// The handle: cancelling it stops the core, then removes the bus side and the registration.
    func handle() -> Subscription {
        Subscription(core: core) { [self] in detach() }
    }

    /// Whether it listens on the bus (its rules were accepted on the current connection, or
    /// will be re-added by the connection on a reconnect).
    var isAttached: Bool { bus.withLock { $0 != nil } }

    var isCancelled: Bool { core.isCancelled }

    /// Keeps what was added on the bus for this listener; when it was cancelled meanwhile, removes
    /// it at once and returns false.
    @discardableResult
    func attach(_ route: PostRoute, transientRoute: UInt64, on center: DarwinNotificationCenter) -> Bool {
        let detach: @Sendable () -> Void = {
            center.removePostRoute(route)
            center.removeMessageRoute(transientRoute)
        }
        let kept = bus.withLock { held -> Bool in
            if core.isCancelled { return false }
            held = detach
            return true
        }
        if !kept { detach() }
        return kept
    }

    /// Keeps the engine that wakes it; when it was cancelled meanwhile, unregisters at once.
    func attach(engine: WakeEngine) {
        let kept = registry.withLock { registry -> Bool in
            if core.isCancelled { return false }
            registry = engine
            return true
        }
        if !kept { engine.unregister(self) }
    }

    /// Removes its bus rules and its registration (its core is cancelled already).
    private func detach() {
        bus.withLock { held in
            defer { held = nil }
            return held
        }?()
        registry.withLock { registry in
            defer { registry = nil }
            return registry
        }?.unregister(self)
    }
}

extension MessageSubscriber {
    func directoryChanged(_ names: [String]) {
        let identifiers = names.compactMap(MessageIdentifier.init(fileName:))
        if !identifiers.isEmpty { core.filesChanged(identifiers) }
    }

    func catchUp() { core.catchUp() }

    var watchesBesideBus: Bool { core.catchesWritesWithoutSignal && watchTarget != nil }

    func directoryChangedBesideBus(_ names: [String]) {
        let identifiers = names.compactMap(MessageIdentifier.init(fileName:))
        if !identifiers.isEmpty { core.filesChangedOnBus(identifiers) }
    }

    func cancelForEngine() { if core.cancel() { detach() } }

    func attach(to center: DarwinNotificationCenter) throws { try Self.attach([self], to: center) }

    /// Adds each listener's observer and transient route on `center`, batched (one round trip for
    /// all the exact names, one for their transient rules). Listeners attached before a failure
    /// stay attached (the connection re-adds their rules after a reconnect).
    static func attach(_ listeners: [MessageSubscriber], to center: DarwinNotificationCenter) throws {
        let exact = listeners.filter { !$0.isPrefix }
        if !exact.isEmpty {
            let routes = try center.addPostRoutes(
                exact.map { listener in
                    let core = listener.core
                    return (listener.target, { @Sendable note in core.notified(note) })
                })
            let transientRoutes: [UInt64]
            do {
                transientRoutes = try center.addMessageRoutes(
                    exact.map { listener in
                        let core = listener.core
                        return (listener.target, { @Sendable signal in core.received(signal) })
                    })
            } catch {
                for route in routes { center.removePostRoute(route) }
                throw error
            }
            for ((listener, route), transient) in zip(zip(exact, routes), transientRoutes) {
                listener.attach(route, transientRoute: transient, on: center)
            }
        }
        for listener in listeners where listener.isPrefix {
            let core = listener.core
            let route = try center.addPostRoute(listener.target, isPrefix: true) { core.notified($0) }
            let transient: UInt64
            do {
                transient = try center.addMessageRoute(listener.target, isPrefix: true) { core.received($0) }
            } catch {
                center.removePostRoute(route)
                throw error
            }
            listener.attach(route, transientRoute: transient, on: center)
        }
    }
}

/// What a ``MessageSubscriber`` and its registry need of its core, whatever the message type.
protocol ListenerControl: SubscriptionCore {
    /// Delivers what is stored now, as ``MessageDelivery/Reason/stored`` deliveries.
    func checkStored()
    /// A post on the bus (on the I/O thread).
    func notified(_ note: DarwinNotification)
    /// A transient message on the bus (on the I/O thread).
    func received(_ signal: TransientSignal)
    /// Mailboxes whose files the directory watch saw change.
    func filesChanged(_ identifiers: [MessageIdentifier])
    /// Mailboxes whose files the watch kept beside the bus saw change.
    func filesChangedOnBus(_ identifiers: [MessageIdentifier])
    /// Whether the wormhole directory is watched beside the bus too.
    var catchesWritesWithoutSignal: Bool { get }
    /// Compare every mailbox with what was last delivered.
    func catchUp()
}

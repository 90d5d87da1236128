import Synchronization
public import WormholeDBus

/// A registered message listener (see `MessageCenter.listen(identifier:as:on:options:handler:)`).
///
/// Active until ``cancel()`` or until the last reference to it is released, whichever comes
/// first (the rule of every `SubscriptionHandle`): keep it for as long as you want
/// deliveries. It keeps the bus connection it listens on open, even after its
/// ``MessageCenter`` is released. Without a bus it is woken through the wormhole directory
/// (see ``MessageCenter/WakeSource``) until the bus can be reached.
public final class MessageListener: SubscriptionHandle {
    /// What a listener holds on the bus, once attached.
    private struct BusSide {
        var observer: NotificationObserver?
        /// Removes the route of the transient messages (`Message` signals).
        var removeTransientRoute: (@Sendable () -> Void)?
    }

    let core: any ListenerControl
    /// The name listened to on the bus: `<group>/<directory>/<identifier>`, or the wormhole's
    /// prefix `<group>/<directory>/` for every identifier.
    let target: NotificationName
    /// Whether ``target`` is a prefix.
    let isPrefix: Bool
    /// Whether the directory watch may wake it when the bus cannot be reached.
    let fallsBack: Bool
    private let bus = Mutex(BusSide())
    /// Where it is registered, to be told when the bus comes and goes; set once, at start.
    private let registry = Mutex<ListenerWakeups?>(nil)

    init(core: any ListenerControl, target: NotificationName, isPrefix: Bool, fallsBack: Bool) {
        self.core = core
        self.target = target
        self.isPrefix = isPrefix
        self.fallsBack = fallsBack
    }

    deinit { cancel() }

    /// Whether it listens on the bus (its rules were accepted on the current connection, or
    /// will be re-added by the connection on a reconnect).
    var isAttached: Bool { bus.withLock { $0.observer != nil } }

    /// Keeps what was added on the bus for this listener; when it was cancelled meanwhile, removes
    /// it at once and returns false.
    @discardableResult
    func attach(observer: NotificationObserver, removeTransientRoute: @escaping @Sendable () -> Void) -> Bool {
        let kept = bus.withLock { side -> Bool in
            if core.isCancelled { return false }
            side.observer = observer
            side.removeTransientRoute = removeTransientRoute
            return true
        }
        if !kept {
            observer.cancel()
            removeTransientRoute()
        }
        return kept
    }

    /// Keeps the registry that wakes it; when it was cancelled meanwhile, unregisters at once.
    func attach(registry wakeups: ListenerWakeups) {
        let kept = registry.withLock { registry -> Bool in
            if core.isCancelled { return false }
            registry = wakeups
            return true
        }
        if !kept { wakeups.unregister(self) }
    }

    /// Stops the listener and removes its bus rules; no handler call starts after this
    /// returns (a call already running finishes). Calling it twice does nothing.
    public func cancel() {
        if core.cancel() { return }
        let side = bus.withLock { side in
            defer { side = BusSide() }
            return side
        }
        side.observer?.cancel()
        side.removeTransientRoute?()
        registry.withLock { registry in
            defer { registry = nil }
            return registry
        }?.unregister(self)
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { core.isCancelled }

    /// Delivers what is stored now, as ``MessageDelivery/Reason/stored`` deliveries (what
    /// ``MessageCenter/ListenOptions/deliversStoredMessageOnStart`` does at start); for a tool
    /// that must announce readiness first.
    package func deliverStoredMessages() { core.checkStored() }
}

/// What a ``MessageListener`` and its registry need of its core, whatever the message type.
protocol ListenerControl: Sendable {
    /// Marks the core cancelled; whether it already was.
    func cancel() -> Bool
    var isCancelled: Bool { get }
    func checkStored()
    /// A post on the bus (on the I/O thread).
    func notified(_ note: DarwinNotification)
    /// A transient message on the bus (on the I/O thread).
    func received(_ signal: TransientSignal)
    /// Mailboxes whose files the directory watch saw change.
    func filesChanged(_ identifiers: [MessageIdentifier])
    /// Compare every mailbox with what was last delivered.
    func catchUp()
}

import Synchronization
public import WormholeDBus

/// A registered message listener (see `MessageCenter.listen(identifier:as:on:options:handler:)`).
///
/// Active until ``cancel()`` or until the last reference to it is released, whichever comes
/// first (the rule of every `SubscriptionHandle`): keep it for as long as you want
/// deliveries. It keeps the bus connection it listens on open, even after its
/// ``MessageCenter`` is released.
public final class MessageListener: SubscriptionHandle {
    private let core: any ListenerControl
    private let observer: NotificationObserver
    /// Removes the route of the transient messages (`Message` signals); set once, at start.
    private let transientRoute = Mutex<(@Sendable () -> Void)?>(nil)

    init(core: any ListenerControl, observer: NotificationObserver) {
        self.core = core
        self.observer = observer
    }

    /// Keeps the removal of the transient route, to run on cancel (at once if already cancelled).
    func attachTransientRoute(_ remove: @escaping @Sendable () -> Void) {
        let cancelled = transientRoute.withLock { route -> Bool in
            if core.isCancelled { return true }
            route = remove
            return false
        }
        if cancelled { remove() }
    }

    deinit { cancel() }

    /// Stops the listener and removes its bus rules; no handler call starts after this
    /// returns (a call already running finishes). Calling it twice does nothing.
    public func cancel() {
        if core.cancel() { return }
        observer.cancel()
        transientRoute.withLock { route in
            defer { route = nil }
            return route
        }?()
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { core.isCancelled }

    /// Delivers what is stored now, as ``MessageDelivery/Reason/stored`` deliveries (what
    /// ``MessageCenter/ListenOptions/deliversStoredMessageOnStart`` does at start); for a tool
    /// that must announce readiness first.
    package func deliverStoredMessages() { core.checkStored() }
}

/// What a ``MessageListener`` needs of its core, whatever the message type.
protocol ListenerControl: Sendable {
    /// Marks the core cancelled; whether it already was.
    func cancel() -> Bool
    var isCancelled: Bool { get }
    func checkStored()
}

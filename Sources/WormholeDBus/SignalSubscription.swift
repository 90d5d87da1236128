import Synchronization
import WormholeSystem

/// A callback subscription made with ``BusConnection/subscribe(_:on:handler:)``.
///
/// Active until ``cancel()`` or until the last reference to it goes (``SubscriptionHandle``).
public final class SignalSubscription: SubscriptionHandle {
    /// Set once the subscription is cancelled; checked before each handler call.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        /// Sets the flag; whether it was already set.
        func set() -> Bool { value.exchange(true, ordering: .acquiringAndReleasing) }
    }

    private let io: BusIO
    private let id: UInt64
    private let cancelled: Flag

    init(io: BusIO, id: UInt64, cancelled: Flag) {
        self.io = io
        self.id = id
        self.cancelled = cancelled
    }

    deinit { cancel() }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { cancelled.isSet }

    /// Stops delivery and drops the subscription's reference to its match rule. After
    /// this returns the handler is not called again. Calling it twice does nothing.
    public func cancel() {
        if cancelled.set() { return }
        io.removeRoute(id: id)
    }
}

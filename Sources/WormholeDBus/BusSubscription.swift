// SPDX-License-Identifier: Apache-2.0
import Synchronization
import WormholeSystem

/// A callback subscription of a connection: to signals (``BusConnection/subscribe(_:on:handler:)``)
/// or to its events (``BusConnection/onEvent(on:handler:)``).
///
/// Active until ``cancel()`` or until the last reference to it goes (``SubscriptionHandle``).
public final class BusSubscription: SubscriptionHandle {
    /// Set once the subscription is cancelled; the delivery checks it before each handler call.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        /// Sets the flag; whether it was already set.
        func set() -> Bool { value.exchange(true, ordering: .acquiringAndReleasing) }
    }

    private let cancelled: Flag
    /// Ends the subscription at the connection (removes its route or event handler).
    private let end: @Sendable () -> Void

    init(cancelled: Flag, end: @escaping @Sendable () -> Void) {
        self.cancelled = cancelled
        self.end = end
    }

    deinit { cancel() }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { cancelled.isSet }

    /// Stops delivery and drops what the subscription holds at the connection (a signal
    /// subscription's reference to its match rule). After this returns the handler is not called
    /// again. Calling it twice does nothing.
    public func cancel() {
        if cancelled.set() { return }
        end()
    }
}

/// A subscription to signals made with ``BusConnection/subscribe(_:on:handler:)``.
public typealias SignalSubscription = BusSubscription

/// A subscription to connection events made with ``BusConnection/onEvent(on:handler:)``.
public typealias EventSubscription = BusSubscription

public import WormholeDBus

/// A registered observer (see ``DarwinNotificationCenter/listen(name:on:options:handler:)-(_,DeliveryQueue,_,_)``).
///
/// Active until ``cancel()`` or until the last reference to it is released, whichever comes
/// first (the rule of every `SubscriptionHandle`): keep it for as long as you want deliveries.
/// It keeps its center's bus connection open.
public final class NotificationListener: SubscriptionHandle {
    private let core: ObserverCore
    private let onCancel: @Sendable () -> Void

    init(core: ObserverCore, onCancel: @escaping @Sendable () -> Void) {
        self.core = core
        self.onCancel = onCancel
    }

    deinit { cancel() }

    /// Stops delivery (like `notify_cancel`); no handler call starts after this returns (a call
    /// already running finishes). The last observer of a name removes its rules from the bus.
    /// Calling it twice does nothing.
    public func cancel() {
        if core.cancel() { return }
        onCancel()
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { core.isCancelled }

    /// Holds deliveries (like `notify_suspend`): posts that arrive meanwhile are coalesced.
    public func suspend() { core.suspend() }

    /// Resumes deliveries (like `notify_resume`): if anything was posted while suspended, the
    /// handler is called once with the latest notification and its
    /// ``DarwinNotification/coalescedCount``, through the observer's `DeliveryQueue` like every
    /// other delivery (with `DeliveryQueue/ioThread`: on the calling thread, never at the same
    /// time as a delivery on the I/O thread).
    public func resume() { core.resume() }

    /// Whether the observer is suspended.
    package var isSuspended: Bool { core.isSuspended }
}

/// Notifications as an `AsyncSequence` (see ``DarwinNotificationCenter/notifications(name:options:)``);
/// the observer goes when the iteration ends or the stream is released.
public typealias NotificationStream = SubscriptionStream<DarwinNotification>

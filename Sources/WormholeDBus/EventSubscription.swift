import Synchronization
import WormholeSystem

/// A subscription to connection events made with ``BusConnection/onEvent(on:handler:)``.
///
/// Active until ``cancel()`` or until the last reference to it goes (``SubscriptionHandle``).
public final class EventSubscription: SubscriptionHandle {
    final class Box: Sendable {
        let cancelled = Atomic<Bool>(false)
    }

    private let io: BusIO
    private let id: UInt64
    private let box: Box

    init(io: BusIO, id: UInt64, box: Box) {
        self.io = io
        self.id = id
        self.box = box
    }

    deinit { cancel() }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { box.cancelled.load(ordering: .acquiring) }

    /// Stops delivery; the handler is not called after this returns. Calling it twice does nothing.
    public func cancel() {
        if box.cancelled.exchange(true, ordering: .acquiringAndReleasing) { return }
        io.removeEventHandler(id)
    }
}

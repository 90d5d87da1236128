import WormholeDBus
import WormholeSystem

/// A subscription woken by the posts of one notification name (or every name below a prefix)
/// on the bus, and by its directory while there is no bus: what a journal reader and a defaults
/// observer are to the ``WakeEngine``. What it reads on a wake is its owner's (the closures).
final class NotificationSubscriber: WakeSubscriber, SubscriptionHandle {
    private struct Side {
        /// Removes its route from the bus, once attached.
        var detach: (@Sendable () -> Void)?
        var engine: WakeEngine?
        var cancelled = false
    }

    /// The name observed on the bus, or the prefix (ending in `/`).
    let target: NotificationName
    let isPrefix: Bool
    let options: ObserverOptions
    let fallsBack: Bool
    let watchTarget: WatchTarget?
    /// A post (or the bus connection's own catch-up) on the bus, on the loop's thread.
    private let onNotification: @Sendable (DarwinNotification) -> Void
    /// Entries of the watched directory changed (the names), on the loop's thread.
    private let onFiles: @Sendable ([String]) -> Void
    /// Compare with what was last delivered (the bus came back, or events may have been lost).
    private let onCatchUp: @Sendable () -> Void
    private let side = Locked(Side())

    init(
        target: NotificationName, isPrefix: Bool, options: ObserverOptions = ObserverOptions(),
        watchTarget: WatchTarget?,
        fallsBack: Bool = true, onNotification: @escaping @Sendable (DarwinNotification) -> Void,
        onFiles: @escaping @Sendable ([String]) -> Void, onCatchUp: @escaping @Sendable () -> Void
    ) {
        self.target = target
        self.isPrefix = isPrefix
        self.options = options
        self.watchTarget = watchTarget
        self.fallsBack = fallsBack
        self.onNotification = onNotification
        self.onFiles = onFiles
        self.onCatchUp = onCatchUp
    }

    deinit { cancel() }

    var isAttached: Bool { side.withLock { $0.detach != nil } }
    var isCancelled: Bool { side.withLock { $0.cancelled } }

    func directoryChanged(_ names: [String]) { onFiles(names) }
    func catchUp() { onCatchUp() }
    func cancelForEngine() { cancel() }

    func attach(engine: WakeEngine) {
        let kept = side.withLock { side -> Bool in
            if side.cancelled { return false }
            side.engine = engine
            return true
        }
        if !kept { engine.unregister(self) }
    }

    func attach(to center: DarwinNotificationCenter) throws {
        let route = try center.addPostRoute(target, isPrefix: isPrefix, options: options, sink: onNotification)
        keep(route, of: center)
    }

    /// Adds its route without blocking the calling task (a stream's); `finish` runs when the
    /// connection closes for good.
    func attach(to center: DarwinNotificationCenter, finish: @escaping @Sendable () -> Void) async throws {
        let route = try await center.addPostRoute(
            target, isPrefix: isPrefix, options: options, sink: onNotification, finish: finish)
        keep(route, of: center)
    }

    /// Keeps the route added on the bus for it; when it was cancelled meanwhile, removes it.
    private func keep(_ route: PostRoute, of center: DarwinNotificationCenter) {
        let detach: @Sendable () -> Void = { center.removePostRoute(route) }
        let kept = side.withLock { side -> Bool in
            if side.cancelled { return false }
            side.detach = detach
            return true
        }
        if !kept { detach() }
    }

    /// Removes its observer and unregisters it from the engine; calling it twice does nothing.
    func cancel() {
        let (detach, engine) = side.withLock { side -> ((@Sendable () -> Void)?, WakeEngine?) in
            if side.cancelled { return (nil, nil) }
            side.cancelled = true
            defer {
                side.detach = nil
                side.engine = nil
            }
            return (side.detach, side.engine)
        }
        detach?()
        engine?.unregister(self)
    }
}

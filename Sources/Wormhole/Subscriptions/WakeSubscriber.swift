// SPDX-License-Identifier: Apache-2.0
import WormholeDBus
import WormholeSystem

/// One subscription as the ``WakeEngine`` sees it, whatever its kind (a mailbox listener, a
/// journal reader, a defaults observer, and their streams): what wakes it and where each wake
/// goes. On the bus it adds a ``PostRoute`` of its own for the posts of its name or prefix (and,
/// for a mailbox listener, a route of transient messages); without a bus the engine watches its
/// directory. Every wake reaches its reader through ``Wakes``: what to read is the reader's.
final class WakeSubscriber: Sendable {
    /// Where each kind of wake goes (each on the loop's thread).
    struct Wakes: Sendable {
        /// A post on the bus, or the connection's catch-up after a reconnect.
        var posted: @Sendable (DarwinNotification) -> Void
        /// A transient message (contract §7), for a mailbox listener; nil for the other kinds.
        var transient: (@Sendable (TransientSignal) -> Void)? = nil
        /// Entries of the watched directory changed (their names) while there is no bus.
        var files: @Sendable ([String]) -> Void
        /// Entries changed while on the bus: a mailbox listener watches its directory beside the
        /// bus for the messages whose sender died before its signal; nil for the others.
        var filesBesideBus: (@Sendable ([String]) -> Void)? = nil
        /// Compare with what was last delivered (the bus came back, or events may have been lost).
        var catchUp: @Sendable () -> Void
    }

    private struct Side {
        /// Removes its routes from the bus, once attached.
        var detach: (@Sendable () -> Void)?
        var engine: WakeEngine?
        var cancelled = false
    }

    /// The name observed on the bus, or the prefix (ending in `/`).
    let target: NotificationName
    let isPrefix: Bool
    let options: ObserverOptions
    /// Whether a directory watch may wake it while the bus cannot be reached.
    let fallsBack: Bool
    /// The directory that holds what it reads; nil when it has none (it then needs the bus).
    let watchTarget: WatchTarget?
    private let wakes: Wakes
    private let side = Locked(Side())

    init(
        target: NotificationName, isPrefix: Bool, options: ObserverOptions = ObserverOptions(),
        watchTarget: WatchTarget?, fallsBack: Bool = true, wakes: Wakes
    ) {
        self.target = target
        self.isPrefix = isPrefix
        self.options = options
        self.watchTarget = watchTarget
        self.fallsBack = fallsBack
        self.wakes = wakes
    }

    deinit { detach() }

    /// Whether it listens on the bus (its rules were accepted, or will be re-added by the
    /// connection on a reconnect).
    var isAttached: Bool { side.withLock { $0.detach != nil } }
    var isCancelled: Bool { side.withLock { $0.cancelled } }

    /// Whether a directory watch may wake it now: it allows it, has a directory, and is not
    /// cancelled.
    var mayFallBack: Bool { fallsBack && watchTarget != nil && !isCancelled }

    /// Whether its directory is watched while on the bus too.
    var watchesBesideBus: Bool { wakes.filesBesideBus != nil && watchTarget != nil }

    func directoryChanged(_ names: [String]) { wakes.files(names) }
    func directoryChangedBesideBus(_ names: [String]) { wakes.filesBesideBus?(names) }
    func catchUp() { wakes.catchUp() }

    /// Keeps the engine that wakes it, to unregister from it when cancelled; when it was
    /// cancelled meanwhile, unregisters at once.
    func attach(engine: WakeEngine) {
        let kept = side.withLock { side -> Bool in
            if side.cancelled { return false }
            side.engine = engine
            return true
        }
        if !kept { engine.unregister(self) }
    }

    /// Adds the routes of `subscribers` on `center`'s bus, batched: one round trip for all the
    /// exact names' post routes and one for their transient routes; a prefix's routes one by one.
    /// Subscribers attached before a failure stay attached (the connection re-adds their rules
    /// after a reconnect); the failure is thrown.
    static func attach(_ subscribers: [WakeSubscriber], to center: DarwinNotificationCenter) throws {
        let exact = subscribers.filter { !$0.isPrefix }
        if !exact.isEmpty {
            let routes = try center.addPostRoutes(exact.map { ($0.target, $0.options, $0.wakes.posted) })
            let carrying = exact.compactMap { subscriber in subscriber.wakes.transient.map { (subscriber.target, $0) } }
            let transients: [UInt64]
            do {
                transients = carrying.isEmpty ? [] : try center.addMessageRoutes(carrying)
            } catch {
                for route in routes { center.removePostRoute(route) }
                throw error
            }
            var next = transients.makeIterator()
            for (subscriber, route) in zip(exact, routes) {
                subscriber.keep(route, transient: subscriber.wakes.transient == nil ? nil : next.next(), of: center)
            }
        }
        for subscriber in subscribers where subscriber.isPrefix {
            let route = try center.addPostRoute(
                subscriber.target, isPrefix: true, options: subscriber.options, sink: subscriber.wakes.posted)
            var transient: UInt64?
            if let received = subscriber.wakes.transient {
                do {
                    transient = try center.addMessageRoute(subscriber.target, isPrefix: true, handler: received)
                } catch {
                    center.removePostRoute(route)
                    throw error
                }
            }
            subscriber.keep(route, transient: transient, of: center)
        }
    }

    /// Adds its routes without blocking the calling task (a stream's); `finish` runs when the
    /// connection closes for good.
    func attach(to center: DarwinNotificationCenter, finish: @escaping @Sendable () -> Void) async throws {
        let route = try await center.addPostRoute(
            target, isPrefix: isPrefix, options: options, sink: wakes.posted, finish: finish)
        var transient: UInt64?
        if let received = wakes.transient {
            do {
                transient = try await center.addMessageRoute(target, isPrefix: isPrefix, handler: received)
            } catch {
                center.removePostRoute(route)
                throw error
            }
        }
        keep(route, transient: transient, of: center)
    }

    /// Keeps the routes added on the bus for it; when it was cancelled meanwhile, removes them.
    private func keep(_ route: PostRoute, transient: UInt64?, of center: DarwinNotificationCenter) {
        let detach: @Sendable () -> Void = {
            center.removePostRoute(route)
            if let transient { center.removeMessageRoute(transient) }
        }
        let kept = side.withLock { side -> Bool in
            if side.cancelled { return false }
            side.detach = detach
            return true
        }
        if !kept { detach() }
    }

    /// Removes its routes and unregisters it from the engine, for good: what its handle's
    /// ``Subscription/cancel()`` does past the reader (or the engine, for a subscriber that could
    /// not start). Calling it twice does nothing.
    func detach() {
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

extension WakeSubscriber {
    /// The one way a stream's subscription starts (a message stream, a journal's records, a
    /// defaults change stream): its routes are added on `center`'s bus without blocking the task
    /// (or, without a bus, its directory is watched, as `engine` decides), the stream ends when
    /// the connection closes, and the returned handle, over `core`, is cancelled when the
    /// iteration ends or the stream is released.
    func startStream<Element>(
        in engine: WakeEngine, on center: () throws -> DarwinNotificationCenter, core: any SubscriptionCore,
        ending continuation: AsyncStream<Element>.Continuation
    ) async throws -> Subscription {
        try await engine.startStream(self) {
            try await attach(to: center()) { continuation.finish() }
        }
        let handle = Subscription(core: core) { self.detach() }
        continuation.onTermination = { _ in handle.cancel() }
        return handle
    }
}

// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// A center's post routes (its observers', listeners' and readers'), a field of the center
/// (``DarwinNotificationCenter``): a wake on the bus or the doorbell reaches a route through the
/// connection's and the doorbell's indexes, and the center reads its routes for the catch-up
/// after a reconnect and to leave the doorbell at close. Nothing reads them across centers.
///
/// Its lock is a leaf: nothing is called and nothing is released while it is held.
final class PostRouteTable: Sendable {
    private let routes = Locked<[ObjectIdentifier: PostRoute]>([:])

    func add(_ route: PostRoute) {
        routes.withLock { $0[ObjectIdentifier(route)] = route }
    }

    func remove(_ route: PostRoute) {
        // Taken out under the lock, released after it.
        _ = routes.withLock { $0.removeValue(forKey: ObjectIdentifier(route)) }
    }

    /// The routes (released by the caller, outside the lock).
    var all: [PostRoute] { routes.withLock { Array($0.values) } }

    /// How many routes it holds (for tests and diagnostics).
    var count: Int { routes.withLock { $0.count } }
}

/// A facade's wake subscribers, a field of its ``WakeEngine``: weakly (a subscriber lives as long
/// as its handle), each with the directory a watch may wake it through, counted so that a watch
/// is needed exactly while its count is above 0 and removing one of many subscribers costs no
/// scan of them all. Each facade's ``WakeSource`` stays its own (a facade with no subscription
/// off the bus is on the bus whatever another facade does).
///
/// Its lock is a leaf: nothing is called and nothing is released while it is held, so the
/// engine uses it inside its own lock, to keep its watches and its counts in step.
final class WakeSubscriberTable: Sendable {
    private let subscribers = Locked(WakeSubscribers())

    /// Adds `subscribers` (each once), counting the directory a watch may wake each through.
    func add(_ subscribers: [WakeSubscriber]) {
        // Whether each may fall back is asked before the lock (it reads the subscriber's state).
        let entries = subscribers.map { ($0, $0.mayFallBack ? $0.watchTarget?.key : nil) }
        self.subscribers.withLock { table in
            for (subscriber, watchKey) in entries { table.add(subscriber, watchKey: watchKey) }
        }
    }

    /// Removes a subscriber; returns the key of a directory no other subscriber needs now.
    @discardableResult
    func forget(_ subscriber: ObjectIdentifier) -> String? {
        subscribers.withLock { $0.forget(subscriber) }
    }

    /// The subscribers still alive (strong references: the caller releases them outside its own
    /// lock); forgets the others.
    func live() -> [WakeSubscriber] {
        subscribers.withLock { $0.live() }
    }

    /// Whether some subscriber may be woken through a directory.
    var needsWatches: Bool {
        subscribers.withLock { !$0.watchUsers.isEmpty }
    }

    /// How many live subscribers it holds (for tests and diagnostics).
    var count: Int { subscribers.withLock { $0.count } }
}

/// The state of a ``WakeSubscriberTable``: the subscribers, weakly, with the directory
/// each may be woken through, counted per directory.
private struct WakeSubscribers {
    private struct Registration {
        weak var subscriber: WakeSubscriber?
        /// The key of the directory a watch may wake it through (``WakeSubscriber/mayFallBack``
        /// when it registered), counted in ``watchUsers``.
        var watchKey: String?
    }

    private var registered: [ObjectIdentifier: Registration] = [:]
    /// How many registered subscribers may be woken through each directory (by
    /// ``WatchTarget/key``).
    private(set) var watchUsers: [String: Int] = [:]

    /// Registered subscribers still alive.
    var count: Int { registered.values.count { $0.subscriber != nil } }

    mutating func live() -> [WakeSubscriber] {
        var live: [WakeSubscriber] = []
        live.reserveCapacity(registered.count)
        var gone: [ObjectIdentifier] = []
        for (key, registration) in registered {
            if let subscriber = registration.subscriber { live.append(subscriber) } else { gone.append(key) }
        }
        for key in gone { forget(key) }
        return live
    }

    /// Adds `subscriber` once; `watchKey`: the directory a watch may wake it through, if it may
    /// fall back (``WakeSubscriber/mayFallBack``).
    mutating func add(_ subscriber: WakeSubscriber, watchKey: String?) {
        let key = ObjectIdentifier(subscriber)
        if let existing = registered[key] {
            if existing.subscriber != nil { return }
            // A released subscriber's address, reused: its registration goes first. (Its watch,
            // if nobody else needs it, stays until the next transition or until a subscriber of
            // that directory is added and removed again.)
            forget(key)
        }
        registered[key] = Registration(subscriber: subscriber, watchKey: watchKey)
        if let watchKey { watchUsers[watchKey, default: 0] += 1 }
    }

    @discardableResult
    mutating func forget(_ key: ObjectIdentifier) -> String? {
        guard let registration = registered.removeValue(forKey: key), let watchKey = registration.watchKey else {
            return nil
        }
        let users = (watchUsers[watchKey] ?? 1) - 1
        watchUsers[watchKey] = users > 0 ? users : nil
        return users > 0 ? nil : watchKey
    }
}

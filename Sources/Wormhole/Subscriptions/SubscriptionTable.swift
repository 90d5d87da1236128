// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// Every subscription of the process, registered once: the runtime's table
/// (``WormholeRuntime/subscriptions``), which each center and each facade's ``WakeEngine`` reads
/// through its own part (its view), as ``OwnConnections`` keeps each center's connection.
///
/// - A center's part holds its post routes (its observers', listeners' and readers'): a wake on
///   the bus or the doorbell reaches a route through the connection's and the doorbell's
///   indexes, and the center reads its part for the catch-up after a reconnect and to leave the
///   doorbell at close.
/// - An engine's part holds its wake subscribers (weakly: a subscriber lives as long as its
///   handle), each with the directory a watch may wake it through, counted so that a watch is
///   needed exactly while its count is above 0 and removing one of many subscribers costs no
///   scan of them all.
///
/// The parts are views, not copies: each owner's ``WakeSource`` stays its own (a facade with no
/// subscription off the bus is on the bus whatever another facade does). The table's lock is a
/// leaf: nothing is called and nothing is released while it is held, so an owner may use it
/// inside its own lock (the engine does, to keep its watches and its counts in step). An owner's part goes with the
/// owner (``removeOwner(_:)``, from its deinit).
final class SubscriptionTable: Sendable {
    /// An owner of a part: a center or an engine, by identity.
    typealias Owner = ObjectIdentifier

    private struct State {
        var routes: [Owner: [ObjectIdentifier: PostRoute]] = [:]
        var subscribers: [Owner: WakeSubscribers] = [:]
    }

    private let state = Locked(State())

    // MARK: A center's post routes

    func add(_ route: PostRoute, of center: Owner) {
        state.withLock { $0.routes[center, default: [:]][ObjectIdentifier(route)] = route }
    }

    func remove(_ route: PostRoute, of center: Owner) {
        // Taken out under the lock, released after it.
        _ = state.withLock { state -> PostRoute? in
            defer { if state.routes[center]?.isEmpty == true { state.routes[center] = nil } }
            return state.routes[center]?.removeValue(forKey: ObjectIdentifier(route))
        }
    }

    /// The routes of `center` (released by the caller, outside the lock).
    func routes(of center: Owner) -> [PostRoute] {
        state.withLock { state in state.routes[center].map { Array($0.values) } ?? [] }
    }

    // MARK: An engine's wake subscribers

    /// Adds `subscribers` to `engine`'s part (each once), counting the directory a watch may
    /// wake each through.
    func add(_ subscribers: [WakeSubscriber], of engine: Owner) {
        // Whether each may fall back is asked before the lock (it reads the subscriber's state).
        let entries = subscribers.map { ($0, WakeEngine.mayFallBack($0) ? $0.watchTarget?.key : nil) }
        state.withLock { state in
            for (subscriber, watchKey) in entries {
                state.subscribers[engine, default: WakeSubscribers()].add(subscriber, watchKey: watchKey)
            }
        }
    }

    /// Removes a subscriber from `engine`'s part; returns the key of a directory no other
    /// subscriber of the engine needs now.
    @discardableResult
    func forget(_ subscriber: ObjectIdentifier, of engine: Owner) -> String? {
        state.withLock { $0.subscribers[engine]?.forget(subscriber) }
    }

    /// The subscribers of `engine` still alive (strong references: the caller releases them
    /// outside its own lock); forgets the others.
    func live(of engine: Owner) -> [WakeSubscriber] {
        state.withLock { $0.subscribers[engine]?.live() ?? [] }
    }

    /// Whether some subscriber of `engine` may be woken through a directory.
    func needsWatches(_ engine: Owner) -> Bool {
        state.withLock { !($0.subscribers[engine]?.watchUsers.isEmpty ?? true) }
    }

    // MARK: Owners

    /// Forgets an owner's part (from its deinit: an identity can be reused once it is gone).
    func removeOwner(_ owner: Owner) {
        // The part's routes are released after the lock.
        _ = state.withLock { state -> [ObjectIdentifier: PostRoute]? in
            state.subscribers[owner] = nil
            return state.routes.removeValue(forKey: owner)
        }
    }

    /// How many routes and live subscribers `owner`'s part holds (for tests and diagnostics).
    func count(of owner: Owner) -> (routes: Int, subscribers: Int) {
        state.withLock { state in
            (state.routes[owner]?.count ?? 0, state.subscribers[owner]?.count ?? 0)
        }
    }
}

/// One engine's part of the ``SubscriptionTable``: its subscribers, weakly, with the directory
/// each may be woken through, counted per directory.
private struct WakeSubscribers {
    private struct Registration {
        weak var subscriber: WakeSubscriber?
        /// The key of the directory a watch may wake it through (``WakeEngine/mayFallBack(_:)``
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
    /// fall back (``WakeEngine/mayFallBack(_:)``).
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

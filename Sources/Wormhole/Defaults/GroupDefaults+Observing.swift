import Logging
import Synchronization
public import WormholeDBus

extension GroupDefaults {
    /// A change of one key, as an observer receives it.
    public struct Change: Sendable, Hashable, CustomStringConvertible {
        /// Why the observer is called.
        public enum Reason: Sendable, Hashable {
            /// The current value, delivered first when the observer asked for it (`initial: true`).
            case initial
            /// A writer changed the key and posted it.
            case changed
            /// The bus connection was lost and is back: the key changed meanwhile.
            case catchUp
        }

        /// The key.
        public var key: String
        /// The new value; nil when the key was removed.
        public var value: PropertyListValue?
        /// Why the observer is called.
        public var reason: Reason
        /// Whether this process made the change (through any notification center).
        public var isOwnWrite: Bool

        /// Creates a change (for tests and adapters).
        public init(key: String, value: PropertyListValue?, reason: Reason = .changed, isOwnWrite: Bool = false) {
            self.key = key
            self.value = value
            self.reason = reason
            self.isOwnWrite = isOwnWrite
        }

        public var description: String { "\(key) = \(value.map(\.description) ?? "removed") (\(reason))" }
    }

    /// Calls `handler` each time `key` changes, in this process or another, until the observer is
    /// cancelled or released. Active when this returns. Only `key`'s notifications reach this
    /// process (the bus daemon filters them); the value delivered is read from the suite when the
    /// handler is about to run, so a burst of writes may be delivered once, with the latest value.
    /// After a bus outage the handler is called once more (``Change/Reason/catchUp``) if the key
    /// changed meanwhile.
    ///
    /// - Parameters:
    ///   - key: the key to observe.
    ///   - delivery: where `handler` runs.
    ///   - options: ``ObserverOptions/ignoresOwnPosts`` skips this process's own writes.
    ///   - initial: first deliver the current value (``Change/Reason/initial``, nil when absent).
    ///   - handler: called with each ``Change``.
    /// - Throws: ``WormholeError`` for a bad key, `BusError` when the bus cannot be reached.
    public func observe(
        _ key: String, on delivery: DeliveryQueue = .serial, options: ObserverOptions = ObserverOptions(),
        initial: Bool = false, handler: @escaping @Sendable (Change) -> Void
    ) throws -> DefaultsObserver {
        let name = try notificationName(forKey: key)
        let tracker = ChangeTracker(defaults: self, key: key, executor: delivery.makeExecutor(label: "wormhole.defaults"), handler: handler)
        let observer = try notificationCenter().addObserver(for: name, on: .ioThread, options: options) { note in
            tracker.notified(note)
        }
        tracker.start(initial: initial)
        return DefaultsObserver(observer: observer)
    }

    /// Calls `handler` for every change of every key of the suite (the prefix
    /// `<group>/Preferences/<suite>/`), as ``observe(_:on:options:initial:handler:)-(_,DeliveryQueue,_,_,_)`` does for one key.
    /// With `initial`, every stored key is delivered first.
    public func observeSuite(
        on delivery: DeliveryQueue = .serial, options: ObserverOptions = ObserverOptions(), initial: Bool = false,
        handler: @escaping @Sendable (Change) -> Void
    ) throws -> DefaultsObserver {
        let tracker = ChangeTracker(defaults: self, key: nil, executor: delivery.makeExecutor(label: "wormhole.defaults"), handler: handler)
        let observer = try notificationCenter().addObserver(forPrefix: notificationPrefix, on: .ioThread, options: options) { note in
            tracker.notified(note)
        }
        tracker.start(initial: initial)
        return DefaultsObserver(observer: observer)
    }

    /// The changes of `key` as an `AsyncSequence`, optionally starting with the current value.
    /// The observer is active when this returns and goes when the iteration ends or the stream
    /// is released. The buffer keeps the newest ``ObserverOptions/bufferLimit`` changes.
    public func changes(
        forKey key: String, initial: Bool = false, options: ObserverOptions = ObserverOptions()
    ) async throws -> DefaultsChangeStream {
        try await stream(name: notificationName(forKey: key), key: key, initial: initial, options: options)
    }

    /// The changes of every key of the suite as an `AsyncSequence`.
    public func changes(initial: Bool = false, options: ObserverOptions = ObserverOptions()) async throws
        -> DefaultsChangeStream
    {
        try await stream(name: notificationPrefix, key: nil, initial: initial, options: options)
    }

    private func stream(
        name: NotificationName, key: String?, initial: Bool, options: ObserverOptions
    ) async throws -> DefaultsChangeStream {
        let (stream, continuation) = AsyncStream<Change>.makeStream(bufferingPolicy: .bufferingNewest(max(1, options.bufferLimit)))
        let tracker = ChangeTracker(
            defaults: self, key: key, executor: DeliveryQueue.ioThread.makeExecutor(label: "wormhole.defaults"),
            handler: { continuation.yield($0) })
        let observer = try await notificationCenter().addObserver(
            name, isPrefix: key == nil, on: .ioThread, options: options, handler: { tracker.notified($0) },
            finish: { continuation.finish() })
        continuation.onTermination = { _ in observer.cancel() }
        tracker.start(initial: initial)
        return DefaultsChangeStream(stream)
    }
}

/// Changes of shared defaults as an `AsyncSequence` (see ``GroupDefaults/changes(forKey:initial:options:)``).
public typealias DefaultsChangeStream = SubscriptionStream<GroupDefaults.Change>

/// A registered observer of shared defaults (see ``GroupDefaults/observe(_:on:options:initial:handler:)-(_,DeliveryQueue,_,_,_)``):
/// active until ``cancel()`` or until the last reference to it is released.
public final class DefaultsObserver: SubscriptionHandle {
    private let observer: NotificationObserver

    init(observer: NotificationObserver) { self.observer = observer }

    /// Stops deliveries and removes the observer's match rules; calling it twice does nothing.
    public func cancel() { observer.cancel() }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { observer.isCancelled }
}

/// Turns notifications into changes: reads the suite and hands each change to the handler
/// through the observer's executor.
///
/// A post carries the generation of the write that made it. A key already delivered from a
/// version of the suite at least that new is not delivered again (a burst coalesces into one
/// delivery of the latest value, never a repeat of it); a post without a generation (`dbus-send`)
/// is always delivered. A catch-up compares the suite with the values last delivered and
/// delivers the keys that differ.
final class ChangeTracker: Sendable {
    private struct State {
        /// The values last delivered (or seen when the observer started); nil until then.
        var known: [String: PropertyListValue]?
        /// Per key, the generation of the suite version its last delivery was read from.
        var delivered: [String: UInt64] = [:]
    }

    private let defaults: GroupDefaults
    /// The observed key; nil for the whole suite.
    private let key: String?
    private let executor: DeliveryExecutor
    private let handler: @Sendable (GroupDefaults.Change) -> Void
    private let state = Mutex(State())

    init(
        defaults: GroupDefaults, key: String?, executor: DeliveryExecutor,
        handler: @escaping @Sendable (GroupDefaults.Change) -> Void
    ) {
        self.defaults = defaults
        self.key = key
        self.executor = executor
        self.handler = handler
    }

    /// Called once the observer is active: remembers the current values, and delivers them first
    /// when `initial`.
    func start(initial: Bool) {
        executor.run { [self] in
            let current = read()?.values ?? [:]
            let first = state.withLock { state -> [String: PropertyListValue] in
                if state.known == nil { state.known = current }
                return state.known!
            }
            guard initial else { return }
            if let key {
                handler(GroupDefaults.Change(key: key, value: first[key], reason: .initial))
            } else {
                for name in first.keys.sorted() {
                    handler(GroupDefaults.Change(key: name, value: first[name], reason: .initial))
                }
            }
        }
    }

    /// Runs on the I/O thread for each post (or catch-up) that reached the observer.
    func notified(_ note: DarwinNotification) {
        executor.run { [self] in deliver(note) }
    }

    private func deliver(_ note: DarwinNotification) {
        let changes: [GroupDefaults.Change]
        switch note.reason {
        case .posted:
            let name: String
            if let key {
                name = key
            } else {
                let prefix = defaults.notificationPrefix.rawValue
                guard note.name.rawValue.hasPrefix(prefix), note.name.rawValue.utf8.count > prefix.utf8.count else { return }
                name = String(note.name.rawValue.dropFirst(prefix.count))
            }
            if let generation = note.state, let done = state.withLock({ $0.delivered[name] }), done >= generation {
                return
            }
            guard let snapshot = read() else { return }
            let value = snapshot.values[name]
            changes = state.withLock { state in
                if let generation = note.state, let done = state.delivered[name], done >= generation { return [] }
                state.delivered[name] = snapshot.generation
                if state.known == nil { state.known = snapshot.values }
                state.known![name] = value
                return [GroupDefaults.Change(key: name, value: value, reason: .changed, isOwnWrite: note.isOwnPost)]
            }
        case .catchUp:
            guard let snapshot = read() else { return }
            changes = state.withLock { state in
                let before = state.known ?? [:]
                let names = key.map { [$0] } ?? Set(before.keys).union(snapshot.values.keys).sorted()
                var changes: [GroupDefaults.Change] = []
                for name in names where before[name] != snapshot.values[name] {
                    state.delivered[name] = snapshot.generation
                    changes.append(GroupDefaults.Change(key: name, value: snapshot.values[name], reason: .catchUp))
                }
                state.known = key == nil ? snapshot.values : before.merging(snapshot.values.filter { $0.key == key }) { $1 }
                if let key, snapshot.values[key] == nil { state.known?[key] = nil }
                return changes
            }
        }
        for change in changes { handler(change) }
    }

    /// The suite now; nil (logged) when it cannot be read.
    private func read() -> SuiteStore.Snapshot? {
        do {
            return try defaults.store.snapshot()
        } catch {
            defaults.logger.error("observer cannot read \(defaults.path): \(error)")
            return nil
        }
    }
}

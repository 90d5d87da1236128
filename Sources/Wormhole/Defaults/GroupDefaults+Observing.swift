// SPDX-License-Identifier: Apache-2.0
import Glibc
import Logging
public import WormholeDBus
import WormholeSystem

extension GroupDefaults {
    /// A change of one key, as an observer receives it.
    public struct Change: Sendable, Hashable, CustomStringConvertible {
        /// Why the observer is called.
        public enum Reason: Sendable, Hashable {
            /// The current value, delivered first when the observer asked for it (`initial: true`).
            case initial
            /// A writer changed the key and posted it.
            case changed
            /// The bus connection was lost and is back (or the observer started without it and it
            /// came): the key changed meanwhile.
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
        package init(key: String, value: PropertyListValue?, reason: Reason = .changed, isOwnWrite: Bool = false) {
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
    /// changed meanwhile. Without a bus (none running, or lost) the observer is woken by the
    /// suite file's replacement in the `Preferences` directory instead (``wakeSource``), and
    /// moves back to the bus when it can be reached.
    ///
    /// - Parameters:
    ///   - key: the key to observe.
    ///   - delivery: where `handler` runs.
    ///   - options: ``ObserverOptions/ignoresOwnPosts`` skips this process's own writes.
    ///   - initial: first deliver the current value (``Change/Reason/initial``, nil when absent).
    ///   - handler: called with each ``Change``.
    /// - Throws: ``WormholeError`` for a bad key; `BusError` when the bus refuses the observer.
    public func listen(
        forKey key: String, on delivery: DeliveryQueue = .serial, options: ObserverOptions = ObserverOptions(),
        initial: Bool = false, handler: @escaping @Sendable (Change) -> Void
    ) throws -> Subscription {
        try observe(
            name: notificationName(forKey: key), key: key, on: delivery, options: options, initial: initial, handler)
    }

    /// Calls `handler` for every change of every key of the suite (the prefix
    /// `<group>/Preferences/<suite>/`), as ``listen(forKey:on:options:initial:handler:)-(_,DeliveryQueue,_,_,_)`` does for one key.
    /// With `initial`, every stored key is delivered first.
    public func listen(
        on delivery: DeliveryQueue = .serial, options: ObserverOptions = ObserverOptions(), initial: Bool = false,
        handler: @escaping @Sendable (Change) -> Void
    ) throws -> Subscription {
        try observe(name: notificationPrefix, key: nil, on: delivery, options: options, initial: initial, handler)
    }

    /// An observer of `key` (nil: the whole suite, `name` its prefix): its reader
    /// (``ChangeTracker``, on `delivery`), active on the bus or its directory when this returns.
    private func observe(
        name: NotificationName, key: String?, on delivery: DeliveryQueue, options: ObserverOptions, initial: Bool,
        _ handler: @escaping @Sendable (Change) -> Void
    ) throws -> Subscription {
        let tracker = ChangeTracker(
            defaults: self, key: key, executor: delivery.makeExecutor(label: "wormhole.defaults"), handler: handler)
        let subscriber = makeSubscriber(name, isPrefix: key == nil, options: options, tracker: tracker)
        try wakeups.start([subscriber])
        tracker.start(initial: initial)
        return Subscription(core: tracker) { subscriber.detach() }
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

    /// How this suite's observers are woken now: ``WakeSource/bus``, or
    /// ``WakeSource/directory(_:)`` (the `Preferences` directory) while the bus cannot be reached.
    public var wakeSource: WakeSource { wakeups.source }

    /// Calls `handler` with the new ``WakeSource`` each time this suite's observers switch from
    /// the bus to the directory watch or back, until the subscription is cancelled or released.
    public func onWakeSourceChange(
        on delivery: DeliveryQueue = .serial, _ handler: @escaping @Sendable (WakeSource) -> Void
    ) -> Subscription {
        wakeups.subscribe(delivery.makeExecutor(label: "wormhole.wake-source"), handler)
    }

    private func stream(
        name: NotificationName, key: String?, initial: Bool, options: ObserverOptions
    ) async throws -> DefaultsChangeStream {
        let (stream, continuation) = AsyncStream<Change>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, options.bufferLimit)))
        let tracker = ChangeTracker(
            defaults: self, key: key, executor: DeliveryQueue.ioThread.makeExecutor(label: "wormhole.defaults"),
            handler: { continuation.yield($0) })
        let subscriber = makeSubscriber(name, isPrefix: key == nil, options: options, tracker: tracker)
        _ = try await subscriber.startStream(in: wakeups, on: notificationCenter, core: tracker, ending: continuation)
        tracker.start(initial: initial)
        return DefaultsChangeStream(stream)
    }

    /// An observer's wake-ups for the ``WakeEngine``: the writers' posts on the bus; without a
    /// bus, the `Preferences` directory (a write renames a new suite file onto `<suite>.json`).
    private func makeSubscriber(
        _ name: NotificationName, isPrefix: Bool, options: ObserverOptions, tracker: ChangeTracker
    ) -> WakeSubscriber {
        let container = container
        let fileName = suite.fileName
        let target = WatchTarget(
            key: container.path + "/" + SuiteStore.directoryName,
            events: UInt32(IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)
        ) { create throws(WormholeError) in
            guard let directory = try container.openDirectory(named: SuiteStore.directoryName, create: create) else {
                if !create { return nil }
                throw WormholeError(
                    .io, value: container.path, "cannot create the Preferences directory in '\(container.path)'")
            }
            return directory
        }
        return WakeSubscriber(
            target: name, isPrefix: isPrefix, options: options, watchTarget: target,
            wakes: .init(
                posted: { tracker.notified($0) },
                files: { names in if names.contains(fileName) { tracker.fileChanged() } },
                catchUp: { tracker.catchUp() }))
    }
}

/// Changes of shared defaults as an `AsyncSequence` (see ``GroupDefaults/changes(forKey:initial:options:)``).
public typealias DefaultsChangeStream = SubscriptionStream<GroupDefaults.Change, Never>

/// Turns notifications into changes: reads the suite and hands each change to the handler
/// through the observer's executor.
///
/// A post carries the generation of the write that made it. A key already delivered from a
/// version of the suite at least that new is not delivered again (a burst coalesces into one
/// delivery of the latest value, never a repeat of it); a post without a generation (`dbus-send`)
/// is always delivered. A catch-up compares the suite with the values last delivered and
/// delivers the keys that differ.
final class ChangeTracker: SubscriptionCore {
    /// What a round of the pump has to do, in the order it was asked for.
    private enum Event {
        /// The listener is active: take the baseline, and deliver it when `initial`.
        case start(initial: Bool)
        /// A writer's post (or a post-less `dbus-send`).
        case post(DarwinNotification)
        /// Compare the suite with what was last delivered (a catch-up, a file replaced).
        case differences(GroupDefaults.Change.Reason)
    }

    private struct State {
        /// Asked for and not yet done.
        var events: [Event] = []
        /// The values last delivered (or seen when the observer started); nil until then.
        var known: [String: PropertyListValue]?
        /// Per key, the generation of the suite version its last delivery was read from.
        var delivered: [String: UInt64] = [:]
    }

    private let defaults: GroupDefaults
    /// The observed key; nil for the whole suite.
    private let key: String?
    let pump: DeliveryPump
    private let handler: @Sendable (GroupDefaults.Change) -> Void
    private let state = Locked(State())

    init(
        defaults: GroupDefaults, key: String?, executor: DeliveryExecutor,
        handler: @escaping @Sendable (GroupDefaults.Change) -> Void
    ) {
        self.defaults = defaults
        self.key = key
        pump = DeliveryPump(executor: executor)
        self.handler = handler
    }

    func forgetPending() { state.withLock { $0.events = [] } }

    /// Asks the next round for `event`. A post of a key already waiting for a round merges into
    /// the waiting one when both carry a generation (one read delivers the latest value either
    /// way), or while suspended (which then keeps one event per key): the merged post keeps the
    /// first one's place and its `isOwnPost`, the higher generation, and none when either had
    /// none (such a post is always delivered). Consecutive equal comparisons are one.
    private func ask(_ event: Event) {
        if pump.isCancelled { return }
        state.withLock { state in
            switch event {
            case .post(let note):
                let suspended = pump.isSuspended
                let waiting = state.events.firstIndex {
                    guard case .post(let earlier) = $0, earlier.name == note.name else { return false }
                    return suspended || (earlier.state != nil && note.state != nil)
                }
                if let waiting, case .post(var merged) = state.events[waiting] {
                    merged.state = merged.state.flatMap { earlier in note.state.map { max(earlier, $0) } }
                    state.events[waiting] = .post(merged)
                    return
                }
            case .differences(let reason):
                if case .differences(reason)? = state.events.last { return }
            case .start: break
            }
            state.events.append(event)
        }
        wake()
    }

    /// The pump's round: what was asked for, in order (``ask(_:)`` already made consecutive
    /// equal comparisons one).
    func drainPending() {
        drain {
            state.withLock { $0.events.takeAll() }
        } deliver: { event in
            switch event {
            case .start(let initial): begin(initial: initial)
            case .post(let note): deliverPost(note)
            case .differences(let reason): deliverDifferences(reason: reason)
            }
        }
    }

    /// Called once the observer is active: remembers the current values, and delivers them first
    /// when `initial`.
    func start(initial: Bool) { ask(.start(initial: initial)) }

    private func begin(initial: Bool) {
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

    /// Runs on the I/O thread for each post (or catch-up) that reached the observer.
    func notified(_ note: DarwinNotification) {
        switch note.reason {
        case .posted: ask(.post(note))
        case .catchUp: catchUp()
        }
    }

    /// Compares the suite with the values last delivered and delivers the keys that differ
    /// (``GroupDefaults/Change/Reason/catchUp``): after the bus came back.
    func catchUp() { ask(.differences(.catchUp)) }

    /// The suite file was replaced or removed (seen by the directory watch while there is no
    /// bus): the keys that differ from what was last delivered, as ``GroupDefaults/Change/Reason/changed``.
    func fileChanged() { ask(.differences(.changed)) }

    private func deliverPost(_ note: DarwinNotification) {
        let name: String
        if let key {
            name = key
        } else {
            let prefix = defaults.notificationPrefix.rawValue
            guard note.name.rawValue.hasPrefix(prefix), note.name.rawValue.utf8.count > prefix.utf8.count else {
                return
            }
            name = String(note.name.rawValue.dropFirst(prefix.count))
        }
        if let generation = note.state, let done = state.withLock({ $0.delivered[name] }), done >= generation {
            return
        }
        guard let snapshot = read() else { return }
        let value = snapshot.values[name]
        let changes = state.withLock { state -> [GroupDefaults.Change] in
            if let generation = note.state, let done = state.delivered[name], done >= generation { return [] }
            state.delivered[name] = snapshot.generation
            if state.known == nil { state.known = snapshot.values }
            state.known![name] = value
            return [GroupDefaults.Change(key: name, value: value, reason: .changed, isOwnWrite: note.isOwnPost)]
        }
        for change in changes { handler(change) }
    }

    private func deliverDifferences(reason: GroupDefaults.Change.Reason) {
        guard let snapshot = read() else { return }
        let changes = state.withLock { state -> [GroupDefaults.Change] in
            // Before the observer's baseline was taken: this is the baseline, nothing changed.
            guard let before = state.known else {
                state.known = snapshot.values
                return []
            }
            let names = key.map { [$0] } ?? Set(before.keys).union(snapshot.values.keys).sorted()
            var changes: [GroupDefaults.Change] = []
            for name in names where before[name] != snapshot.values[name] {
                state.delivered[name] = snapshot.generation
                changes.append(GroupDefaults.Change(key: name, value: snapshot.values[name], reason: reason))
            }
            state.known = key == nil ? snapshot.values : before.merging(snapshot.values.filter { $0.key == key }) { $1 }
            if let key, snapshot.values[key] == nil { state.known?[key] = nil }
            return changes
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

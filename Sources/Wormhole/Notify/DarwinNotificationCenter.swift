public import Dispatch
public import Logging
import Synchronization
public import WormholeDBus

/// One notification as an observer receives it.
public struct DarwinNotification: Sendable, Hashable, CustomStringConvertible {
    /// Why the observer is being called.
    public enum Kind: Sendable, Hashable {
        /// Somebody posted the name.
        case posted
        /// The connection to the bus was lost and is back: posts made in between were missed.
        /// Delivered once per observer after each reconnect, like `notify_resume` after a
        /// suspension; re-read whatever the notification guards.
        case catchUp
    }

    /// The posted name (for ``Kind/catchUp``, the observed name or prefix).
    public var name: String
    /// The state the post carried, or `nil` when it carried none (a hand-typed `dbus-send`).
    public var state: UInt64?
    /// Why the observer is being called.
    public var kind: Kind
    /// How many posts this delivery stands for: more than 1 when posts arrived while the
    /// observer was suspended and were coalesced into this one delivery (the latest).
    public var coalescedCount: Int
    /// Whether this process posted it (through any ``DarwinNotificationCenter``).
    public var isOwnPost: Bool

    public var description: String {
        "\(kind == .catchUp ? "catch-up for" : "posted") \(name) state \(state.map(String.init) ?? "none")"
            + (coalescedCount > 1 ? " (\(coalescedCount) coalesced)" : "")
    }
}

/// How an observer behaves.
public struct ObserverOptions: Sendable, Hashable {
    /// Skip notifications this process posted itself. Darwin always delivers them; so do we by default.
    public var ignoresOwnPosts: Bool
    /// For streams: how many undelivered notifications are kept; past that the oldest is dropped
    /// (notifications carry no payload, so the newest one is what matters).
    public var bufferLimit: Int

    /// Creates options.
    public init(ignoresOwnPosts: Bool = false, bufferLimit: Int = 256) {
        self.ignoresOwnPosts = ignoresOwnPosts
        self.bufferLimit = bufferLimit
    }
}

/// Darwin's notify center (`notify_post(3)`, `CFNotificationCenterGetDarwinNotifyCenter`)
/// on a D-Bus bus: any process posts a name, every process that observes it wakes at once.
/// Notifications carry a name and an optional 64-bit state, no payload.
///
/// ```swift
/// let center = try DarwinNotificationCenter()          // the session bus
/// let name = try NotificationName("com.example.app.refresh")
/// let observer = try center.addObserver(for: name, queue: .global()) { note in
///     print("refresh!", note.state ?? 0)
/// }
/// try center.post(name)
/// ```
///
/// The wire format is the contract's §1: `Posted(s name, t state)` on
/// `/org/wormhole/Notify1`, on the name's bucket interface; observers also accept the plain
/// interface `org.wormhole.Notify1` that `dbus-send` users type. Filtering happens in the bus
/// daemon, so a process is never woken for names it does not observe.
///
/// The center reconnects by itself when the bus daemon restarts, re-adds every observer's
/// rules, and then calls each observer once with a ``DarwinNotification/Kind/catchUp``.
public final class DarwinNotificationCenter: Sendable {
    /// The connection the center posts and observes on.
    public let connection: BusConnection
    let table: SharedStateTable?
    let logger: Logger
    private let observers = Mutex<[UInt64: ObserverCore]>([:])
    private let lastStates = Mutex<[String: UInt64]>([:])
    private let nextID = Atomic<UInt64>(1)
    private let eventQueue = DispatchQueue(label: "wormhole.notify.events")

    /// Every center's connection in this process, to recognise own posts. A sender is this
    /// process when it is the *current* unique name of one of them on the same bus address:
    /// every daemon numbers unique names from `:1.0`, so a bare name could be another bus's,
    /// or (after a restart) another process's that inherited a name we held before.
    static let ownConnections = Mutex<[ObjectIdentifier: BusConnection]>([:])

    static func isOwn(sender: String, on address: BusAddress) -> Bool {
        ownConnections.withLock { $0.values.contains { $0.address == address && $0.uniqueName == sender } }
    }

    /// Connects to the bus at `busAddress` (the session bus when `nil`).
    ///
    /// - Parameters:
    ///   - busAddress: the bus; `nil` reads `DBUS_SESSION_BUS_ADDRESS`.
    ///   - sharedStateDirectory: where the shared generation table for check tokens lives;
    ///     `nil` uses `$XDG_RUNTIME_DIR/wormhole`, or `/tmp/wormhole-<uid>` without it. When
    ///     the table cannot be opened the center still works; check tokens then rely on
    ///     signals alone, and a warning is logged.
    /// - Throws: ``BusError`` naming the address when the bus cannot be reached.
    public init(
        busAddress: BusAddress? = nil, sharedStateDirectory: String? = nil,
        logger: Logger = Logger(label: "wormhole.notify")
    ) throws {
        let address = try busAddress ?? BusAddress.session()
        self.logger = logger
        connection = try BusConnection(address: address, reconnect: .automatic, logger: logger)
        do {
            table = try SharedStateTable(directory: sharedStateDirectory ?? SharedStateTable.defaultDirectory())
        } catch {
            logger.warning("shared notification table unavailable; check tokens use signals only: \(error)")
            table = nil
        }
        let connection = self.connection
        Self.ownConnections.withLock { $0[ObjectIdentifier(self)] = connection }
        let subscription = connection.onEvent(on: .queue(eventQueue)) { [weak self] event in
            self?.connectionChanged(event)
        }
        eventSubscription.withLock { $0 = subscription }
    }

    private let eventSubscription = Mutex<EventSubscription?>(nil)

    deinit {
        eventSubscription.withLock { $0?.cancel() }
        let key = ObjectIdentifier(self)
        _ = Self.ownConnections.withLock { $0.removeValue(forKey: key) }
        connection.close()
    }

    private func connectionChanged(_ event: BusConnectionEvent) {
        switch event {
        case .disconnected:
            logger.warning("bus connection lost; observers will catch up when it returns")
        case .reconnected:
            let cores = observers.withLock { Array($0.values) }
            for core in cores {
                core.offer(DarwinNotification(name: core.target, state: nil, kind: .catchUp, coalescedCount: 1, isOwnPost: false))
            }
        }
    }

    /// Closes the connection; observers stop and streams finish.
    public func close() { connection.close() }

    /// Blocks until every post has been written to the bus socket (call before exiting).
    public func flush() { connection.flush() }

    // MARK: Posting

    /// Posts `name` (like `notify_post`), with an optional new state (like `notify_set_state`
    /// followed by `notify_post`).
    ///
    /// The shared table's generation for the name is bumped before the signal is sent, so a
    /// check token can never miss the post. A post without `state` carries the name's last
    /// posted state (0 if none): the state belongs to the name, not to the post.
    ///
    /// - Throws: ``BusError`` with ``BusError/Code/disconnected`` while the bus is away.
    public func post(_ name: NotificationName, state: UInt64? = nil) throws {
        var carried = state
        if let table {
            let slot = table.slot(for: name.rawValue)
            table.recordPost(slot, state: state)
            if carried == nil { carried = table.state(slot) }
        }
        if let state {
            lastStates.withLock { $0[name.rawValue] = state }
        } else if carried == nil {
            carried = lastStates.withLock { $0[name.rawValue] }
        }
        let signal = Signal(
            path: NotifyContract.path, interface: NotifyContract.bucket(for: name.rawValue), member: NotifyContract.posted,
            arguments: [.string(name.rawValue), .uint64(carried ?? 0)])
        try connection.emit(signal)
    }

    /// Posts a name given as a string; throws ``WormholeError/Code/invalidName`` for a bad name.
    public func post(_ name: String, state: UInt64? = nil) throws {
        try post(NotificationName(name), state: state)
    }

    // MARK: State

    /// The last state this center has seen for `name`: posted by it, or carried by a
    /// notification it received for an observed name. `nil` if none.
    ///
    /// Unlike `notify_get_state`, which asks a daemon, this answers from memory; for the
    /// machine-wide last posted state use ``sharedState(of:)``.
    public func lastState(of name: NotificationName) -> UInt64? {
        lastStates.withLock { $0[name.rawValue] }
    }

    /// The last state any Wormhole poster of this user posted for `name`, from the shared
    /// table (`nil` if none did, or the table is unavailable). Posts made with `dbus-send`
    /// are not in the table.
    public func sharedState(of name: NotificationName) -> UInt64? {
        guard let table else { return nil }
        return table.state(table.slot(for: name.rawValue))
    }

    // MARK: Observing

    /// Calls `handler` for every post of `name` until the observer is cancelled
    /// (like `notify_register_dispatch`). Active when this returns: a post made afterwards is
    /// delivered.
    ///
    /// - Parameter queue: where `handler` runs, in order. `nil` runs it on the connection's
    ///   I/O thread, the lowest latency; such a handler must return quickly and never block.
    public func addObserver(
        for name: NotificationName, queue: DispatchQueue?, options: ObserverOptions = ObserverOptions(),
        handler: @escaping @Sendable (DarwinNotification) -> Void
    ) throws -> NotificationObserver {
        try observe(target: name, isPrefix: false, options: options, sink: Self.sink(queue: queue, handler))
    }

    /// Calls `handler` for every post of any name that starts with `prefix`, which must end
    /// in `/` (an `arg0path` rule on the bus).
    public func addObserver(
        forPrefix prefix: NotificationName, queue: DispatchQueue?, options: ObserverOptions = ObserverOptions(),
        handler: @escaping @Sendable (DarwinNotification) -> Void
    ) throws -> NotificationObserver {
        try Self.checkPrefix(prefix)
        return try observe(target: prefix, isPrefix: true, options: options, sink: Self.sink(queue: queue, handler))
    }

    /// The posts of `name` as an `AsyncSequence`. The observer is active when this returns
    /// and goes away when the iteration ends or its task is cancelled.
    public func notifications(
        named name: NotificationName, options: ObserverOptions = ObserverOptions()
    ) async throws -> NotificationStream {
        try await stream(target: name, isPrefix: false, options: options)
    }

    /// The posts of every name below `prefix` (ending in `/`) as an `AsyncSequence`.
    public func notifications(
        prefix: NotificationName, options: ObserverOptions = ObserverOptions()
    ) async throws -> NotificationStream {
        try Self.checkPrefix(prefix)
        return try await stream(target: prefix, isPrefix: true, options: options)
    }

    /// A check token for `name` (like `notify_register_check`): ``NotificationCheckToken/check()``
    /// says whether the name was posted since the last check, with no system call and no bus
    /// traffic. The first check answers `true`, as on Darwin.
    public func makeCheckToken(for name: NotificationName) throws -> NotificationCheckToken {
        let token = NotificationCheckToken(table: table, slot: table?.slot(for: name.rawValue))
        let id = try connection.addRoute(try NotifyContract.rules(observing: name)) { [weak token] signal in
            guard Self.parse(signal) != nil else { return }
            token?.signalled()
        }
        token.attach(connection: connection, routeID: id)
        return token
    }

    private static func checkPrefix(_ prefix: NotificationName) throws {
        if !prefix.isPrefix {
            throw WormholeError(.invalidName, value: prefix.rawValue, "prefix \(quoted(prefix.rawValue)) must end with '/'")
        }
    }

    private static func sink(
        queue: DispatchQueue?, _ handler: @escaping @Sendable (DarwinNotification) -> Void
    ) -> @Sendable (ObserverCore, DarwinNotification) -> Void {
        guard let queue else {
            return { core, note in if !core.isCancelled { handler(note) } }
        }
        return { core, note in queue.async { if !core.isCancelled { handler(note) } } }
    }

    private func observe(
        target: NotificationName, isPrefix: Bool, options: ObserverOptions,
        sink: @escaping @Sendable (ObserverCore, DarwinNotification) -> Void
    ) throws -> NotificationObserver {
        let core = ObserverCore(target: target.rawValue, options: options, sink: sink)
        let rules = isPrefix ? [try NotifyContract.rule(observingPrefix: target)] : try NotifyContract.rules(observing: target)
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        observers.withLock { $0[id] = core }
        do {
            let routeID = try connection.addRoute(rules) { [weak self] signal in
                self?.received(signal, by: core, isPrefix: isPrefix)
            }
            core.routeID = routeID
        } catch {
            _ = observers.withLock { $0.removeValue(forKey: id) }
            throw error
        }
        return NotificationObserver(core: core) { [weak self] in
            guard let self else { return }
            _ = observers.withLock { $0.removeValue(forKey: id) }
            if let routeID = core.routeID { connection.removeRoute(routeID) }
        }
    }

    private func stream(target: NotificationName, isPrefix: Bool, options: ObserverOptions) async throws -> NotificationStream {
        let (stream, continuation) = AsyncStream<DarwinNotification>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, options.bufferLimit)))
        let core = ObserverCore(target: target.rawValue, options: options) { _, note in continuation.yield(note) }
        let rules = isPrefix ? [try NotifyContract.rule(observingPrefix: target)] : try NotifyContract.rules(observing: target)
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        observers.withLock { $0[id] = core }
        let routeID: UInt64
        do {
            routeID = try await connection.addRoute(
                rules, deliver: { [weak self] signal in self?.received(signal, by: core, isPrefix: isPrefix) },
                finish: { continuation.finish() })
        } catch {
            _ = observers.withLock { $0.removeValue(forKey: id) }
            throw error
        }
        continuation.onTermination = { [weak self] _ in
            core.cancel()
            guard let self else { return }
            _ = observers.withLock { $0.removeValue(forKey: id) }
            connection.removeRoute(routeID)
        }
        return NotificationStream(stream)
    }

    /// Reads a `Posted` signal: its name and state, or `nil` for anything malformed (no
    /// arguments, a first argument that is not a string, another path or interface).
    static func parse(_ signal: Signal) -> (name: String, state: UInt64?)? {
        guard signal.path == NotifyContract.path, signal.member == NotifyContract.posted,
            case .string(let name)? = signal.arguments.first
        else { return nil }
        let interface = signal.interface.rawValue
        guard interface == NotifyContract.plainInterface || interface == NotifyContract.bucketInterface(for: name)
        else { return nil }
        var state: UInt64?
        if signal.arguments.count > 1, case .uint64(let value) = signal.arguments[1] { state = value }
        return (name, state)
    }

    /// Runs on the I/O thread for every signal routed to an observer.
    private func received(_ signal: Signal, by core: ObserverCore, isPrefix: Bool) {
        guard let (name, state) = Self.parse(signal) else {
            logger.debug("dropped a malformed Posted signal: \(signal)")
            return
        }
        // `arg0path='a/b/'` also matches names that are prefixes of it (`a/`, `/`): they are
        // not in the family below it.
        if isPrefix && !name.hasPrefix(core.target) { return }
        if let state { lastStates.withLock { $0[name] = state } }
        let own = signal.sender.map { Self.isOwn(sender: $0, on: connection.address) } ?? false
        if own && core.options.ignoresOwnPosts { return }
        core.offer(DarwinNotification(name: name, state: state, kind: .posted, coalescedCount: 1, isOwnPost: own))
    }
}

/// The shared part of an observer: suspension, coalescing and cancellation.
final class ObserverCore: Sendable {
    private struct State {
        var suspended = false
        var pending: DarwinNotification?
        var cancelled = false
        var routeID: UInt64?
    }

    let target: String
    let options: ObserverOptions
    private let sink: @Sendable (ObserverCore, DarwinNotification) -> Void
    private let state = Mutex(State())

    init(target: String, options: ObserverOptions, sink: @escaping @Sendable (ObserverCore, DarwinNotification) -> Void) {
        self.target = target
        self.options = options
        self.sink = sink
    }

    var routeID: UInt64? {
        get { state.withLock { $0.routeID } }
        set { state.withLock { $0.routeID = newValue } }
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }
    var isSuspended: Bool { state.withLock { $0.suspended } }

    /// Delivers now, or keeps the latest while suspended.
    func offer(_ note: DarwinNotification) {
        let now = state.withLock { state -> DarwinNotification? in
            if state.cancelled { return nil }
            if state.suspended {
                var merged = note
                if let earlier = state.pending {
                    merged.coalescedCount = earlier.coalescedCount + note.coalescedCount
                    if note.kind == .posted && earlier.kind == .catchUp { merged.kind = .catchUp }
                }
                state.pending = merged
                return nil
            }
            return note
        }
        if let now { sink(self, now) }
    }

    func suspend() { state.withLock { $0.suspended = true } }

    func resume() {
        let pending = state.withLock { state -> DarwinNotification? in
            state.suspended = false
            defer { state.pending = nil }
            return state.cancelled ? nil : state.pending
        }
        if let pending { sink(self, pending) }
    }

    func cancel() { state.withLock { $0.cancelled = true } }
}

/// A registered observer (see ``DarwinNotificationCenter/addObserver(for:queue:options:handler:)``).
///
/// It stays active until ``cancel()``; dropping the value does not cancel it, so a
/// fire-and-forget observer keeps working, as a Darwin token does until `notify_cancel`.
public final class NotificationObserver: Sendable {
    private let core: ObserverCore
    private let onCancel: @Sendable () -> Void

    init(core: ObserverCore, onCancel: @escaping @Sendable () -> Void) {
        self.core = core
        self.onCancel = onCancel
    }

    /// Stops delivery (like `notify_cancel`); the handler is not called after this returns
    /// (a call already running on its queue finishes). The last observer of a name removes
    /// its rules from the bus.
    public func cancel() {
        if core.isCancelled { return }
        core.cancel()
        onCancel()
    }

    /// Holds deliveries (like `notify_suspend`): posts that arrive meanwhile are coalesced.
    public func suspend() { core.suspend() }

    /// Resumes deliveries (like `notify_resume`): if anything was posted while suspended, the
    /// handler is called once with the latest notification and its ``DarwinNotification/coalescedCount``.
    public func resume() { core.resume() }

    /// Whether the observer is suspended.
    public var isSuspended: Bool { core.isSuspended }
}

/// Notifications as an `AsyncSequence` (see ``DarwinNotificationCenter/notifications(named:options:)``);
/// the observer goes when the iteration ends.
public typealias NotificationStream = SubscriptionStream<DarwinNotification>

/// A check token (see ``DarwinNotificationCenter/makeCheckToken(for:)``).
///
/// ``check()`` compares the name's generation in the shared table, which Wormhole posters
/// bump before they signal, and a local counter that the token's own bus rules bump when a
/// signal arrives (posts made with `dbus-send` do not touch the table). False positives
/// happen (the first check, names sharing a table slot); false negatives never.
public final class NotificationCheckToken: Sendable {
    private struct State {
        var first = true
        var lastShared: UInt64 = 0
        var lastLocal: UInt64 = 0
        var connection: BusConnection?
        var routeID: UInt64?
    }

    private let table: SharedStateTable?
    private let slot: SharedStateTable.Slot?
    private let local = Atomic<UInt64>(0)
    private let state = Mutex(State())

    init(table: SharedStateTable?, slot: SharedStateTable.Slot?) {
        self.table = table
        self.slot = slot
    }

    deinit { cancel() }

    func attach(connection: BusConnection, routeID: UInt64) {
        state.withLock {
            $0.connection = connection
            $0.routeID = routeID
        }
    }

    func signalled() { local.wrappingAdd(1, ordering: .releasing) }

    /// Whether the name was posted since the last call (like `notify_check`). Memory loads
    /// only: no system call, no bus traffic.
    public func check() -> Bool {
        let shared = slot.flatMap { slot in table?.generation(slot) } ?? 0
        let localNow = local.load(ordering: .acquiring)
        return state.withLock { state in
            let changed = state.first || shared != state.lastShared || localNow != state.lastLocal
            state.first = false
            state.lastShared = shared
            state.lastLocal = localNow
            return changed
        }
    }

    /// Removes the token's bus rules. Called when the token is released, too.
    public func cancel() {
        let (connection, routeID) = state.withLock { state in
            defer {
                state.connection = nil
                state.routeID = nil
            }
            return (state.connection, state.routeID)
        }
        if let connection, let routeID { connection.removeRoute(routeID) }
    }
}

import Dispatch
public import Logging
import Synchronization
public import WormholeDBus
import WormholeSystem

/// Darwin's notify center (`notify_post(3)`, `CFNotificationCenterGetDarwinNotifyCenter`)
/// on a D-Bus bus: any process posts a name, every process that observes it wakes at once.
/// Notifications carry a name and an optional 64-bit state, no payload.
///
/// ```swift
/// let center = try DarwinNotificationCenter()          // the session bus
/// let name: NotificationName = "com.example.app.refresh"
/// let observer = try center.listen(name: name) { note in
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
/// Observers, check tokens and streams follow one lifetime rule (`SubscriptionHandle`):
/// active until cancelled or released. The center reconnects by itself when the bus daemon
/// restarts, re-adds every observer's rules, and then calls each observer once with a
/// ``DarwinNotification/Reason/catchUp``.
public final class DarwinNotificationCenter: Sendable {
    /// The connection the center posts and observes on (for tests and the layers of this package).
    package let connection: BusConnection
    /// Whether this center's posts ring Wormhole observers of this user and its observers are
    /// rung (``PeerWake``), beside the bus signal.
    package let wake: PeerWake
    /// The bus's doorbell hash (`DoorbellHash.busKey(of:)`).
    let busKey: UInt64
    let table: SharedStateTable?
    let logger: Logger
    private let observers = Locked<[UInt64: ObserverCore]>([:])
    private let lastStates = Locked<[String: UInt64]>([:])
    private let nextID = Atomic<UInt64>(1)
    private let eventSubscription = Locked<EventSubscription?>(nil)
    /// The process's second connection to the bus, for transient messages, made on first use
    /// (``transientSender()``).
    private let transientConnection = Locked<BusConnection?>(nil)
    /// The transient connection is being made off the loop.
    private let openingTransient = Atomic<Bool>(false)
    /// ``close()`` was called: no transient connection is made after it.
    private let closed = Atomic<Bool>(false)

    /// Connects to the bus at `busAddress` (the session bus when `nil`).
    ///
    /// - Parameters:
    ///   - busAddress: the bus; `nil` reads `DBUS_SESSION_BUS_ADDRESS`.
    ///   - sharedStateDirectory: where the shared generation table for check tokens lives;
    ///     `nil` uses `$XDG_RUNTIME_DIR/wormhole`, or `/tmp/wormhole-<uid>` without it. When
    ///     the table cannot be opened the center still works; check tokens then rely on
    ///     signals alone, and a warning is logged.
    ///   - wake: ``PeerWake/doorbell`` (the default): posts also ring this user's Wormhole
    ///     observers directly and observers are rung, faster than the bus; ``PeerWake/busOnly``:
    ///     the bus signal alone. Foreign observers see the same signal either way.
    ///   - logger: where the center and its connection log (swift-log).
    /// - Throws: `BusError` naming the address when the bus cannot be reached.
    public init(
        busAddress: BusAddress? = nil, sharedStateDirectory: String? = nil, wake: PeerWake = .doorbell,
        logger: Logger = Logger(label: "wormhole.notify")
    ) throws {
        let address = try busAddress ?? BusAddress.session()
        self.logger = logger
        self.wake = wake
        busKey = DoorbellHash.busKey(of: address)
        // The process's one connection to this bus, shared with every other facade; this
        // center's handle scopes its observers, so `close()` ends them and nobody else's.
        connection = try BusConnection.shared(address: address, in: WormholeRuntime.shared.connections, logger: logger)
        do {
            table = try SharedStateTable(directory: sharedStateDirectory ?? SharedStateTable.defaultDirectory())
        } catch {
            logger.warning("shared notification table unavailable; check tokens use signals only: \(error)")
            table = nil
        }
        let connection = self.connection
        WormholeRuntime.shared.ownConnections.insert(connection, for: ObjectIdentifier(self))
        // On the I/O thread: each observer's catch-up then takes the same path as its posts.
        let subscription = connection.onEvent(on: .ioThread) { [weak self] event in
            self?.connectionChanged(event)
        }
        eventSubscription.withLock { $0 = subscription }
    }

    deinit {
        leaveDoorbell()
        eventSubscription.withLock { $0?.cancel() }
        let key = ObjectIdentifier(self)
        WormholeRuntime.shared.ownConnections.remove(key)
        closeTransientConnection()
        connection.close()
    }

    /// The connection transient messages travel on: the process's second connection to the bus
    /// (shared like the first), made on first use. A transient receiver that stops reading holds
    /// up only this one (contract section 7).
    ///
    /// Connecting waits for the process's loop; on the loop's own thread (a transient message
    /// sent from an `.ioThread` handler, such as a reply) that wait could never end, so the first
    /// such send goes on the first connection and the second is made off the loop for the next.
    func transientSender() throws -> BusConnection {
        // The lock is never held while connecting: the loop's thread may take it.
        if let held = transientConnection.withLock({ $0 }) { return held }
        // Closed: the first connection (closed too) says so when used.
        if closed.load(ordering: .acquiring) { return connection }
        if connection.isOnIOThread {
            openTransientConnectionOffTheLoop()
            return connection
        }
        let made = try BusConnection.shared(
            address: connection.address, purpose: .transient, in: WormholeRuntime.shared.connections, logger: logger)
        let (kept, extra) = transientConnection.withLock { held -> (BusConnection, BusConnection?) in
            if let held { return (held, made) }
            // Closed meanwhile: not kept (the closed first connection answers the send).
            if closed.load(ordering: .acquiring) { return (connection, made) }
            held = made
            return (made, nil)
        }
        if let extra {
            extra.close()  // another thread made one meanwhile: one handle of the same connection
        } else {
            WormholeRuntime.shared.ownConnections.insert(made, for: ObjectIdentifier(made))
        }
        return kept
    }

    /// Makes the transient connection on a thread of its own (once at a time).
    private func openTransientConnectionOffTheLoop() {
        if openingTransient.exchange(true, ordering: .acquiringAndReleasing) { return }
        DispatchQueue.global().async { [weak self] in
            guard let self else { return }
            do {
                _ = try transientSender()
            } catch {
                logger.info("cannot open the transient connection yet: \(error)")
            }
            openingTransient.store(false, ordering: .releasing)
        }
    }

    /// How many transient messages this center's process refused because the transient
    /// connection's outgoing queue was full.
    var refusedTransientMessages: UInt64 { transientConnection.withLock { $0?.refusedSignals ?? 0 } }

    private func closeTransientConnection() {
        guard
            let held = transientConnection.withLock({ value in
                defer { value = nil }
                return value
            })
        else { return }
        WormholeRuntime.shared.ownConnections.remove(ObjectIdentifier(held))
        held.close()
    }

    private func connectionChanged(_ event: BusConnectionEvent) {
        switch event {
        case .disconnected:
            logger.warning("bus connection lost; observers will catch up when it returns")
        case .reconnected:
            let cores = observers.withLock { Array($0.values) }
            for core in cores {
                // A new connection: the signals of rings delivered before will never come on it.
                core.resetOrder()
                core.offer(DarwinNotification(name: core.target, state: nil, reason: .catchUp))
            }
        }
    }

    /// Closes this center: its observers stop, its streams finish and its check tokens stop
    /// seeing posts. The process's connection to the bus, which every facade shares, closes with
    /// the last facade that uses it.
    public func close() {
        closed.store(true, ordering: .releasing)
        leaveDoorbell()
        closeTransientConnection()
        connection.close()
    }

    /// Blocks until every post made before the call is on the bus, at most `timeout` (the one
    /// `flush` shape of every facade: ``MessageCenter/flush(timeout:)``,
    /// ``GroupDefaults/flush(timeout:)``, ``Journal/flush(timeout:)``).
    ///
    /// Not needed before exiting: a post the call accepted is on the bus before the process
    /// exits normally (returning from `main`, `exit()`, the last reference going away). Call it
    /// when another process must not act before the post is on the bus, or to learn whether it
    /// got there. On the bus means written and followed by one call the bus answered, so a
    /// proxy on the way (`xdg-dbus-proxy`) passed it on.
    /// - Returns: `nil` when every post is on the bus; else why not (a `BusError`:
    ///   `timedOut`, or `disconnected` when the bus went away and posts were dropped).
    @discardableResult
    public func flush(timeout: Duration = DarwinNotificationCenter.defaultFlushTimeout) -> (any Error)? {
        let start = ContinuousClock.now
        if let error = connection.flush(timeout: timeout) { return error }
        guard let transient = transientConnection.withLock({ $0 }) else { return nil }
        return transient.flush(timeout: max(.zero, timeout - (ContinuousClock.now - start)))
    }

    /// How long `flush(timeout:)` waits by default, on every facade: 5 seconds.
    public static let defaultFlushTimeout: Duration = BusConnection.defaultFlushTimeout

    // MARK: Posting

    /// Posts `name` (like `notify_post`), with an optional new state (like `notify_set_state`
    /// followed by `notify_post`).
    ///
    /// The shared table's generation for the name is bumped before the signal is sent, so a
    /// check token can never miss the post. A post without `state` carries the name's last
    /// posted state (0 if none): the state belongs to the name, not to the post.
    ///
    /// - Throws: `BusError` with `BusError/Code/disconnected` while the bus is away.
    public func post(_ name: NotificationName, state: UInt64? = nil) throws {
        HopTrace.mark(.postEntered)
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
        var signal = Signal(
            path: NotifyContract.path, interface: NotifyContract.bucket(for: name.rawValue),
            member: NotifyContract.posted,
            arguments: [.string(name.rawValue), .uint64(carried ?? 0)])
        try claimSenderName(on: connection)
        // Queued behind a full socket, a newer post of the name replaces an older one: the
        // state travels with the latest (contract section 7). The name is the key: only posts
        // are sent with this policy, and a name's bucket interface follows from the name.
        guard let doorbell = WormholeRuntime.shared.doorbell else {
            HopTrace.mark(.emitEntered)
            try connection.emit(signal, policy: .replacing(key: name.rawValue))
            return HopTrace.mark(.signalWritten)
        }
        // With a doorbell every post is numbered (contract §9), and rings only once its
        // connection accepted the signal: a post that throws rang nobody. A signal accepted by
        // a connection that was replaced meanwhile carries another sender: it rings nobody.
        let identity = connection.identity
        let sender = identity.uniqueName
        let (serial, previous) = try doorbell.numbered(
            name: name.rawValue, busKey: busKey, sender: sender, session: identity.session
        ) { serial in
            signal.serial = serial
            HopTrace.mark(.emitEntered)
            try connection.emit(signal, policy: .replacing(key: name.rawValue))
        }
        HopTrace.mark(.signalWritten)
        guard wake == .doorbell, !sender.isEmpty, connection.identity == identity else { return }
        doorbell.ring(
            name: name.rawValue, state: carried ?? 0, busKey: busKey, sender: sender, serial: serial, previous: previous
        )
    }

    /// Inside a sandbox (the process has an app ID, `AppIdentity`): makes sure the connection
    /// owns `<APPID>.Wormhole.c<unique>` before a signal goes out (contract §8), so that
    /// `xdg-dbus-proxy` passes it to the app's processes. Asks the bus once per connection; a
    /// process without an app ID posts anonymously and pays nothing. Every sending path (posts,
    /// mailbox sends and clears, transient messages, journal appends, defaults writes) comes here.
    ///
    /// - Throws: ``WormholeError/Code/invalidAppID``; `BusError` with
    ///   `BusError/Code/nameRefused` when the bus or the proxy refused the name.
    func claimSenderName(on connection: BusConnection) throws {
        guard let identity = try AppIdentity.current() else { return }
        _ = try connection.claimAppName(appID: identity.appID)
    }

    // MARK: State

    /// The last state this center has seen for `name`: posted by it, or carried by a
    /// notification it received for an observed name. `nil` if none.
    ///
    /// Unlike `notify_get_state`, which asks a daemon, this answers from memory; for the
    /// machine-wide last posted state use ``sharedState(of:)``.
    package func lastState(of name: NotificationName) -> UInt64? {
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

    /// Calls `handler` for every post of `name` (like `notify_register_dispatch`) until the
    /// observer is cancelled or released. Active when this returns: a post made afterwards is
    /// delivered.
    ///
    /// - Parameters:
    ///   - name: the name to observe.
    ///   - delivery: where `handler` runs (`DeliveryQueue`). Every call of one observer's
    ///     handler, catch-ups and resumed deliveries included, goes through it, and two calls
    ///     never overlap.
    ///   - options: ``ObserverOptions`` (own posts, buffering).
    ///   - handler: called with each ``DarwinNotification``.
    public func listen(
        name: NotificationName, on delivery: DeliveryQueue = .serial, options: ObserverOptions = ObserverOptions(),
        handler: @escaping @Sendable (DarwinNotification) -> Void
    ) throws -> Subscription {
        let core = ObserverCore(
            target: name, isPrefix: false, options: options,
            executor: delivery.makeExecutor(label: "wormhole.observer"), handler: handler)
        return try register(core)
    }

    /// Calls `handler` for every post of any name below `prefix`, which must end in `/` (an
    /// `arg0path` rule on the bus), until the observer is cancelled or released.
    public func listen(
        prefix: NotificationName, on delivery: DeliveryQueue = .serial,
        options: ObserverOptions = ObserverOptions(), handler: @escaping @Sendable (DarwinNotification) -> Void
    ) throws -> Subscription {
        try Self.checkPrefix(prefix)
        let core = ObserverCore(
            target: prefix, isPrefix: true, options: options,
            executor: delivery.makeExecutor(label: "wormhole.observer"), handler: handler)
        return try register(core)
    }

    /// The posts of `name` as an `AsyncSequence`. The observer is active when this returns
    /// and goes away when the iteration ends, its task is cancelled, or the stream is released.
    public func notifications(
        name: NotificationName, options: ObserverOptions = ObserverOptions()
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

    /// An observer whose route is added without blocking the calling task (for streams).
    /// `finish` runs when the connection closes for good.
    package func addObserver(
        _ target: NotificationName, isPrefix: Bool, on delivery: DeliveryQueue,
        options: ObserverOptions = ObserverOptions(),
        handler: @escaping @Sendable (DarwinNotification) -> Void, finish: @escaping @Sendable () -> Void
    ) async throws -> Subscription {
        if isPrefix { try Self.checkPrefix(target) }
        let core = ObserverCore(
            target: target, isPrefix: isPrefix, options: options,
            executor: delivery.makeExecutor(label: "wormhole.observer"), handler: handler)
        let rules = try Self.rules(for: core)
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        observers.withLock { $0[id] = core }
        do {
            core.routeID = try await connection.addRoute(
                rules, strictArgumentPaths: true,
                deliver: { [weak self] signal in self?.received(signal, by: core) }, finish: finish)
        } catch {
            _ = observers.withLock { $0.removeValue(forKey: id) }
            throw error
        }
        enroll(core)
        return observer(for: core, id: id)
    }

    /// Registers one observer per name, all at once: every match rule is sent to the bus before
    /// any answer is awaited, so 10,000 names cost about one round trip, not 10,000. Returns the
    /// observers in the order of `requests`, each active. If any fails, none is kept (those that
    /// succeeded are removed) and the first failure is thrown; it names the rule the bus refused.
    package func addObservers(
        _ requests: [(name: NotificationName, handler: @Sendable (DarwinNotification) -> Void)],
        on delivery: DeliveryQueue, options: ObserverOptions = ObserverOptions()
    ) throws -> [Subscription] {
        var cores: [(id: UInt64, core: ObserverCore)] = []
        var routes: [BusConnection.RouteRequest] = []
        for request in requests {
            let core = ObserverCore(
                target: request.name, isPrefix: false, options: options,
                executor: delivery.makeExecutor(label: "wormhole.observer"), handler: request.handler)
            let rules = try Self.rules(for: core)
            cores.append((nextID.wrappingAdd(1, ordering: .relaxed).oldValue, core))
            routes.append(
                BusConnection.RouteRequest(rules: rules, strictArgumentPaths: true) { [weak self] signal in
                    self?.received(signal, by: core)
                })
        }
        observers.withLock { table in for (id, core) in cores { table[id] = core } }
        let results = connection.addRoutes(routes)
        var failure: (any Error)?
        for (entry, result) in zip(cores, results) {
            switch result {
            case .success(let routeID): entry.core.routeID = routeID
            case .failure(let error): if failure == nil { failure = error }
            }
        }
        if let failure {
            observers.withLock { table in for (id, _) in cores { table.removeValue(forKey: id) } }
            for case .success(let routeID) in results { connection.removeRoute(routeID) }
            throw failure
        }
        for entry in cores { enroll(entry.core) }
        return cores.map { observer(for: $0.core, id: $0.id) }
    }

    /// A check token for `name` (like `notify_register_check`): ``NotificationCheckToken/check()``
    /// says whether the name was posted since the last check, with no system call and no bus
    /// traffic. The first check answers `true`, as on Darwin.
    public func makeCheckToken(for name: NotificationName) throws -> NotificationCheckToken {
        let token = NotificationCheckToken(table: table, slot: table?.slot(for: name.rawValue))
        let id = try connection.addRoute(try NotifyContract.rules(observing: name)) { [weak token] signal in
            // The rules matched interface, member and name; only the path is not in them.
            guard signal.path == NotifyContract.path else { return }
            token?.signalled()
        }
        token.attach(connection: connection, routeID: id)
        return token
    }

    private static func checkPrefix(_ prefix: NotificationName) throws {
        if !prefix.isPrefix {
            throw WormholeError(
                .invalidName, value: prefix.rawValue, "prefix \(quoted(prefix.rawValue)) must end with '/'")
        }
    }

    private static func rules(for core: ObserverCore) throws -> [MatchRule] {
        core.isPrefix
            ? [try NotifyContract.rule(observingPrefix: core.target)] : try NotifyContract.rules(observing: core.target)
    }

    /// Adds `core`'s route, blocking until the bus accepted its rules.
    private func register(_ core: ObserverCore) throws -> Subscription {
        let rules = try Self.rules(for: core)
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        observers.withLock { $0[id] = core }
        do {
            core.routeID = try connection.addRoute(rules, strictArgumentPaths: true) { [weak self] signal in
                self?.received(signal, by: core)
            }
        } catch {
            _ = observers.withLock { $0.removeValue(forKey: id) }
            throw error
        }
        enroll(core)
        return observer(for: core, id: id)
    }

    /// The handle: it keeps the center (and so the connection) alive, and on cancel or
    /// release removes the core and its route.
    private func observer(for core: ObserverCore, id: UInt64) -> Subscription {
        Subscription(core: core) { [self] in
            _ = observers.withLock { $0.removeValue(forKey: id) }
            Self.retire(core)
            if let routeID = core.routeID { connection.removeRoute(routeID) }
        }
    }

    // MARK: The doorbell

    /// Registers `core`, active on the bus now, to be rung (a center with ``PeerWake/doorbell``
    /// when the process has a doorbell, until it is closed). A core cancelled meanwhile is
    /// retired again at once.
    private func enroll(_ core: ObserverCore) {
        guard wake == .doorbell, let doorbell = WormholeRuntime.shared.doorbell, core.doorbell == nil,
            !closed.load(ordering: .acquiring)
        else { return }
        core.doorbell = doorbell.register(busKey: busKey, target: core.target.rawValue, isPrefix: core.isPrefix) {
            [weak self, weak core] ring in
            guard let self, let core else { return }
            self.rung(ring, by: core)
        }
        if core.isCancelled { Self.retire(core) }
    }

    private static func retire(_ core: ObserverCore) {
        if let registration = core.takeDoorbell() { WormholeRuntime.shared.doorbell?.unregister(registration) }
    }

    /// Every observer of this center stops being rung (closing: their routes end too).
    private func leaveDoorbell() {
        for core in observers.withLock({ Array($0.values) }) { Self.retire(core) }
    }

    /// Runs on the I/O thread for every ring of this process that `core`'s target may match
    /// (by its directory's hash): the same checks as the bus's rules, then the merge with the
    /// bus's signals (``PostOrder``), then the same delivery as a signal's. No ring is delivered
    /// while this center's connection is down: the catch-up after the reconnect stands for it.
    private func rung(_ ring: DoorbellRing, by core: ObserverCore) {
        guard ring.busKey == busKey, connection.isConnected else { return }
        let target = core.target.rawValue.utf8
        if core.isPrefix {
            guard ring.name.utf8.starts(with: target), NotificationName(received: ring.name) != nil else { return }
        } else {
            guard ring.name.utf8.elementsEqual(target) else { return }
        }
        let ordered = core.order(
            PostOrder.Ring(
                sender: ring.sender, name: ring.name, serial: ring.serial, previous: ring.previous, state: ring.state))
        deliver(rings: ordered, to: core)
    }

    /// Delivers rings that the merge let through, each as its signal would be; the connection then
    /// drops each one's signal in its filter, undecoded, when every route it reaches was rung for it.
    private func deliver(rings: [PostOrder.Ring], to core: ObserverCore) {
        for ring in rings {
            let name = core.isPrefix ? (NotificationName(received: ring.name) ?? core.target) : core.target
            deliver(name: name, rawName: ring.name, state: ring.state, sender: ring.sender, to: core)
            // After the delivery (its handler's own post goes first).
            guard let routeID = core.routeID else { continue }
            var probe = Signal(
                path: NotifyContract.path, interface: NotifyContract.bucket(for: ring.name),
                member: NotifyContract.posted, arguments: [.string(ring.name), .uint64(ring.state)])
            probe.sender = ring.sender
            let (sender, rawName, serial) = (ring.sender, ring.name, ring.serial)
            connection.expectDuplicate(of: probe, serial: serial, routeID: routeID) { [weak core] in
                core?.absorbed(sender: sender, name: rawName, serial: serial)
            }
        }
    }

    private func stream(target: NotificationName, isPrefix: Bool, options: ObserverOptions) async throws
        -> NotificationStream
    {
        let (stream, continuation) = AsyncStream<DarwinNotification>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, options.bufferLimit)))
        let observer = try await addObserver(
            target, isPrefix: isPrefix, on: .ioThread, options: options,
            handler: { continuation.yield($0) }, finish: { continuation.finish() })
        continuation.onTermination = { _ in observer.cancel() }
        return NotificationStream(stream)
    }

    /// Runs on the I/O thread for every signal routed to an observer: the route's rules already
    /// chose it (interface, member and name for a name; path, member and a name at or below the
    /// prefix for a prefix), so only what the rules do not say is checked here, once.
    private func received(_ signal: Signal, by core: ObserverCore) {
        guard case .string(let rawName)? = signal.arguments.first, signal.path == NotifyContract.path else {
            logger.debug("dropped a malformed Posted signal: \(signal)")
            return
        }
        let name: NotificationName
        if core.isPrefix {
            // A prefix rule says nothing about the interface: the plain one or the name's bucket.
            let interface = signal.interface
            guard interface == NotifyContract.plain || interface == NotifyContract.bucket(for: rawName),
                let received = NotificationName(received: rawName)
            else {
                logger.debug("dropped a malformed Posted signal: \(signal)")
                return
            }
            name = received
        } else {
            name = core.target
        }
        var state: UInt64?
        if signal.arguments.count > 1 {
            // Wormhole sends `t`; other senders may use any integer type (dbus-python sends a
            // Python int as `i`). A negative or non-integer state is no state, and says why.
            let argument = signal.arguments[1]
            state = argument.nonNegativeInteger
            if state == nil {
                logger.debug(
                    "Posted '\(rawName)' carried the state \(argument), not an integer of 0 or more: delivered without a state"
                )
            }
        }
        // A Wormhole sender with a doorbell numbers its posts: an observer that may be rung merges
        // them with its rings, each post once and in its order (``PostOrder``). It keeps the
        // signals that come before any ring too: their rings may follow.
        if wake == .doorbell, WormholeRuntime.shared.doorbell != nil, let sender = signal.sender,
            let serial = signal.serial,
            serial & DoorbellSocket.serialMark != 0
        {
            let (deliverSignal, then) = core.order(signalFrom: sender, name: rawName, serial: serial)
            if deliverSignal { deliver(name: name, rawName: rawName, state: state, sender: sender, to: core) }
            deliver(rings: then, to: core)
            return
        }
        deliver(name: name, rawName: rawName, state: state, sender: signal.sender, to: core)
    }

    /// The end of every delivery of a post, by the bus or the doorbell.
    private func deliver(
        name: NotificationName, rawName: String, state: UInt64?, sender: String?, to core: ObserverCore
    ) {
        if let state { lastStates.withLock { $0[rawName] = state } }
        let own =
            sender.map { WormholeRuntime.shared.ownConnections.contains(sender: $0, on: connection.address) } ?? false
        if own && core.options.ignoresOwnPosts { return }
        core.offer(DarwinNotification(name: name, state: state, reason: .posted, isOwnPost: own))
    }
}

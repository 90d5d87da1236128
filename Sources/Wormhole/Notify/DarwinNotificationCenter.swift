// SPDX-License-Identifier: Apache-2.0
public import Logging
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
    /// The runtime it belongs to (``WormholeRuntime/current`` when it was made).
    let runtime: WormholeRuntime
    /// Every post route of this center (its observers', listeners' and readers'), for the
    /// catch-up after a reconnect and for leaving the doorbell at close.
    let routes = PostRouteTable()
    private let lastStates = Locked<[String: UInt64]>([:])
    private let postTemplates = PostTemplates()
    private let reception: PostReception
    private let eventSubscription = Locked<EventSubscription?>(nil)
    /// The connection transient messages travel on, made on first use.
    let transient: TransientConnection

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
        let runtime = WormholeRuntime.current
        self.runtime = runtime
        self.logger = logger
        self.wake = wake
        busKey = DoorbellHash.busKey(of: address)
        // The process's one connection to this bus, shared with every other facade; this
        // center's handle scopes its observers, so `close()` ends them and nobody else's.
        connection = try BusConnection.shared(address: address, in: runtime.connections, logger: logger)
        do {
            table = try SharedStateTable(directory: sharedStateDirectory ?? SharedStateTable.defaultDirectory())
        } catch {
            logger.warning("shared notification table unavailable; check tokens use signals only: \(error)")
            table = nil
        }
        let connection = self.connection
        reception = PostReception(
            connection: connection, busKey: busKey, ringable: wake == .doorbell, logger: logger, lastStates: lastStates,
            closed: Locked(false), runtime: runtime)
        transient = TransientConnection(first: connection, runtime: runtime, logger: logger)
        runtime.ownConnections.insert(connection, for: ObjectIdentifier(self))
        // On the I/O thread: each observer's catch-up then takes the same path as its posts.
        let subscription = connection.onEvent(on: .ioThread) { [weak self] event in
            self?.connectionChanged(event)
        }
        eventSubscription.withLock { $0 = subscription }
    }

    deinit {
        leaveDoorbell()
        eventSubscription.withLock { $0?.cancel() }
        runtime.ownConnections.remove(ObjectIdentifier(self))
        transient.close()
        connection.close()
    }

    private func connectionChanged(_ event: BusConnectionEvent) {
        switch event {
        case .disconnected:
            logger.warning("bus connection lost; observers will catch up when it returns")
        case .reconnected:
            // A new connection: the signals of rings delivered before will never come on it.
            for route in routes.all { route.reconnected() }
        }
    }

    /// Closes this center: its observers stop, its streams finish and its check tokens stop
    /// seeing posts. The process's connection to the bus, which every facade shares, closes with
    /// the last facade that uses it.
    public func close() {
        reception.closed.withLock { $0 = true }
        leaveDoorbell()
        transient.close()
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
        guard let second = transient.current else { return nil }
        return second.flush(timeout: max(.zero, timeout - (ContinuousClock.now - start)))
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
        let template = try postTemplates.template(for: name)
        try claimSenderName(on: connection)
        // Queued behind a full socket, a newer post of the name replaces an older one: the
        // state travels with the latest (contract section 7). The name is the key: only posts
        // are sent with this policy, and a name's bucket interface follows from the name.
        guard let doorbell = runtime.doorbell else {
            HopTrace.mark(.emitEntered)
            try connection.emit(template, appending: carried ?? 0, policy: .replacing(key: name.rawValue))
            return HopTrace.mark(.signalWritten)
        }
        // With a doorbell every post is numbered (contract §9), and rings only once its
        // connection accepted the signal (it will be written, in order): a post that throws rang
        // nobody. The ring leaves before the signal is written, so the rung process is woken
        // before the bus daemon. A signal accepted by a connection that was replaced meanwhile
        // carries another sender: it rings nobody.
        let identity = connection.identity
        let sender = identity.uniqueName
        let rings = wake == .doorbell && !sender.isEmpty
        try doorbell.numbered(name: name.rawValue, busKey: busKey, sender: sender, session: identity.session) {
            serial, accepted in
            HopTrace.mark(.emitEntered)
            try connection.emit(
                template, appending: carried ?? 0, serial: serial, policy: .replacing(key: name.rawValue)
            ) {
                let previous = accepted()
                HopTrace.mark(.signalAccepted)
                guard rings, connection.identity == identity else { return }
                let rang = doorbell.ring(
                    name: name.rawValue, state: carried ?? 0, busKey: busKey, sender: sender, serial: serial,
                    previous: previous)
                if rang && Doorbell.yieldsAfterRinging { Syscall.yieldProcessor() }
            }
        }
        HopTrace.mark(.signalWritten)
        HopTrace.mark(.postReturned)
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
        try observe(name, isPrefix: false, on: delivery, options: options, handler: handler)
    }

    /// Calls `handler` for every post of any name below `prefix`, which must end in `/` (an
    /// `arg0path` rule on the bus), until the observer is cancelled or released.
    public func listen(
        prefix: NotificationName, on delivery: DeliveryQueue = .serial,
        options: ObserverOptions = ObserverOptions(), handler: @escaping @Sendable (DarwinNotification) -> Void
    ) throws -> Subscription {
        try observe(prefix, isPrefix: true, on: delivery, options: options, handler: handler)
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

    /// A notification observer: its reader (``ObserverCore``, on `delivery`) behind a route of
    /// its own.
    private func observe(
        _ target: NotificationName, isPrefix: Bool, on delivery: DeliveryQueue, options: ObserverOptions,
        handler: @escaping @Sendable (DarwinNotification) -> Void
    ) throws -> Subscription {
        let core = ObserverCore(executor: delivery.makeExecutor(label: "wormhole.observer"), handler: handler)
        let route = try addPostRoute(target, isPrefix: isPrefix, options: options) { core.offer($0) }
        // The handle keeps the center (and so the connection) alive.
        return Subscription(core: core) { [self] in removePostRoute(route) }
    }

    /// A route for the posts of `target` (a name, or a prefix ending in `/`), active when this
    /// returns: `sink` runs on the I/O thread for each post, and once after each reconnect.
    func addPostRoute(
        _ target: NotificationName, isPrefix: Bool, options: ObserverOptions = ObserverOptions(),
        sink: @escaping @Sendable (DarwinNotification) -> Void
    ) throws -> PostRoute {
        let route = try makeRoute(target, isPrefix: isPrefix, options: options, sink: sink)
        let rules = try route.rules
        do {
            route.routeID = try connection.addRoute(rules, strictArgumentPaths: true) { [weak route] signal in
                route?.received(signal)
            }
        } catch {
            forget(route)
            throw error
        }
        route.enroll()
        return route
    }

    /// The same without blocking the calling task (for streams); `finish` runs when the
    /// connection closes for good.
    func addPostRoute(
        _ target: NotificationName, isPrefix: Bool, options: ObserverOptions = ObserverOptions(),
        sink: @escaping @Sendable (DarwinNotification) -> Void, finish: @escaping @Sendable () -> Void
    ) async throws -> PostRoute {
        let route = try makeRoute(target, isPrefix: isPrefix, options: options, sink: sink)
        let rules = try route.rules
        do {
            route.routeID = try await connection.addRoute(
                rules, strictArgumentPaths: true, deliver: { [weak route] signal in route?.received(signal) },
                finish: finish)
        } catch {
            forget(route)
            throw error
        }
        route.enroll()
        return route
    }

    /// One route per name, all at once: every match rule is sent to the bus before any answer is
    /// awaited, so 10,000 names cost about one round trip, not 10,000. Returns the routes in the
    /// order of `requests`, each active. If any fails, none is kept (those that succeeded are
    /// removed) and the first failure is thrown; it names the rule the bus refused.
    func addPostRoutes(
        _ requests: [(name: NotificationName, options: ObserverOptions, sink: @Sendable (DarwinNotification) -> Void)]
    ) throws -> [PostRoute] {
        var made: [PostRoute] = []
        var requested: [BusConnection.RouteRequest] = []
        do {
            for request in requests {
                let route = try makeRoute(request.name, isPrefix: false, options: request.options, sink: request.sink)
                made.append(route)
                requested.append(
                    BusConnection.RouteRequest(rules: try route.rules, strictArgumentPaths: true) {
                        [weak route] signal in route?.received(signal)
                    })
            }
        } catch {
            for route in made { forget(route) }
            throw error
        }
        let results = connection.addRoutes(requested)
        var failure: (any Error)?
        for (route, result) in zip(made, results) {
            switch result {
            case .success(let routeID): route.routeID = routeID
            case .failure(let error): if failure == nil { failure = error }
            }
        }
        if let failure {
            for route in made { removePostRoute(route) }
            throw failure
        }
        for route in made { route.enroll() }
        return made
    }

    /// Removes a route: from the connection, the doorbell and this center. Twice does nothing.
    func removePostRoute(_ route: PostRoute) {
        forget(route)
        if let routeID = route.takeForRemoval() { connection.removeRoute(routeID) }
    }

    /// A route kept in this center's table (for its catch-ups and the doorbell at close).
    private func makeRoute(
        _ target: NotificationName, isPrefix: Bool, options: ObserverOptions,
        sink: @escaping @Sendable (DarwinNotification) -> Void
    ) throws -> PostRoute {
        if isPrefix { try Self.checkPrefix(target) }
        let route = PostRoute(target: target, isPrefix: isPrefix, options: options, reception: reception, sink: sink)
        routes.add(route)
        return route
    }

    private func forget(_ route: PostRoute) {
        routes.remove(route)
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

    static func checkPrefix(_ prefix: NotificationName) throws {
        if !prefix.isPrefix {
            throw WormholeError(
                .invalidName, value: prefix.rawValue, "prefix \(quoted(prefix.rawValue)) must end with '/'")
        }
    }

    /// Every route of this center stops being rung (closing: the routes end with its handle).
    private func leaveDoorbell() {
        for route in routes.all { route.leaveDoorbell() }
    }

    private func stream(target: NotificationName, isPrefix: Bool, options: ObserverOptions) async throws
        -> NotificationStream
    {
        let (stream, continuation) = AsyncStream<DarwinNotification>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, options.bufferLimit)))
        // The route yields on the I/O thread; the iterator is the reader.
        let route = try await addPostRoute(
            target, isPrefix: isPrefix, options: options, sink: { continuation.yield($0) },
            finish: { continuation.finish() })
        continuation.onTermination = { [self] _ in removePostRoute(route) }
        return NotificationStream(stream)
    }
}

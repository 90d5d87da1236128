// SPDX-License-Identifier: Apache-2.0
import Dispatch
public import Logging
import Synchronization
import WormholeSystem

/// A connection to a D-Bus bus, on the process's one event loop.
///
/// Each connection owns one libdbus connection, driven by the process's one event loop. Which
/// thread runs what, what each call may wait for and where handlers run is written once, in
/// <doc:Threading>. Receiving is either a ``SignalStream``
/// (an `AsyncSequence` that owns its match rule) or a handler that runs where a
/// ``DeliveryQueue`` says.
///
/// ```swift
/// let bus = try BusConnection(address: BusAddress("unix:path=/tmp/bus"))
/// let rule = MatchRule(interface: try InterfaceName("org.example.Chat"))
/// let stream = try await bus.signals(matching: rule)   // the bus has the rule now
/// try bus.emit(Signal(path: try ObjectPath("/"), interface: try InterfaceName("org.example.Chat"),
///                     member: try MemberName("Said"), arguments: [.string("hello")]))
/// for await signal in stream { print(signal.arguments) }
/// ```
///
/// Identical match rules added through one connection share one rule on the bus:
/// the connection counts references, sends `AddMatch` for the first and
/// `RemoveMatch` when the last one goes.
///
/// The connection closes when ``close()`` is called or when the last reference to it
/// goes away.
public final class BusConnection: Sendable {
    /// What a connection does when the bus daemon goes away.
    public enum ReconnectPolicy: Sendable, Hashable {
        /// Stay disconnected: streams finish and emitting throws ``BusError/Code/disconnected``.
        case never
        /// Reconnect to the same address as soon as the bus is back, re-add every match rule,
        /// and report ``BusConnectionEvent/reconnected``. Streams and handlers stay alive.
        case automatic
    }

    /// The address this connection talks to.
    public let address: BusAddress
    let io: BusIO
    /// For a handle of a shared connection (``shared(address:purpose:in:connectTimeout:logger:)``): the scope
    /// of what this handle adds (routes, rules, event handlers), ended by ``close()``; 0 for a
    /// private connection.
    let scope: UInt64
    /// For a handle of a shared connection: the entry it holds a reference to, and its table.
    let sharing: (entry: SharedConnections.Entry, table: SharedConnections)?
    /// Whether this handle was closed (a private connection: its `io` knows).
    private let handleClosed = Atomic<Bool>(false)

    /// What a shared connection carries (``shared(address:purpose:in:connectTimeout:logger:)``).
    package enum SharedPurpose: String, Sendable {
        /// Notifications and wake-ups: every facade's signals and subscriptions.
        case signals
        /// Transient messages, which a stopped receiver may hold up.
        case transient
    }

    /// How many bytes of signals a connection holds for a bus or receiver that is not reading
    /// before ``emit(_:)`` refuses: 8 MiB. Shared connections read `WORMHOLE_OUTGOING_LIMIT`
    /// (bytes) from the environment instead when it is set.
    public static let defaultOutgoingLimit = 8 * 1024 * 1024

    /// How long a refusable send (a transient message) waits for room by default: 1 second.
    package static let defaultRefusalWait: Duration = .seconds(1)

    /// How long connecting may take by default: authentication and the `Hello` call, 5 seconds.
    public static let defaultConnectTimeout: Duration = .seconds(5)

    /// Connects to the bus at `address` and registers with it (the `Hello` call).
    ///
    /// Blocks until the bus answered `Hello`, at most `connectTimeout`: a bus that accepts the
    /// connection and never answers (a stopped daemon, a socket nobody serves) is an error,
    /// never a hang. With ``ReconnectPolicy/automatic`` every later attempt has the same deadline.
    ///
    /// - Parameters:
    ///   - address: the bus.
    ///   - reconnect: what to do when the bus daemon goes away.
    ///   - connectTimeout: how long authentication and `Hello` may take
    ///     (``defaultConnectTimeout``, 5 s).
    ///   - logger: where the connection logs disconnections, reconnections and dropped signals.
    ///   - outgoingLimit: how many bytes of signals may wait for a bus or receiver that is not
    ///     reading (``defaultOutgoingLimit``); past it ``emit(_:)`` refuses (see <doc:Threading>).
    /// - Throws: ``BusError/Code/connectionFailed`` naming the address when the bus cannot be
    ///   reached, refuses the connection, or does not answer in time. The corresponding C
    ///   function is `dbus_connection_open_private`; `Hello` is sent without blocking, in
    ///   place of `dbus_bus_register`, which waits without a deadline.
    public init(
        address: BusAddress, reconnect: ReconnectPolicy = .never, connectTimeout: Duration = defaultConnectTimeout,
        logger: Logger = Logger(label: "wormhole.dbus"), outgoingLimit: Int = defaultOutgoingLimit
    ) throws {
        self.address = address
        self.io = try BusIO(
            address: address, automaticReconnect: reconnect == .automatic, connectTimeout: connectTimeout,
            outgoingLimit: outgoingLimit, logger: logger)
        scope = 0
        sharing = nil
    }

    /// A handle of the process's one connection to the bus at `address`.
    private init(address: BusAddress, sharing entry: SharedConnections.Entry, in table: SharedConnections) {
        self.address = address
        self.io = entry.io
        self.sharing = (entry, table)
        scope = entry.io.makeID()
    }

    /// The process's connection to the bus at `address`, shared by every caller: the first call
    /// connects (as ``init(address:reconnect:connectTimeout:logger:outgoingLimit:)`` with
    /// ``ReconnectPolicy/automatic``), later calls for the same bus get a new handle of the same
    /// connection, one unique name, one socket. The bus is recognised whatever the address's
    /// spelling: `guid=`, the order of its keys (see ``BusAddress/sharingKey``).
    ///
    /// Each handle is a scope: ``close()`` (or releasing the handle) ends the routes, streams,
    /// rules and event handlers added through it, and the connection closes with its last handle.
    /// The first caller's `logger` and `connectTimeout` serve the connection.
    ///
    /// `purpose` picks one of the process's connections to that bus: ``SharedPurpose/transient``
    /// is a second one, made on first use, for transient messages (contract section 7: the bus
    /// daemon charges a message to its sender's connection until every recipient read it, so a
    /// stopped transient receiver must not hold up the other signals).
    package static func shared(
        address: BusAddress, purpose: SharedPurpose = .signals, in table: SharedConnections,
        connectTimeout: Duration = defaultConnectTimeout, logger: Logger = Logger(label: "wormhole.dbus")
    ) throws -> BusConnection {
        let entry = try table.acquire(
            address: address, purpose: purpose, connectTimeout: connectTimeout, logger: logger)
        return BusConnection(address: address, sharing: entry, in: table)
    }

    /// Connects to the session bus named by `DBUS_SESSION_BUS_ADDRESS`.
    public convenience init(sessionBus reconnect: ReconnectPolicy = .never) throws {
        try self.init(address: BusAddress.session(), reconnect: reconnect)
    }

    deinit { close() }

    /// The connection's unique bus name (`:1.42`); it changes after a reconnect.
    public var uniqueName: String { io.uniqueName }

    /// The unique name, and a number that changes with every connection made (a restarted daemon
    /// may give a unique name it gave before).
    package var identity: (uniqueName: String, session: UInt64) { io.identity }

    /// Whether the connection is up.
    public var isConnected: Bool { !handleClosed.load(ordering: .relaxed) && io.isConnected }

    /// How many signals from other connections this connection has received (after the
    /// daemon's filtering by match rules), whether or not any subscription wanted them.
    /// The bus daemon's own `org.freedesktop.DBus` signals are not counted. For tests.
    package var signalsReceived: UInt64 { io.routes.signalsReceived.load(ordering: .relaxed) }
    /// Signals dropped before decoding because every route they reached had them already (the
    /// doorbell's duplicates; ``expectDuplicate(of:serial:routeID:absorbed:)``).
    package var duplicatesAbsorbed: UInt64 { io.routes.duplicatesAbsorbed.load(ordering: .relaxed) }

    /// Closes the connection. Streams finish, handlers stop, later calls throw
    /// ``BusError/Code/disconnected``. Signals emitted before are confirmed by the bus first
    /// (at most 2 seconds, without the caller waiting).
    ///
    /// For a handle of a shared connection, only what this handle added ends; the connection
    /// closes with its last handle.
    public func close() {
        if handleClosed.exchange(true, ordering: .acquiringAndReleasing) { return }
        guard let sharing else { return io.stop() }
        io.closeScope(scope)
        sharing.table.release(sharing.entry)
    }

    /// Throws ``BusError/Code/disconnected`` when this handle was closed.
    func checkOpen() throws(BusError) {
        if handleClosed.load(ordering: .relaxed) { throw io.closedError() }
    }

    // MARK: Flushing (emitting: BusConnection+Emitting.swift)

    /// How long ``flush(timeout:)`` waits by default: 5 seconds.
    public static let defaultFlushTimeout: Duration = .seconds(5)

    /// Blocks until every signal emitted before this call is on the bus, at most `timeout`.
    ///
    /// On the bus means written to the socket and followed by one call the bus answered
    /// (`GetNameOwner` of the connection's own name), so a proxy on the way (`xdg-dbus-proxy`)
    /// has passed them on too. Returns at once when every signal emitted is confirmed already.
    /// A program does not need to call it before exiting: returning from `main`, `exit()` and
    /// the last reference going away confirm what was emitted (at most a few seconds; see
    /// <doc:Threading>). Call it when another process must not act before the signals are on
    /// the bus, or to learn whether they got there.
    ///
    /// - Returns: `nil` when they are on the bus; otherwise a ``BusError`` with
    ///   ``BusError/Code/timedOut`` (the bus did not answer in time) or
    ///   ``BusError/Code/disconnected`` (the bus went away and signals were dropped, which was
    ///   also logged). On the connection's I/O thread the wait happens on that thread.
    @discardableResult
    public func flush(timeout: Duration = defaultFlushTimeout) -> BusError? {
        io.confirmations.confirm(timeout: timeout)
    }

    /// ``flush(timeout:)`` without a waiting thread: `completion` runs on the I/O thread once the
    /// signals emitted so far are on the bus (`nil`) or the confirmation failed. Returns false,
    /// without calling `completion`, when the connection is closed.
    package func flush(
        timeout: Duration = defaultFlushTimeout, then completion: @escaping @Sendable (BusError?) -> Void
    ) -> Bool {
        io.confirmations.confirmLater(timeout: timeout, completion: completion)
    }

    /// Runs `job` on the connection's I/O thread, after the signals emitted before; false, and
    /// `job` never runs, when the connection is closed.
    package func execute(_ job: @escaping @Sendable () -> Void) -> Bool { io.execute(job) }

    // MARK: Match rules

    /// Adds a match rule and returns once the bus daemon has accepted it, so a signal
    /// emitted afterwards is delivered to this connection. Rules are reference counted.
    public func addMatch(_ rule: MatchRule) async throws {
        try rule.validate()
        try checkOpen()
        try await io.rules.onLoop { [scope] rules, done in rules.acquireRule(rule, scope: scope, completion: done) }
    }

    /// Drops one reference to a match rule added with ``addMatch(_:)``; the bus daemon
    /// forgets it when the last reference goes. Returns once the daemon has answered.
    public func removeMatch(_ rule: MatchRule) async throws {
        try await io.rules.onLoop { [scope] rules, done in rules.releaseRule(rule, scope: scope, completion: done) }
    }

    // MARK: Receiving

    /// Subscribes to the signals that match `rule` and returns them as a stream.
    ///
    /// The rule is active on the bus when this call returns. It is removed when the
    /// iteration ends, when the iterating task is cancelled, or when the stream is
    /// dropped unused. The stream buffers at most `bufferLimit` signals that were not yet
    /// consumed; past that, the **oldest** buffered signal is dropped to make room (a slow
    /// consumer sees the newest signals, never a stalled I/O thread).
    /// With ``ReconnectPolicy/never`` the stream finishes when the bus goes away.
    public func signals(matching rule: MatchRule, bufferLimit: Int = 1024) async throws -> SignalStream {
        let (stream, continuation) = AsyncStream<Signal>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, bufferLimit)))
        let id = try await addRoute([rule], deliver: { continuation.yield($0) }, finish: { continuation.finish() })
        continuation.onTermination = { [io] _ in io.routes.remove(id: id) }
        return SignalStream(stream)
    }

    /// Calls `handler` for every signal that matches `rule`, where `delivery` says, until the
    /// returned subscription is cancelled or released (see ``SubscriptionHandle``).
    ///
    /// Blocks until the bus daemon has accepted the rule, so a signal emitted after this
    /// returns is delivered. Signals reach the handler in the order the bus delivered them.
    /// Do not call it from a handler running on the connection's I/O thread.
    public func subscribe(
        _ rule: MatchRule, on delivery: DeliveryQueue = .serial, handler: @escaping @Sendable (Signal) -> Void
    ) throws -> SignalSubscription {
        let cancelled = BusSubscription.Flag()
        let executor = delivery.makeExecutor(label: "wormhole.dbus.subscription")
        let id = try addRoute([rule]) { signal in
            executor.run { if !cancelled.isSet { handler(signal) } }
        }
        return BusSubscription(cancelled: cancelled) { [io] in io.routes.remove(id: id) }
    }

    /// Calls `handler` when the connection is lost or restored, where `delivery` says, until
    /// the returned subscription is cancelled or released. Handlers are called in the order
    /// they were added, so with ``DeliveryQueue/ioThread`` a handler added after a
    /// `DarwinNotificationCenter`'s (made on this connection) runs once the center's observers
    /// on the I/O thread have had their catch-up.
    public func onEvent(
        on delivery: DeliveryQueue = .serial, handler: @escaping @Sendable (BusConnectionEvent) -> Void
    ) -> EventSubscription {
        let cancelled = BusSubscription.Flag()
        let executor = delivery.makeExecutor(label: "wormhole.dbus.events")
        let id = io.events.add(scope: scope) { event in
            executor.run { if !cancelled.isSet { handler(event) } }
        }
        return BusSubscription(cancelled: cancelled) { [io] in io.events.remove(id) }
    }

    /// The connection's events as a stream: ``BusConnectionEvent/disconnected`` and
    /// ``BusConnectionEvent/reconnected``. The stream ends when the connection closes.
    public func events() -> AsyncStream<BusConnectionEvent> {
        let (stream, continuation) = AsyncStream<BusConnectionEvent>.makeStream()
        let id = io.events.add(scope: scope) { continuation.yield($0) }
        continuation.onTermination = { [io] _ in io.events.remove(id) }
        return stream
    }

    // MARK: For the layers above

    /// Routes signals matching any of `rules` to `deliver`, which runs on the I/O thread and
    /// must return quickly. Returns once the bus has acknowledged every rule. Blocking.
    ///
    /// With `strictArgumentPaths`, an `argNpath='P/'` rule routes only values equal to `P/` or
    /// below it; the bus daemon also sends values that are prefixes of `P/` (`/`, parents),
    /// which such a route never sees. This is where that decision is made, once.
    package func addRoute(
        _ rules: [MatchRule], strictArgumentPaths: Bool = false, deliver: @escaping @Sendable (Signal) -> Void,
        finish: @escaping @Sendable () -> Void = {}
    ) throws -> UInt64 {
        let route = try BusRoutes.Route.checked(rules, strictArgumentPaths, deliver, finish, scope: scope)
        try checkOpen()
        return try io.routes.addWaiting(route)
    }

    /// Routes signals matching any of `rules` to `deliver` (on the I/O thread); returns once
    /// the bus has acknowledged every rule. `strictArgumentPaths` as for the blocking form.
    package func addRoute(
        _ rules: [MatchRule], strictArgumentPaths: Bool = false, deliver: @escaping @Sendable (Signal) -> Void,
        finish: @escaping @Sendable () -> Void = {}
    ) async throws -> UInt64 {
        let route = try BusRoutes.Route.checked(rules, strictArgumentPaths, deliver, finish, scope: scope)
        try checkOpen()
        return try await io.routes.add(route)
    }

    /// One route of ``addRoutes(_:)``.
    package struct RouteRequest: Sendable {
        package var rules: [MatchRule]
        package var strictArgumentPaths: Bool
        package var deliver: @Sendable (Signal) -> Void
        package var finish: @Sendable () -> Void

        package init(
            rules: [MatchRule], strictArgumentPaths: Bool = false, deliver: @escaping @Sendable (Signal) -> Void,
            finish: @escaping @Sendable () -> Void = {}
        ) {
            self.rules = rules
            self.strictArgumentPaths = strictArgumentPaths
            self.deliver = deliver
            self.finish = finish
        }
    }

    /// Adds many routes at once and returns, for each, its id or why it failed (the error names
    /// the rule). Every `AddMatch` is sent before any answer is awaited, so N routes cost about
    /// one round trip, not N; each route that succeeded is active when this returns (its rules
    /// acknowledged by the bus), exactly as with the single-route form. Blocking.
    ///
    /// Where the bus daemon reports a refused rule even for a call sent without reply (dbus-daemon
    /// and dbus-broker do; the connection asks once), the calls go out that way, followed by one
    /// `GetId` whose answer acknowledges them all: the daemon then sends one message per batch,
    /// not one per rule.
    package func addRoutes(_ requests: [RouteRequest]) -> [Result<UInt64, BusError>] {
        precondition(!io.isOnIOThread, "routes must not be added from the connection's I/O thread")
        if handleClosed.load(ordering: .relaxed) {
            return Array(repeating: .failure(io.closedError()), count: requests.count)
        }
        // The rules' texts are made and checked here, once (not in slices handed to the I/O
        // thread meanwhile: docs/performance.md, *Figures behind the design*).
        return io.routes.addWaiting(
            requests.map { request in
                Result { () throws(BusError) in
                    try BusRoutes.Route.checked(
                        request.rules, request.strictArgumentPaths, request.deliver, request.finish, scope: scope)
                }
            })
    }

    /// Whether ``addRoutes(_:)`` sends `AddMatch` without replies on this connection (the bus
    /// daemon reports refusals even so): `nil` until the first batch asked. For tests.
    package var batchesAddMatchWithoutReplies: Bool? {
        switch io.rules.quietAddsKnown.load(ordering: .relaxed) {
        case 1: false
        case 2: true
        default: nil
        }
    }

    /// Removes a route added with `addRoute` and releases its rules.
    package func removeRoute(_ id: UInt64) { io.routes.remove(id: id) }

    /// On the I/O thread: the signal `probe` (its sender set) with `serial` will arrive, and the
    /// route `routeID` already delivered what it carries; when it arrives, and every route it
    /// reaches was announced so, it is dropped before being decoded and each route's `absorbed`
    /// runs instead. The doorbell's dedupe, done in the connection's filter.
    package func expectDuplicate(
        of probe: Signal, serial: UInt32, routeID: UInt64, absorbed: @escaping @Sendable () -> Void
    ) {
        io.routes.expectDuplicate(of: probe, serial: serial, routeID: routeID, absorbed: absorbed)
    }

    /// Calls a method of the bus daemon itself (`org.freedesktop.DBus`, such as `RequestName`,
    /// `GetNameOwner`, `GetId`) and returns the reply's arguments; the daemon's error is a
    /// ``BusError/Code/requestFailed`` with its D-Bus error name.
    package func callBusDaemon(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        let label = "\(method)(\(arguments.map(\.description).joined(separator: ", ")))"
        return try await io.rules.onLoop { rules, done in
            rules.callBus(method, arguments: arguments, naming: label, completion: done)
        }
    }

    /// Every match rule the bus daemon holds, by the unique name of the connection that added it
    /// (`org.freedesktop.DBus.Debug.Stats.GetAllMatchRules`). Not every daemon offers it: one
    /// built without statistics, dbus-broker, or a policy that denies it answers with an error
    /// (a ``BusError/Code/requestFailed`` carrying the daemon's D-Bus error name).
    package func matchRulesOnBus() async throws -> [String: [String]] {
        let method = "GetAllMatchRules"
        return try await io.rules.onLoop { rules, done in
            rules.callBus(
                method, interface: "org.freedesktop.DBus.Debug.Stats", arguments: [], naming: method,
                decode: { reply in
                    guard let rules = MessageCoding.readStringArrayDictionary(reply) else {
                        return .failure(BusError(.typeMismatch, value: method, "the reply to \(method) is not a{sas}"))
                    }
                    return .success(rules)
                }, completion: done)
        }
    }

    /// Whether the caller runs on this connection's I/O thread.
    package var isOnIOThread: Bool { io.isOnIOThread }
}

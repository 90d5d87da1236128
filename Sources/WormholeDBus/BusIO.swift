import Dispatch
import Glibc
import Logging
import Synchronization

/// Owns one libdbus connection at a time, on one thread: the connection's I/O thread, which is
/// the process's loop thread (``RuntimeLoop``), shared with every other connection, the inotify
/// instance and the reconnection waits; a `BusIO` is one handler of that loop.
///
/// Exactly one thread at a time touches the C connection: its owner, the holder of the loop's
/// ownership lock (the design of GRDB's serialized database, with swift-nio's event loop as
/// the usual owner). The I/O thread owns it whenever it is awake: it reads, dispatches, runs
/// every libdbus watch, timeout and filter callback, and writes. Other threads:
/// - `emit` builds the message on the caller's thread. If the loop is asleep (the ownership
///   lock is free, `trylock`), the caller owns the connection for the moment it takes to write
///   what is queued and its message, so a post costs no thread hop; otherwise it appends the
///   message to an outgoing queue (waking the loop through its eventfd when the queue was
///   empty). It never waits for the I/O thread either way. On the I/O thread itself (a
///   handler answering a signal) it writes at once.
/// - everything else (routes, rules, flushes, reconnects) is a job queued on the loop.
///
/// The rule registry and route table are loop-confined (`loop.preconditionInEventLoop()`);
/// the connection, its watch and timeout tables are owner-confined (`loop.preconditionOwned()`).
///
/// `@unchecked Sendable`: loop-confined properties are touched only on the I/O thread; the
/// rest is immutable, atomic or behind `shared`.
final class BusIO: MainLoopOwner, EventLoopHandler, @unchecked Sendable {
    typealias Completion = @Sendable (Result<Void, BusError>) -> Void

    /// A route as the layers above describe it.
    struct Route {
        /// The route receives a signal when any of its rules matches it.
        var rules: [MatchRule]
        /// `rules` as the bus daemon reads them (their descriptions), made once by the caller.
        var texts: [String]
        /// `argNpath` rules route only values at or below their value (see `BusConnection.addRoute`).
        var strictArgumentPaths = false
        var deliver: @Sendable (Signal) -> Void
        var finish: @Sendable () -> Void
        /// The scope that added the route (a shared connection's handle, see ``closeScope(_:)``);
        /// 0 for a private connection's routes.
        var scope: UInt64 = 0
    }

    /// What a route table entry carries.
    struct Handlers {
        var deliver: @Sendable (Signal) -> Void
        var finish: @Sendable () -> Void
        /// The route's rules as the bus daemon reads them.
        var texts: [String]
        /// The scope that added the route; 0 for none.
        var scope: UInt64
    }

    private struct TimeoutRecord {
        var intervalMilliseconds: Int
        var enabled: Bool
        var deadline: UInt64
    }

    private struct Shared {
        var outgoing: [LibDBus.Message] = []
        var uniqueName = ""
        var connected = false
        var stopping = false
        var eventHandlers: [UInt64: @Sendable (BusConnectionEvent) -> Void] = [:]
        /// The scope of each event handler added by a shared connection's handle.
        var eventScopes: [UInt64: UInt64] = [:]
    }

    let address: BusAddress
    let automaticReconnect: Bool
    /// How long authentication and `Hello` may take on each connection attempt.
    let connectTimeout: Duration
    let logger: Logger
    let loop: EventLoop
    private let shared = Locked(Shared())
    /// Serialises senders on other threads among themselves (see `send`).
    private let emitting = PThreadMutex()
    private let nextID = Atomic<UInt64>(1)
    /// Set by ``stop()``: the connection has left the loop, which takes no more of its jobs.
    private let detached = Atomic<Bool>(false)
    /// Signals the connection received (after the bus daemon's filtering), for tests and statistics.
    let signalsReceived = Atomic<UInt64>(0)
    /// The sender name this connection owns inside a sandbox (contract §8; AppNameClaim.swift).
    let appNameClaim = AppNameClaim()
    /// Signals `send` accepted (written or queued), and how many of them the bus has confirmed
    /// by answering a call made after them (``confirm(timeout:)``): a flush and the drain at exit
    /// make that call only when the first is ahead, so a connection that sent nothing pays nothing.
    private let acceptedSignals = Atomic<UInt64>(0)
    private let confirmedSignals = Atomic<UInt64>(0)
    /// Accepted signals were dropped because the bus went away; the next flush reports it.
    private let lostSignals = Atomic<Bool>(false)
    /// Signalled once, when the loop has stopped (the drain at exit waits for a closing connection).
    private let stoppedSignal = DispatchSemaphore(value: 0)

    // Loop-confined.
    private var connection: LibDBus.Connection?
    private var watches: [Int32: [LibDBus.Watch]] = [:]
    private var timeouts: [LibDBus.Timeout: TimeoutRecord] = [:]
    /// No enabled timeout is due before this (it may be earlier than the true next deadline, never
    /// later: removing a timeout leaves it as it was). Keeps each loop iteration O(1) however many
    /// replies are awaited (one per pending `AddMatch` when thousands are sent at once); the
    /// timeouts are scanned only when it passes.
    private var earliestDeadline = UInt64.max
    private var registry = RuleRegistry<Completion>(connected: true)
    private var routes = RouteTable<Handlers>()
    /// Routes per well-known sender name whose owner the route table must know.
    private var trackedNames: [String: Int] = [:]
    /// Confirmations waiting for the bus's answer (``confirmOnLoop(deadline:completion:)``), by
    /// id: a connection that goes away fails them (libdbus forgets its pending calls on close).
    private var confirmations: [UInt64: (BusError?) -> Void] = [:]
    /// The routes each scope added (a shared connection's handles; see ``closeScope(_:)``).
    private var scopedRoutes: [UInt64: Set<UInt64>] = [:]
    /// The rules each scope took with ``acquireRule(_:scope:completion:)``, with their counts.
    private var scopedRules: [UInt64: [String: Int]] = [:]
    private var disconnectPending = false
    /// A greeting that failed inside a libdbus callback: the connection is given up after the
    /// dispatch returns (closing it from inside would free it under libdbus's feet).
    private var greetingFailure: BusError?
    /// When the greeting in flight gives up (monotonic milliseconds), whatever libdbus does: a
    /// daemon killed during authentication can leave libdbus with neither a reply nor a timeout
    /// to report, and the greeting would wait forever (seen in restart storms).
    private var greetingDeadline: UInt64?
    private var reconnector: Reconnector?
    /// Whether the bus daemon on this connection reports a refused `AddMatch` sent with the
    /// no-reply flag (dbus-daemon 1.14 does; dbus-broker 33 stays silent, as the D-Bus
    /// specification allows): `nil` until asked once per connection (``whenQuietAddsKnown(_:)``).
    /// When it does, a batch of routes sends its `AddMatch` calls without asking for replies
    /// and one `GetId` after them: the daemon handles a connection's messages in order, so
    /// `GetId`'s answer means every rule before it is active, and each refused rule has had
    /// its error (naming its serial, so the rule). This spares the daemon one reply per rule,
    /// two thirds of its work for a batch (measured: 40,000 AddMatch in 0.3 s of daemon CPU
    /// instead of 0.95 s).
    private var quietAddsReported: Bool? {
        didSet { quietAddsKnown.store(quietAddsReported.map { $0 ? 2 : 1 } ?? 0, ordering: .relaxed) }
    }
    /// `quietAddsReported` for other threads (tests): 0 not known, 1 no, 2 yes.
    let quietAddsKnown = Atomic<UInt8>(0)
    /// Batches waiting for the answer to the question above, and the probe asking it.
    private var quietAddsWaiters: [(Bool) -> Void] = []
    private var probe: (serial: UInt32, refused: Bool, generation: UInt64)?
    private var probeGeneration: UInt64 = 0
    /// While a batch's job runs: `AddMatch` goes out without asking for a reply.
    private var quietAdds = false
    /// `AddMatch` calls sent without reply by serial, until refused or acknowledged by a barrier.
    private var quietMatches: [UInt32: (rule: String, generation: UInt64)] = [:]
    /// Quiet `AddMatch` calls of the running batch, built and not yet sent: they go out together
    /// (``sendBarrier()``), so that the daemon reads many per wake-up instead of one.
    private var unsent: [(message: LibDBus.Message, rule: String, generation: UInt64)] = []
    /// Where the current connection is in its life: greeting the bus, or ready.
    private var phase: Phase

    private enum Phase {
        /// Authentication and `Hello` are in flight; `initial` carries the waiting initialiser.
        case greeting(initial: Greeting?)
        case ready
    }

    /// The initialiser's wait for the first `Hello` answer.
    private final class Greeting: Sendable {
        private let done = DispatchSemaphore(value: 0)
        private let outcome = Locked<Result<Void, BusError>?>(nil)

        func complete(_ result: Result<Void, BusError>) {
            let first = outcome.withLock { value -> Bool in
                if value != nil { return false }
                value = result
                return true
            }
            if first { done.signal() }
        }

        func wait(timeout: DispatchTime) -> Result<Void, BusError> {
            if done.wait(timeout: timeout) == .timedOut {
                complete(.failure(BusError(.connectionFailed, "no answer to Hello in time (the I/O thread did not report)")))
            }
            return outcome.withLock { $0 } ?? .failure(BusError(.connectionFailed, "no answer"))
        }
    }

    init(address: BusAddress, automaticReconnect: Bool, connectTimeout: Duration, logger: Logger) throws(BusError) {
        LibDBus.initialiseThreads
        self.address = address
        self.automaticReconnect = automaticReconnect
        self.connectTimeout = connectTimeout
        self.logger = logger
        let loop = try RuntimeLoop.join()
        self.loop = loop
        // Connected on the caller's thread (the socket only); it passes to the I/O thread when
        // this connection is attached to it, which authenticates and says Hello without
        // blocking, within the deadline.
        let connection: LibDBus.Connection
        do throws(BusError) {
            connection = try LibDBus.Connection.open(address)
        } catch {
            RuntimeLoop.leave(loop)
            throw error
        }
        self.connection = connection
        let greeting = Greeting()
        phase = .greeting(initial: greeting)
        super.init()
        precondition(!loop.inEventLoop, "a bus connection must not be made on the runtime loop's thread (a handler on .ioThread)")
        loop.attach(self)
        // The greeting has its own deadline; this one is a backstop should the loop never answer.
        if case .failure(let error) = greeting.wait(timeout: ExitDrain.deadline(after: connectTimeout + .seconds(1))) {
            stop()
            throw error
        }
        ExitDrain.register(self)
    }

    var isConnected: Bool { shared.withLock { $0.connected } }
    var uniqueName: String { shared.withLock { $0.uniqueName } }
    var isOnIOThread: Bool { loop.inEventLoop }

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    /// Queues `job` on the I/O thread. Returns false when the connection is closed.
    @discardableResult
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool { execute(job) }

    /// Queues `job` on the loop unless this connection was stopped (the loop is the process's,
    /// and runs on for the other connections).
    @discardableResult
    private func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        if detached.load(ordering: .acquiring) { return false }
        return loop.execute(job)
    }

    // MARK: Sending

    /// Sends a message: at once on the I/O thread, otherwise through the outgoing queue.
    /// Throws `disconnected` while the connection is down or closed.
    func send(_ message: LibDBus.Message) throws(BusError) {
        if loop.inEventLoop {
            guard let connection else { throw notConnected() }
            if !connection.send(message) { throw BusError(.outOfMemory, "libdbus could not queue a message") }
            acceptedSignals.add(1, ordering: .releasing)
            return
        }
        // Senders take turns among themselves (never behind the reader): one at a time builds
        // up the queue or writes, which paces many posting threads to what the socket takes
        // instead of letting them outrun the one writer (libdbus's own lock did this before).
        emitting.lock()
        defer { emitting.unlock() }
        if loop.tryTakeOwnership() {
            defer { loop.releaseOwnership() }
            // What other threads queued first goes first: a thread's own posts stay in order.
            drainOutgoing()
            let (stopping, connected) = shared.withLock { ($0.stopping, $0.connected) }
            if stopping { throw closedError() }
            guard connected, let connection, case .ready = phase else { throw notConnected() }
            if !connection.send(message) { throw BusError(.outOfMemory, "libdbus could not queue a message") }
            acceptedSignals.add(1, ordering: .releasing)
            return
        }
        let mustWake = try shared.withLock { state throws(BusError) -> Bool in
            if state.stopping { throw closedError() }
            if !state.connected { throw notConnected() }
            state.outgoing.append(message)
            return state.outgoing.count == 1
        }
        // Counted once queued: a confirmation that reads the count first drains the queue after.
        acceptedSignals.add(1, ordering: .releasing)
        if mustWake { loop.wake() }
    }

    /// Hands the queued outgoing messages to libdbus. Owner only.
    private func drainOutgoing() {
        loop.preconditionOwned()
        let messages = shared.withLock { state -> [LibDBus.Message] in
            if state.outgoing.isEmpty { return [] }
            defer { state.outgoing = [] }
            return state.outgoing
        }
        guard !messages.isEmpty else { return }
        guard let connection else {
            logger.warning("dropped \(messages.count) queued signal(s): the bus went away before they were written")
            return
        }
        for message in messages where !connection.send(message) {
            logger.error("libdbus could not queue a signal (out of memory); it was dropped")
        }
    }

    /// Whether signals were accepted that the bus has not confirmed yet.
    var hasUnconfirmedSignals: Bool {
        acceptedSignals.load(ordering: .acquiring) > confirmedSignals.load(ordering: .acquiring)
    }

    /// Blocks until every signal accepted before the call is on the bus: written, and followed by
    /// one call the bus answered (`GetNameOwner` of our own name: a proxy on the way passes on
    /// what came before it), at most `timeout`. Returns at once when nothing is unconfirmed.
    /// Returns the error when the bus did not answer in time, or went away and signals were
    /// dropped (logged when it happened). On the I/O thread the call waits on this thread
    /// (libdbus reads and writes the socket itself), within the same bound.
    func confirm(timeout: Duration) -> BusError? {
        let deadline = ExitDrain.deadline(after: timeout)
        if !hasUnconfirmedSignals {
            return lostSignals.exchange(false, ordering: .acquiringAndReleasing) ? droppedError() : nil
        }
        if loop.inEventLoop { return confirmInline(deadline: deadline) }
        let outcome = Locked<BusError??>(nil)
        let done = DispatchSemaphore(value: 0)
        let accepted = execute { [self] in
            confirmOnLoop(deadline: deadline) { error in
                outcome.withLock { $0 = .some(error) }
                done.signal()
            }
        }
        guard accepted else { return closedError() }
        if done.wait(timeout: deadline) == .timedOut {
            return timedOut(timeout)
        }
        let result = outcome.withLock { $0 } ?? nil
        if result == nil, lostSignals.exchange(false, ordering: .acquiringAndReleasing) { return droppedError() }
        return result
    }

    /// Writes what is queued, then calls `GetNameOwner` of our own name; `completion` gets `nil`
    /// once the bus answered (every signal accepted before is then confirmed). Loop-confined.
    private func confirmOnLoop(deadline: DispatchTime, completion: @escaping (BusError?) -> Void) {
        loop.preconditionInEventLoop()
        // The count first, then the queue: a signal counted was queued before it was counted.
        let target = acceptedSignals.load(ordering: .acquiring)
        drainOutgoing()
        guard let connection, case .ready = phase else {
            completion(notConnected())
            return
        }
        let message: LibDBus.Message
        do {
            message = try MessageCoding.makeBusCall("GetNameOwner", arguments: [.string(connection.uniqueName)])
        } catch {
            completion(error)
            return
        }
        let id = makeID()
        confirmations[id] = completion
        let sent = connection.call(message, timeoutMilliseconds: ExitDrain.milliseconds(until: deadline)) { [self] reply in
            guard let completion = confirmations.removeValue(forKey: id) else { return }
            if let reply, !Self.isLocalFailure(reply) {
                confirmed(upTo: target)
                completion(nil)
            } else {
                completion(BusError(.timedOut, value: address.rawValue, "the bus at \(quoted(address.rawValue)) did not answer in time"))
            }
        }
        if !sent, let completion = confirmations.removeValue(forKey: id) { completion(notConnected()) }
    }

    /// Fails every confirmation waiting for an answer: the connection is gone. Loop-confined.
    private func failConfirmations() {
        let waiting = confirmations
        confirmations = [:]
        for completion in waiting.values { completion(droppedError()) }
    }

    /// ``confirmOnLoop(deadline:completion:)`` waiting on the I/O thread itself. Loop-confined.
    private func confirmInline(deadline: DispatchTime) -> BusError? {
        loop.preconditionInEventLoop()
        let target = acceptedSignals.load(ordering: .acquiring)
        drainOutgoing()
        guard let connection, case .ready = phase else { return notConnected() }
        guard let message = try? MessageCoding.makeBusCall("GetNameOwner", arguments: [.string(connection.uniqueName)]) else {
            return BusError(.outOfMemory, "libdbus could not build a call")
        }
        guard let reply = connection.callBlocking(message, timeoutMilliseconds: ExitDrain.milliseconds(until: deadline)),
            !Self.isLocalFailure(reply)
        else {
            return BusError(.timedOut, value: address.rawValue, "the bus at \(quoted(address.rawValue)) did not answer in time")
        }
        confirmed(upTo: target)
        return nil
    }

    /// An answer libdbus made up itself (no reply in time, or the connection closed), not the bus's.
    private static func isLocalFailure(_ reply: LibDBus.Message) -> Bool {
        guard let error = MessageCoding.readError(reply) else { return false }
        return error.name == "org.freedesktop.DBus.Error.NoReply" || error.name == "org.freedesktop.DBus.Error.Disconnected"
    }

    private func confirmed(upTo target: UInt64) {
        var current = confirmedSignals.load(ordering: .relaxed)
        while current < target {
            let (exchanged, original) = confirmedSignals.compareExchange(
                expected: current, desired: target, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = original
        }
    }

    /// Signals accepted and not yet confirmed were dropped with the connection: remembered for
    /// the next flush, and no longer waited for. Loop-confined.
    private func forgetUnconfirmed() {
        let accepted = acceptedSignals.load(ordering: .acquiring)
        if accepted > confirmedSignals.load(ordering: .acquiring) {
            lostSignals.store(true, ordering: .releasing)
            confirmed(upTo: accepted)
        }
    }

    /// At exit (``ExitDrain/run()``): starts confirming what this connection accepted and returns
    /// how to wait for it (true: confirmed), or `nil` when there is nothing to wait for. A closing
    /// connection is waited for until its loop stops. On the I/O thread it confirms at once.
    func beginExitDrain(deadline: DispatchTime) -> (() -> Bool)? {
        let (stopping, connected) = shared.withLock { ($0.stopping, $0.connected) }
        if stopping && loop.inEventLoop {
            // An exit on the loop's thread: the loop cannot finish the closing; confirm here.
            if connected && hasUnconfirmedSignals, let error = confirmInline(deadline: deadline) {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
            }
            return nil
        }
        if stopping {
            return { [self] in
                if stoppedSignal.wait(timeout: deadline) == .timedOut {
                    logger.warning("exiting: a closing connection's signals were not confirmed by the bus in time")
                    return false
                }
                stoppedSignal.signal()  // for anyone else waiting
                return true
            }
        }
        guard connected, hasUnconfirmedSignals else { return nil }
        if loop.inEventLoop {
            if let error = confirmInline(deadline: deadline) {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
            }
            return nil
        }
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<BusError?>(nil)
        let accepted = execute { [self] in
            confirmOnLoop(deadline: deadline) { error in
                failure.withLock { $0 = error }
                done.signal()
            }
        }
        guard accepted else { return nil }
        return { [self] in
            if done.wait(timeout: deadline) == .timedOut {
                logger.warning("exiting: signals may not have reached the bus at \(quoted(address.rawValue)): it did not answer within the exit drain's bound")
                return false
            }
            if let error = failure.withLock({ $0 }) {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
                return false
            }
            return true
        }
    }

    // MARK: Routes and rules (on the I/O thread)

    /// Adds a route and its rules; `completion` runs on the I/O thread once the bus acknowledged
    /// every rule (and, for a rule with a well-known sender, told who owns that name). If any
    /// fails, the route is removed and its rules released.
    func addRoute(id: UInt64, _ route: Route, completion: @escaping Completion) {
        let accepted = execute { [self] in addRoute(confined: id, route, completion: completion) }
        if !accepted { completion(.failure(closedError())) }
    }

    /// Adds many routes in one job on the I/O thread: every `AddMatch` is sent before any answer
    /// is awaited, so the round trips overlap; where the daemon reports refusals of calls sent
    /// without reply (see `quietAddsReported`), they are sent that way, followed by one barrier.
    /// `completion` runs once, on the I/O thread, with each route's outcome in the order of
    /// `batch` (as ``addRoute(id:_:completion:)`` would report it).
    func addRoutes(
        _ batch: [(id: UInt64, route: Route)], completion: @escaping @Sendable ([Result<Void, BusError>]) -> Void
    ) {
        let accepted = execute { [self] in
            whenQuietAddsKnown { [self] quiet in
                let outcomes = BatchOutcomes(count: batch.count, completion: completion)
                quietAdds = quiet
                for (index, entry) in batch.enumerated() {
                    addRoute(confined: entry.id, entry.route) { outcomes.record($0, at: index) }
                }
                quietAdds = false
                sendBarrier()
            }
        }
        if !accepted { completion(Array(repeating: .failure(closedError()), count: batch.count)) }
    }

    private func addRoute(confined id: UInt64, _ route: Route, completion: @escaping Completion) {
        loop.preconditionInEventLoop()
        routes.insert(
            RouteTable.Route(
                rules: route.rules, strictArgumentPaths: route.strictArgumentPaths,
                payload: Handlers(deliver: route.deliver, finish: route.finish, texts: route.texts, scope: route.scope)),
            id: id)
        if route.scope != 0 { scopedRoutes[route.scope, default: []].insert(id) }
        let names = Set(route.rules.compactMap(\.sender).filter(Self.isWellKnown))
        let outcomes = OutcomeCollector(count: route.rules.count + names.count)
        let finished: @Sendable () -> Void = { [self] in
            guard let all = outcomes.finished() else { return }
            if let failure = all.lazy.compactMap({ if case .failure(let error) = $0 { error } else { nil } }).first {
                removeRoute(confined: id)
                completion(.failure(failure))
            } else {
                completion(.success(()))
            }
        }
        if route.rules.isEmpty && names.isEmpty { completion(.success(())) }
        for text in route.texts {
            perform(registry.acquire(text, waiter: { result in
                outcomes.record(result)
                finished()
            }))
        }
        for name in names {
            track(name) { result in
                outcomes.record(result)
                finished()
            }
        }
    }

    /// Removes a route and releases its rules.
    func removeRoute(id: UInt64) {
        execute { [self] in removeRoute(confined: id) }
    }

    /// Removes a route and releases its rules; returns what it carried (nil: no such route).
    @discardableResult
    private func removeRoute(confined id: UInt64) -> Handlers? {
        loop.preconditionInEventLoop()
        guard let route = routes.remove(id: id) else { return nil }
        let scope = route.payload.scope
        if scope != 0 {
            scopedRoutes[scope]?.remove(id)
            if scopedRoutes[scope]?.isEmpty == true { scopedRoutes[scope] = nil }
        }
        for text in route.payload.texts { perform(registry.release(text)) }
        for name in Set(route.rules.compactMap(\.sender).filter(Self.isWellKnown)) { untrack(name) }
        return route.payload
    }

    /// Takes one reference on a rule outside any route (`BusConnection.addMatch`). Loop-confined.
    func acquireRule(_ rule: MatchRule, scope: UInt64 = 0, completion: @escaping Completion) {
        loop.preconditionInEventLoop()
        let text = rule.description
        if scope != 0 { scopedRules[scope, default: [:]][text, default: 0] += 1 }
        perform(registry.acquire(text, waiter: completion))
    }

    /// Drops one reference taken with `acquireRule`. Loop-confined.
    func releaseRule(_ rule: MatchRule, scope: UInt64 = 0, completion: Completion? = nil) {
        loop.preconditionInEventLoop()
        let text = rule.description
        if scope != 0 {
            // A scope releases only what it took (a second release of one rule is not another's).
            guard let count = scopedRules[scope]?[text] else {
                completion?(.success(()))
                return
            }
            scopedRules[scope]?[text] = count > 1 ? count - 1 : nil
            if scopedRules[scope]?.isEmpty == true { scopedRules[scope] = nil }
        }
        perform(registry.release(text))
        completion?(.success(()))
    }

    // MARK: Scopes (the handles of a shared connection)

    /// Ends everything one handle of a shared connection added: its routes are removed (their
    /// rules released, their `finish` called, so its streams end), its event handlers dropped and
    /// the rules it took with `acquireRule` released, while the connection and every other
    /// handle's routes carry on. A closed connection has finished every route already.
    func closeScope(_ scope: UInt64) {
        shared.withLock { state in
            for (id, owner) in state.eventScopes where owner == scope {
                state.eventHandlers[id] = nil
                state.eventScopes[id] = nil
            }
        }
        execute { [self] in
            for id in scopedRoutes[scope] ?? [] { removeRoute(confined: id)?.finish() }
            scopedRoutes[scope] = nil
            for (text, count) in scopedRules[scope] ?? [:] {
                for _ in 0..<count { perform(registry.release(text)) }
            }
            scopedRules[scope] = nil
        }
    }

    /// Carries out what the rule registry asked for. Loop-confined.
    private func perform(_ actions: [RuleRegistry<Completion>.Action]) {
        for action in actions {
            switch action {
            case .add(let rule, let generation):
                if quietAdds {
                    addMatchQuietly(rule, generation: generation)
                } else {
                    callBus("AddMatch", rule) { [self] result in
                        perform(registry.answered(rule, generation: generation, result.map { _ in () }))
                    }
                }
            case .remove(let rule):
                // A quiet AddMatch of the rule may wait to be sent: it must reach the daemon first.
                if !unsent.isEmpty { sendBarrier() }
                callBus("RemoveMatch", rule) { [self] result in
                    if case .failure(let error) = result, connection != nil {
                        logger.warning("the bus refused RemoveMatch: \(error)")
                    }
                }
            case .complete(let waiters, let result):
                for waiter in waiters { waiter(result) }
            }
        }
    }

    /// Calls a method of the bus daemon with one string argument; `completion` gets the reply's
    /// arguments, or the daemon's error. Loop-confined.
    private func callBus(
        _ method: String, _ argument: String, completion: @escaping (Result<[DBusValue], BusError>) -> Void
    ) {
        callBus(method, arguments: [.string(argument)], naming: argument, completion: completion)
    }

    /// Calls a method of the bus daemon (`org.freedesktop.DBus`); `completion` gets the reply's
    /// arguments, or the daemon's error, which names `naming`. Loop-confined.
    func callBus(
        _ method: String, arguments: [DBusValue], naming argument: String,
        completion: @escaping (Result<[DBusValue], BusError>) -> Void
    ) {
        callBus(
            method, interface: "org.freedesktop.DBus", arguments: arguments, naming: argument,
            decode: { .success(MessageCoding.readArguments($0)) }, completion: completion)
    }

    /// Calls a method of the bus daemon on `interface` (one of the daemon's own interfaces);
    /// `decode` reads the reply, `completion` gets what it read, or the daemon's error, which
    /// names `naming`. Loop-confined.
    func callBus<Reply>(
        _ method: String, interface: String, arguments: [DBusValue], naming argument: String,
        decode: @escaping (LibDBus.Message) -> Result<Reply, BusError>,
        completion: @escaping (Result<Reply, BusError>) -> Void
    ) {
        loop.preconditionInEventLoop()
        guard let connection else {
            completion(.failure(notConnected()))
            return
        }
        let message: LibDBus.Message
        do {
            message = try MessageCoding.makeBusCall(method, interface: interface, arguments: arguments)
        } catch {
            completion(.failure(error))
            return
        }
        let sent = connection.call(message) { reply in
            guard let reply else {
                completion(.failure(BusError(.disconnected, value: argument, "no reply to \(method) for \(argument)")))
                return
            }
            if let error = MessageCoding.readError(reply) {
                completion(.failure(BusError(
                    .requestFailed, value: argument, dbusName: error.name,
                    "the bus refused \(method) for \(argument): \(error.message)")))
            } else {
                completion(decode(reply))
            }
        }
        if !sent {
            completion(.failure(BusError(.disconnected, value: argument, "cannot send \(method) for \(argument): the connection is closed")))
        }
    }

    // MARK: AddMatch without replies, for batches

    /// The rule of the probe: one every daemon refuses (there is no message type `wormhole-probe`).
    private static let probeRule = "type='wormhole-probe'"

    /// Runs `body` with `quietAddsReported` once it is known, asking the daemon first if needed:
    /// the probe is an `AddMatch` of a rule it refuses, sent without reply, then `GetId`. Its
    /// refusal arriving before `GetId`'s answer means refusals are reported. Loop-confined.
    private func whenQuietAddsKnown(_ body: @escaping (Bool) -> Void) {
        if let known = quietAddsReported {
            body(known)
            return
        }
        quietAddsWaiters.append(body)
        guard quietAddsWaiters.count == 1 else { return }  // a probe is on its way
        guard let connection, case .ready = phase, let message = MessageCoding.makeAddMatch(Self.probeRule, noReply: true),
            let serial = connection.sendReturningSerial(message)
        else {
            finishProbe(reported: false)
            return
        }
        probeGeneration &+= 1
        let generation = probeGeneration
        probe = (serial, false, generation)
        callBus("GetId", arguments: [], naming: "GetId") { [self] result in
            guard let asked = probe, asked.generation == generation else { return }
            if case .success = result { quietAddsReported = asked.refused }
            finishProbe(reported: quietAddsReported ?? false)
        }
    }

    /// Hands the probe's answer to the batches waiting for it (`false` when there is none:
    /// they then use one reply per rule). Loop-confined.
    private func finishProbe(reported: Bool) {
        probe = nil
        let waiters = quietAddsWaiters
        quietAddsWaiters = []
        for waiter in waiters { waiter(reported) }
    }

    /// Builds `AddMatch(rule)` without reply, sent with the batch's others by ``sendBarrier()``;
    /// a refusal is an error naming its serial, and the barrier acknowledges it otherwise.
    /// Loop-confined.
    private func addMatchQuietly(_ rule: String, generation: UInt64) {
        guard let message = MessageCoding.makeAddMatch(rule, noReply: true) else {
            perform(registry.answered(rule, generation: generation, .failure(BusError(
                .outOfMemory, value: rule, "libdbus could not build AddMatch for \(rule)"))))
            return
        }
        unsent.append((message, rule, generation))
    }

    /// Sends the batch's quiet `AddMatch` calls, then one `GetId`, whose answer acknowledges
    /// every one of them that was not refused (the daemon answers a connection's calls in
    /// order). Loop-confined.
    private func sendBarrier() {
        guard !unsent.isEmpty else { return }
        let batch = unsent
        unsent = []
        var covered: [UInt32] = []
        covered.reserveCapacity(batch.count)
        for call in batch {
            guard let connection, let serial = connection.sendReturningSerial(call.message) else {
                perform(registry.answered(call.rule, generation: call.generation, .failure(BusError(
                    .disconnected, value: call.rule, "cannot send AddMatch for \(call.rule): the connection is closed"))))
                continue
            }
            quietMatches[serial] = (call.rule, call.generation)
            covered.append(serial)
        }
        guard !covered.isEmpty else { return }
        callBus("GetId", arguments: [], naming: "GetId") { [self] result in
            for serial in covered {
                guard let pending = quietMatches.removeValue(forKey: serial) else { continue }
                let outcome: Result<Void, BusError> =
                    switch result {
                    case .success: .success(())
                    case .failure(let error):
                        .failure(BusError(
                            error.code, value: pending.rule, dbusName: error.dbusName,
                            "no answer to AddMatch for \(pending.rule): \(error.message)"))
                    }
                perform(registry.answered(pending.rule, generation: pending.generation, outcome))
            }
        }
    }

    /// Forgets the quiet calls and the probe of a connection that is gone (the registry fails
    /// the waiters); batches waiting for the probe go on without it. Loop-confined.
    private func forgetQuietAdds() {
        quietMatches = [:]
        unsent = []
        quietAddsReported = nil
        if probe != nil || !quietAddsWaiters.isEmpty { finishProbe(reported: false) }
    }

    // MARK: Owners of well-known sender names

    private static func isWellKnown(_ name: String) -> Bool {
        !name.hasPrefix(":") && name != MatchRule.busDaemonName
    }

    private static func ownerRule(for name: String) -> MatchRule {
        MatchRule(
            sender: MatchRule.busDaemonName, interface: InterfaceName(unchecked: "org.freedesktop.DBus"),
            member: MemberName(unchecked: "NameOwnerChanged"), arguments: [0: name])
    }

    /// Starts following who owns `name` (a rule for its `NameOwnerChanged`, then `GetNameOwner`);
    /// `completion` runs once the owner is known. Loop-confined.
    private func track(_ name: String, completion: @escaping Completion) {
        trackedNames[name, default: 0] += 1
        perform(registry.acquire(Self.ownerRule(for: name).description, waiter: { [self] result in
            if case .failure = result {
                completion(result)
                return
            }
            askOwner(of: name, completion: completion)
        }))
    }

    private func askOwner(of name: String, completion: Completion?) {
        callBus("GetNameOwner", name) { [self] result in
            switch result {
            case .success(let arguments):
                if case .string(let owner)? = arguments.first, trackedNames[name] != nil { routes.owners[name] = owner }
                completion?(.success(()))
            case .failure(let error) where error.dbusName == "org.freedesktop.DBus.Error.NameHasNoOwner":
                routes.owners[name] = nil
                completion?(.success(()))
            case .failure(let error):
                completion?(.failure(error))
            }
        }
    }

    private func untrack(_ name: String) {
        guard let count = trackedNames[name] else { return }
        if count > 1 {
            trackedNames[name] = count - 1
            return
        }
        trackedNames[name] = nil
        routes.owners[name] = nil
        perform(registry.release(Self.ownerRule(for: name).description))
    }

    // MARK: Events

    func addEventHandler(scope: UInt64 = 0, _ handler: @escaping @Sendable (BusConnectionEvent) -> Void) -> UInt64 {
        let id = makeID()
        shared.withLock {
            $0.eventHandlers[id] = handler
            if scope != 0 { $0.eventScopes[id] = scope }
        }
        return id
    }

    func removeEventHandler(_ id: UInt64) {
        shared.withLock {
            $0.eventHandlers[id] = nil
            $0.eventScopes[id] = nil
        }
    }

    private func report(_ event: BusConnectionEvent) {
        // In the order they were added (IDs increase): a layer above that added its handler
        // first (a notification center's catch-up) has acted when a later one runs.
        let handlers = shared.withLock { $0.eventHandlers.sorted { $0.key < $1.key }.map(\.value) }
        for handler in handlers { handler(event) }
    }

    // MARK: The loop (EventLoopHandler)

    func loopStarted() {
        guard let connection else { return }
        connection.installMainLoop(self)
        greet(connection)
    }

    /// Sends `Hello` on a new connection (libdbus authenticates first, through the watches) and
    /// moves to `.ready` with its answer, or gives the connection up when the deadline passes.
    private func greet(_ connection: LibDBus.Connection) {
        let seconds = connectTimeout.components.seconds
        let milliseconds = Int32(clamping: seconds * 1_000 + connectTimeout.components.attoseconds / 1_000_000_000_000_000)
        // libdbus's own timeout for Hello first; this one only if libdbus never reports.
        greetingDeadline = Self.now() + UInt64(max(1, milliseconds)) + 250
        let context = "the bus at \(quoted(address.rawValue))"
        let sent: Bool
        do {
            sent = connection.call(try MessageCoding.makeBusCall("Hello", arguments: []), timeoutMilliseconds: max(1, milliseconds)) {
                [self] reply in
                greeted(connection, reply.map(Self.helloOutcome) ?? .failure(
                    BusError(.connectionFailed, value: address.rawValue, "\(context) closed the connection before answering Hello")))
            }
        } catch {
            sent = false
        }
        if !sent {
            greeted(connection, .failure(BusError(.connectionFailed, value: address.rawValue, "cannot send Hello to \(context)")))
        }
    }

    private static func helloOutcome(_ reply: LibDBus.Message) -> Result<String, BusError> {
        if let error = MessageCoding.readError(reply) {
            return .failure(BusError(.connectionFailed, dbusName: error.name, error.message))
        }
        guard case .string(let name)? = MessageCoding.readArguments(reply).first else {
            return .failure(BusError(.connectionFailed, "the answer to Hello carries no unique name"))
        }
        return .success(name)
    }

    /// The bus answered (or did not answer) `Hello` on `connection`.
    private func greeted(_ connection: LibDBus.Connection, _ outcome: Result<String, BusError>) {
        guard case .greeting(let initial) = phase, self.connection == connection else { return }
        var outcome = outcome
        if case .success(let name) = outcome, !connection.setUniqueName(name) {
            outcome = .failure(BusError(.outOfMemory, "libdbus could not record the unique name"))
        }
        switch outcome {
        case .success(let name):
            phase = .ready
            greetingDeadline = nil
            shared.withLock {
                $0.uniqueName = name
                $0.connected = true
            }
            if let initial {
                initial.complete(.success(()))
            } else {
                restoreRules()
            }
        case .failure(let error):
            let reason =
                error.dbusName == "org.freedesktop.DBus.Error.NoReply"
                ? "did not answer within \(connectTimeout) (authentication and Hello); is the bus daemon stopped?"
                : "refused the connection: \(error.message)"
            greetingFailure = BusError(
                .connectionFailed, value: address.rawValue, dbusName: error.dbusName,
                "cannot connect to the bus at \(quoted(address.rawValue)): it \(reason)")
        }
    }

    /// Gives up a connection whose greeting failed: outside any libdbus call. Loop-confined.
    private func abandonGreeting(_ failure: BusError) {
        greetingFailure = nil
        greetingDeadline = nil
        guard case .greeting(let initial) = phase else { return }
        connection?.closeAndRelease()
        connection = nil
        clearWatchesAndTimeouts()
        if let initial {
            initial.complete(.failure(failure))
        } else if !shared.withLock({ $0.stopping }) {
            logger.info("reconnecting: \(failure.message)")
            startReconnecting()
        }
    }

    func ready(fd: Int32, _ readiness: Readiness) {
        var index = 0
        while true {
            // Look the watch up again each time: handling one may remove the others (on this thread).
            guard let list = watches[fd], index < list.count else { return }
            let watch = list[index]
            index += 1
            guard watch.isEnabled else { continue }
            watch.handle(
                readable: readiness.readable && watch.wantsReadable, writable: readiness.writable && watch.wantsWritable,
                error: readiness.error, hangup: readiness.hangup)
        }
    }

    func timeoutMilliseconds() -> Int32 {
        // Work left over from inside a libdbus call is done in the next iteration, at once.
        if greetingFailure != nil || disconnectPending { return 0 }
        if let greetingDeadline {
            let now = Self.now()
            if greetingDeadline <= now { return 0 }
            let untilGreeting = Int32(clamping: greetingDeadline - now)
            if timeouts.isEmpty || earliestDeadline == .max { return untilGreeting }
            let next = earliestDeadline <= now ? 0 : Int32(clamping: earliestDeadline - now)
            return min(next, untilGreeting)
        }
        if timeouts.isEmpty { earliestDeadline = .max }
        let next = earliestDeadline
        guard next != UInt64.max else { return -1 }
        let now = Self.now()
        return next <= now ? 0 : Int32(clamping: next - now)
    }

    func beforeJobs() {
        fireTimeouts()
        drainOutgoing()
    }

    func iterationEnded() {
        connection?.dispatchAll()
        if let deadline = greetingDeadline, Self.now() >= deadline {
            self.greetingDeadline = nil
            if case .greeting = phase, greetingFailure == nil {
                greetingFailure = BusError(
                .connectionFailed, value: address.rawValue,
                    "cannot connect to the bus at \(quoted(address.rawValue)): authentication and Hello did not finish within \(connectTimeout)")
            }
        }
        if let greetingFailure { abandonGreeting(greetingFailure) }
        if disconnectPending { handleDisconnect() }
    }

    func loopStopped() {
        defer {
            ExitDrain.unregister(self)
            stoppedSignal.signal()
        }
        forgetUnconfirmed()
        reconnector?.stop()
        reconnector = nil
        connection?.closeAndRelease()
        connection = nil
        clearWatchesAndTimeouts()
        let dropped = shared.withLock { state -> Int in
            state.connected = false
            state.eventHandlers = [:]
            state.eventScopes = [:]
            defer { state.outgoing = [] }
            return state.outgoing.count
        }
        if dropped > 0 { logger.debug("dropped \(dropped) queued signal(s): the connection was closed") }
        for route in routes.removeAll() { route.payload.finish() }
        trackedNames = [:]
        scopedRoutes = [:]
        scopedRules = [:]
        perform(registry.closed())
        forgetQuietAdds()
        failConfirmations()
    }

    /// How long closing may wait for the bus to confirm the signals it accepted.
    static let closeBound: Duration = .seconds(2)

    /// Detaches the connection from the process's loop (``detach()``); the connection is closed on
    /// the I/O thread and every route finished.
    /// Sending stops at once; signals accepted before and not yet confirmed are confirmed first
    /// (one call the bus answers, at most ``closeBound``), without the caller waiting: the drain
    /// at exit waits for it.
    func stop() {
        let (first, connected) = shared.withLock { state -> (Bool, Bool) in
            defer { state.stopping = true }
            return (!state.stopping, state.connected)
        }
        // A second call (a center's close, then its connection's deinit) changes nothing: the
        // first arranged the stop, at once or once the confirmation is done.
        guard first else { return }
        if connected && hasUnconfirmedSignals {
            let deadline = ExitDrain.deadline(after: Self.closeBound)
            let queued = execute { [self] in
                confirmOnLoop(deadline: deadline) { [self] error in
                    if let error { logger.warning("closing: signals may not have reached the bus: \(error.message)") }
                    detach()
                }
            }
            if queued { return }
        }
        detach()
    }

    /// Detaches the connection from the process's loop: it is closed on the I/O thread and every
    /// route finished. Calling it again does nothing.
    private func detach() {
        if detached.exchange(true, ordering: .acquiringAndReleasing) { return }
        RuntimeLoop.detach(self, from: loop)
    }

    // MARK: Disconnection and reconnection

    private func handleDisconnect() {
        disconnectPending = false
        if case .greeting = phase {
            // Lost while greeting: the greeting fails (the initialiser throws, or the reconnector
            // tries again); nobody was told the connection was up, so nobody is told it went down.
            abandonGreeting(greetingFailure ?? BusError(
                .connectionFailed, value: address.rawValue,
                "cannot connect to the bus at \(quoted(address.rawValue)): it closed the connection during authentication"))
            return
        }
        connection?.closeAndRelease()
        connection = nil
        clearWatchesAndTimeouts()
        let (dropped, stopping) = shared.withLock { state -> (Int, Bool) in
            state.connected = false
            defer { state.outgoing = [] }
            return (state.outgoing.count, state.stopping)
        }
        if dropped > 0 {
            logger.warning("dropped \(dropped) queued signal(s): the bus went away before they were written")
        }
        forgetUnconfirmed()
        perform(registry.disconnected(keepRules: automaticReconnect))
        forgetQuietAdds()
        routes.owners = [:]
        logger.info("disconnected from the bus", metadata: ["address": "\(address.rawValue)"])
        report(.disconnected)
        if automaticReconnect {
            if !stopping { startReconnecting() }
        } else {
            for route in routes.removeAll() { route.payload.finish() }
            trackedNames = [:]
            scopedRoutes = [:]
        }
        failConfirmations()
    }

    private func startReconnecting() {
        phase = .greeting(initial: nil)
        reconnector?.stop()
        reconnector = Reconnector(io: self)
        reconnector?.start()
    }

    /// Called on the I/O thread with a new connection from the reconnector: greet the bus on it.
    func adoptReconnected(_ connection: LibDBus.Connection) {
        loop.preconditionInEventLoop()
        reconnector?.stop()
        reconnector = nil
        if shared.withLock({ $0.stopping }) {
            connection.closeAndRelease()
            return
        }
        self.connection = connection
        phase = .greeting(initial: nil)
        connection.installMainLoop(self)
        greet(connection)
    }

    /// After a reconnection's `Hello`: re-add every rule, learn the tracked names' owners, then
    /// report `.reconnected`.
    private func restoreRules() {
        let actions = registry.reconnected()
        let names = Array(trackedNames.keys)
        let remaining = OutcomeCollector(count: actions.count + names.count)
        logger.info("reconnected to the bus", metadata: ["address": "\(address.rawValue)", "rules": "\(actions.count)"])
        if actions.isEmpty && names.isEmpty {
            report(.reconnected)
            return
        }
        let counted: Completion = { [self] result in
            if case .failure(let error) = result {
                logger.error("could not restore a match rule after reconnecting: \(error)")
            }
            remaining.record(result)
            if remaining.finished() != nil { report(.reconnected) }
        }
        for action in actions {
            guard case .add(let rule, let generation) = action else { continue }
            callBus("AddMatch", rule) { [self] result in
                perform(registry.answered(rule, generation: generation, result.map { _ in () }))
                counted(result.map { _ in () })
            }
        }
        for name in names { askOwner(of: name, completion: counted) }
    }

    private func clearWatchesAndTimeouts() {
        watches = [:]
        timeouts = [:]
        earliestDeadline = .max
        loop.removeAllInterests(of: self)
    }

    // MARK: libdbus callbacks (MainLoopOwner), on the owner's thread (the I/O thread, or a sender holding the ownership)

    override func disconnected() { disconnectPending = true }

    override func received(_ signal: Signal) {
        if signal.sender == MatchRule.busDaemonName && signal.member.rawValue == "NameOwnerChanged",
            signal.arguments.count == 3, case .string(let name) = signal.arguments[0], trackedNames[name] != nil,
            case .string(let owner) = signal.arguments[2]
        {
            routes.owners[name] = owner.isEmpty ? nil : owner
        }
        // The daemon's own signals to us (NameAcquired) are not counted: only other connections' signals.
        if signal.interface.rawValue != MatchRule.busDaemonName { signalsReceived.add(1, ordering: .relaxed) }
        for route in routes.routes(for: signal) { route.payload.deliver(signal) }
    }

    override func receivedReply(serial: UInt32, error: (name: String, message: String)?) {
        if let asked = probe, asked.serial == serial {
            if error != nil { probe?.refused = true }
            return
        }
        guard let pending = quietMatches.removeValue(forKey: serial) else { return }
        let outcome: Result<Void, BusError> =
            if let error {
                .failure(BusError(
                    .requestFailed, value: pending.rule, dbusName: error.name,
                    "the bus refused AddMatch for \(pending.rule): \(error.message)"))
            } else {
                .success(())  // a daemon that answers even calls sent without reply
            }
        perform(registry.answered(pending.rule, generation: pending.generation, outcome))
    }

    override func wakeUp() { loop.wake() }

    private func interest(in fd: Int32) -> Interest {
        var interest = Interest()
        for watch in watches[fd] ?? [] where watch.isEnabled {
            if watch.wantsReadable { interest.readable = true }
            if watch.wantsWritable { interest.writable = true }
        }
        return interest
    }

    override func watchAdded(_ watch: LibDBus.Watch) {
        loop.preconditionOwned()
        let fd = watch.fd
        watches[fd, default: []].append(watch)
        loop.setInterest(fd: fd, interest(in: fd), for: self)
    }

    override func watchRemoved(_ watch: LibDBus.Watch) {
        loop.preconditionOwned()
        for (fd, list) in watches where list.contains(watch) {
            let rest = list.filter { $0 != watch }
            watches[fd] = rest.isEmpty ? nil : rest
            loop.setInterest(fd: fd, interest(in: fd), for: self)
        }
    }

    override func watchToggled(_ watch: LibDBus.Watch) {
        loop.preconditionOwned()
        for (fd, list) in watches where list.contains(watch) {
            loop.setInterest(fd: fd, interest(in: fd), for: self)
        }
    }

    override func timeoutChanged(_ timeout: LibDBus.Timeout, removed: Bool) {
        loop.preconditionOwned()
        if removed {
            timeouts[timeout] = nil
        } else {
            let interval = timeout.intervalMilliseconds
            let record = TimeoutRecord(
                intervalMilliseconds: interval, enabled: timeout.isEnabled, deadline: Self.now() + UInt64(max(0, interval)))
            timeouts[timeout] = record
            if record.enabled { earliestDeadline = min(earliestDeadline, record.deadline) }
        }
    }

    private func fireTimeouts() {
        // Most iterations have no libdbus timeout at all (they exist only while a reply is awaited).
        if timeouts.isEmpty {
            earliestDeadline = .max
            return
        }
        let now = Self.now()
        guard earliestDeadline <= now else { return }
        let due = timeouts.filter { $0.value.enabled && $0.value.deadline <= now }.map(\.key)
        for timeout in due {
            // Handling one may remove others (on this thread): check before each.
            guard var record = timeouts[timeout] else { continue }
            record.deadline = now + UInt64(max(0, record.intervalMilliseconds))
            timeouts[timeout] = record
            timeout.handle()
        }
        earliestDeadline = timeouts.values.lazy.filter(\.enabled).map(\.deadline).min() ?? .max
    }

    private static func now() -> UInt64 { EventLoop.nowMilliseconds() }

    // MARK: Errors

    private func closedError() -> BusError {
        BusError(.disconnected, value: address.rawValue, "the connection to \(quoted(address.rawValue)) is closed")
    }

    private func droppedError() -> BusError {
        BusError(
            .disconnected, value: address.rawValue,
            "signals were dropped: the bus at \(quoted(address.rawValue)) went away before it confirmed them")
    }

    private func timedOut(_ timeout: Duration) -> BusError {
        BusError(.timedOut, value: address.rawValue, "the bus at \(quoted(address.rawValue)) did not confirm within \(timeout)")
    }

    private func notConnected() -> BusError {
        BusError(.disconnected, value: address.rawValue, "not connected to the bus at \(quoted(address.rawValue))")
    }
}

/// Gathers the outcomes of several requests that complete on the I/O thread.
/// `@unchecked Sendable`: created and used only on the I/O thread.
private final class OutcomeCollector: @unchecked Sendable {
    private let count: Int
    private var results: [Result<Void, BusError>] = []

    init(count: Int) { self.count = count }

    func record(_ result: Result<Void, BusError>) { results.append(result) }

    /// Every result once all have answered (once only), else `nil`.
    func finished() -> [Result<Void, BusError>]? { results.count == count ? results : nil }
}

/// The outcomes of a batch of routes, each recorded as it is known, handed over once all are.
/// `@unchecked Sendable`: created and used only on the I/O thread.
private final class BatchOutcomes: @unchecked Sendable {
    private var results: [Result<Void, BusError>?]
    private var remaining: Int
    private let completion: @Sendable ([Result<Void, BusError>]) -> Void

    init(count: Int, completion: @escaping @Sendable ([Result<Void, BusError>]) -> Void) {
        results = Array(repeating: nil, count: count)
        remaining = count
        self.completion = completion
        if count == 0 { completion([]) }
    }

    func record(_ result: Result<Void, BusError>, at index: Int) {
        guard case .none = results[index] else { return }
        results[index] = result
        remaining -= 1
        if remaining == 0 { completion(results.map { $0! }) }
    }
}

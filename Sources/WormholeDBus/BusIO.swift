// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Logging
import Synchronization
import WormholeSystem

/// One bus connection: owns one libdbus connection at a time and is one handler of the
/// process's event loop (``RuntimeLoop``), which it shares with every other connection, the
/// inotify instance and the reconnection waits.
///
/// Which thread may touch what (loop-confined and owner-confined state, the `trylock` fast path
/// on which a sender writes on its own thread, what is a job on the loop) is written once, in
/// the module's Threading article (<doc:Threading>); debug builds assert it
/// (`loop.assertInEventLoop()`, `loop.assertOwned()`).
///
/// It coordinates the parts of one connection, each a type with its own state: the match rules
/// at the daemon (``BusRules``), the routes and dispatch (``BusRoutes``), the sending side
/// (``BusOutgoing``), confirmation by the bus and the drain at exit (``BusConfirmations``),
/// greeting and reconnection (``BusConnector``), the event handlers (``BusEvents``) and
/// libdbus's watches and timeouts (``LibDBusWatches``). This class holds the libdbus connection,
/// the state a sender checks under one lock, the jobs on the loop, the libdbus callbacks, losing
/// the bus and closing.
///
/// `@unchecked Sendable`: loop-confined properties are touched only on the I/O thread,
/// owner-confined ones only by the holder of the loop's ownership; the rest is immutable,
/// atomic or behind `shared`.
final class BusIO: MainLoopOwner, EventLoopHandler, ExitDrainable, @unchecked Sendable {
    typealias Completion = @Sendable (Result<Void, BusError>) -> Void

    struct Shared {
        var outgoing: OutgoingQueue<LibDBus.Message>
        /// A wait for room ran out and the queue has not moved since: refusable sends are
        /// refused at once.
        var stalled = false
        /// libdbus held ``BusOutgoing/libdbusHighWater`` bytes or more the last time the owner looked:
        /// the socket is full, and only then does a `Posted` replace a queued one (a loop that is
        /// merely busy writes every post).
        var congested = false
        var uniqueName = ""
        /// Counts the connections made (each `Hello` answered): a daemon that restarted may hand
        /// out a unique name it gave before, so the name alone does not tell two apart.
        var session: UInt64 = 0
        var connected = false
        var stopping = false
    }

    let automaticReconnect: Bool
    /// What the parts share: the address, logger, loop, locked state, and the libdbus
    /// connection with its phase.
    let link: BusLink
    /// The sender name this connection owns inside a sandbox (contract §8; AppNameClaim.swift).
    let appNameClaim = AppNameClaim()

    // Loop-confined.
    /// libdbus's watches and timeouts on the loop.
    var mainLoop = LibDBusWatches()
    /// The parts, each made once in `init` before the connection is on the loop; each receives
    /// the link and the few calls of the others it makes, never this coordinator.
    let outgoing: BusOutgoing
    let confirmations: BusConfirmations
    private(set) var rules: BusRules!
    private(set) var routes: BusRoutes!
    private(set) var connector: BusConnector!
    let events = BusEvents()
    var disconnectPending = false

    var address: BusAddress { link.address }
    var connectTimeout: Duration { link.connectTimeout }
    var logger: Logger { link.logger }
    var loop: EventLoop { link.loop }
    var shared: Locked<Shared> { link.shared }
    /// The libdbus connection of the moment (``BusLink/connection``). Loop-confined.
    var connection: LibDBus.Connection? {
        get { link.connection }
        set { link.connection = newValue }
    }
    /// Where the current connection is in its life (``BusLink/phase``). Loop-confined.
    var phase: BusLink.Phase {
        get { link.phase }
        set { link.phase = newValue }
    }

    init(
        address: BusAddress, automaticReconnect: Bool, connectTimeout: Duration, outgoingLimit: Int, logger: Logger
    ) throws(BusError) {
        LibDBus.initialiseThreads
        let shared = Locked(Shared(outgoing: OutgoingQueue(limit: outgoingLimit)))
        self.automaticReconnect = automaticReconnect
        let runtime = ProcessRuntime.shared
        let loop: EventLoop
        do throws(SystemFailure) {
            loop = try runtime.loop.join()
        } catch {
            throw BusError(error)
        }
        // Connected on the caller's thread (the socket only); it passes to the I/O thread when
        // this connection is attached to it, which authenticates and says Hello without
        // blocking, within the deadline.
        let connection: LibDBus.Connection
        do throws(BusError) {
            connection = try LibDBus.Connection.open(address)
        } catch {
            runtime.loop.leave(loop)
            throw error
        }
        let greeting = BusConnector.Greeting()
        let link = BusLink(
            address: address, connectTimeout: connectTimeout, logger: logger, loop: loop, shared: shared,
            connection: connection, phase: .greeting(initial: greeting))
        self.link = link
        let outgoing = BusOutgoing(link: link, limit: outgoingLimit)
        self.outgoing = outgoing
        confirmations = BusConfirmations(link: link, outgoing: outgoing)
        super.init()
        let execute: LoopJobs = { job in outgoing.execute(job) }
        // Who owns a well-known sender name is what the rules learn and the routes read: the one
        // call from the rules to the routes, made here (the routes are made after the rules).
        rules = BusRules(link: link, execute: execute) { [unowned self] name, owner in
            routes.table.owners[name] = owner
        }
        routes = BusRoutes(link: link, rules: rules, execute: execute)
        connector = BusConnector(
            link: link, rules: rules, events: events, execute: execute,
            hooks: BusConnector.Hooks(
                install: { [unowned self] connection in connection.installMainLoop(self) },
                drop: { [unowned self] in dropConnection() }))
        precondition(
            !loop.inEventLoop, "a bus connection must not be made on the runtime loop's thread (a handler on .ioThread)"
        )
        loop.attach(self)
        // The greeting has its own deadline; this one is a backstop should the loop never answer.
        if case .failure(let error) = greeting.wait(timeout: ExitDrain.deadline(after: connectTimeout + .seconds(1))) {
            stop()
            throw error
        }
        runtime.exitDrain.register(self)
    }

    var isConnected: Bool { shared.withLock { $0.connected } }
    var uniqueName: String { shared.withLock { $0.uniqueName } }
    /// The unique name and the connection it belongs to, read together.
    var identity: (uniqueName: String, session: UInt64) { shared.withLock { ($0.uniqueName, $0.session) } }
    var isOnIOThread: Bool { loop.inEventLoop }

    func makeID() -> UInt64 { link.makeID() }

    /// Queues `job` on the loop unless this connection was stopped (``BusOutgoing/execute(_:)``).
    @discardableResult
    func execute(_ job: @escaping @Sendable () -> Void) -> Bool { outgoing.execute(job) }

    // MARK: libdbus callbacks (MainLoopOwner)

    // On the owner's thread (see <doc:Threading>).

    override func disconnected() { disconnectPending = true }

    override func received(_ signal: Signal) {
        rules.noteOwnerChange(signal)
        routes.dispatch(signal)
    }

    override func absorbsDuplicate(serial: UInt32, sender: UnsafePointer<CChar>) -> Bool {
        routes.absorbDuplicate(serial: serial, sender: sender)
    }

    override func receivedReply(serial: UInt32, error: (name: String, message: String)?) {
        rules.quietAddAnswered(serial: serial, error: error)
    }

    override func wakeUp() { loop.wake() }

    override func watchAdded(_ watch: LibDBus.Watch) {
        loop.assertOwned()
        let fd = mainLoop.add(watch)
        loop.setInterest(fd: fd, mainLoop.interest(in: fd), for: self)
    }

    override func watchRemoved(_ watch: LibDBus.Watch) {
        loop.assertOwned()
        for fd in mainLoop.remove(watch) { loop.setInterest(fd: fd, mainLoop.interest(in: fd), for: self) }
    }

    override func watchToggled(_ watch: LibDBus.Watch) {
        loop.assertOwned()
        for fd in mainLoop.descriptors(of: watch) { loop.setInterest(fd: fd, mainLoop.interest(in: fd), for: self) }
    }

    override func timeoutChanged(_ timeout: LibDBus.Timeout, removed: Bool) {
        loop.assertOwned()
        mainLoop.change(timeout, removed: removed, now: EventLoop.nowMilliseconds())
    }

    // MARK: The loop (EventLoopHandler), libdbus's watches and timeouts on it

    func loopStarted() {
        loop.assertInEventLoop()
        guard let connection else { return }
        connection.installMainLoop(self)
        connector.greet(connection)
    }

    func ready(fd: Int32, _ readiness: Readiness) {
        loop.assertOwned()
        HopTrace.mark(.busReady)
        var index = 0
        while true {
            // Look the watch up again each time: handling one may remove the others (on this thread).
            let list = mainLoop.watches(on: fd)
            guard index < list.count else { return }
            let watch = list[index]
            index += 1
            guard watch.isEnabled else { continue }
            watch.handle(
                readable: readiness.readable && watch.wantsReadable,
                writable: readiness.writable && watch.wantsWritable,
                error: readiness.error, hangup: readiness.hangup)
        }
    }

    func timeoutMilliseconds() -> Int32 {
        loop.assertOwned()
        // Work left over from inside a libdbus call is done in the next iteration, at once.
        if connector.greetingFailure != nil || disconnectPending { return 0 }
        let now = EventLoop.nowMilliseconds()
        // The greeting's own deadline, if libdbus never reports.
        let next = min(mainLoop.nextDeadline(), connector.greetingDeadline ?? .max)
        guard next != UInt64.max else { return -1 }
        return next <= now ? 0 : Int32(clamping: next - now)
    }

    func beforeJobs() {
        loop.assertInEventLoop()
        let due = mainLoop.takeDue(now: EventLoop.nowMilliseconds())
        if !due.isEmpty {
            // Handling one may remove others (on this thread): check before each.
            for timeout in due where mainLoop.isPresent(timeout) { timeout.handle() }
            mainLoop.settle()
        }
        outgoing.pump()
    }

    func iterationEnded() {
        loop.assertInEventLoop()
        // What was queued behind this iteration's jobs, or while they ran.
        outgoing.pump()
        connection?.dispatchAll()
        connector.iterationEnded()
        if disconnectPending { handleDisconnect() }
    }

    func clearWatchesAndTimeouts() {
        loop.assertOwned()
        mainLoop.removeAll()
        loop.removeAllInterests(of: self)
    }

    /// Closes the libdbus connection of the moment, if any, and drops its watches and timeouts.
    /// Loop-confined.
    func dropConnection() {
        connection?.closeAndRelease()
        connection = nil
        clearWatchesAndTimeouts()
    }

    // MARK: Losing the bus, closing

    func handleDisconnect() {
        loop.assertInEventLoop()
        disconnectPending = false
        if case .greeting = phase {
            connector.lostWhileGreeting()
            return
        }
        dropConnection()
        let (dropped, stopping) = outgoing.dropAll()
        if dropped > 0 {
            logger.warning("dropped \(dropped) queued signal(s): the bus went away before they were written")
        }
        confirmations.forgetUnconfirmed()
        rules.perform(rules.registry.disconnected(keepRules: automaticReconnect))
        rules.forgetQuietAdds()
        routes.disconnected()
        logger.info("disconnected from the bus", metadata: ["address": "\(address.rawValue)"])
        events.report(.disconnected)
        if automaticReconnect {
            if !stopping { connector.startReconnecting() }
        } else {
            routes.finishAll()
            rules.trackedNames = [:]
        }
        confirmations.failWaiting()
    }

    func loopStopped() {
        loop.assertInEventLoop()
        defer {
            ProcessRuntime.shared.exitDrain.unregister(self)
            confirmations.loopStopped()
        }
        confirmations.forgetUnconfirmed()
        connector.stopReconnecting()
        dropConnection()
        events.removeAll()
        let (dropped, _) = outgoing.dropAll()
        if dropped > 0 { logger.debug("dropped \(dropped) queued signal(s): the connection was closed") }
        routes.finishAll()
        rules.trackedNames = [:]
        rules.scopedRules = [:]
        rules.perform(rules.registry.closed())
        rules.forgetQuietAdds()
        confirmations.failWaiting()
    }

    /// At exit: this connection's part of the drain (``BusConfirmations/beginExitDrain(deadline:)``).
    func beginExitDrain(deadline: DispatchTime) -> (() -> Bool)? {
        confirmations.beginExitDrain(deadline: deadline)
    }

    /// Detaches the connection from the process's loop (``detach()``); the connection is closed on
    /// the I/O thread and every route finished.
    /// Sending stops at once; signals accepted before and not yet confirmed are confirmed first
    /// (one call the bus answers, at most ``BusConfirmations/closeBound``), without the caller
    /// waiting: the drain at exit waits for it.
    func stop() {
        let (first, connected) = shared.withLock { state -> (Bool, Bool) in
            defer { state.stopping = true }
            return (!state.stopping, state.connected)
        }
        // A second call (a center's close, then its connection's deinit) changes nothing: the
        // first arranged the stop, at once or once the confirmation is done.
        guard first else { return }
        if connected && confirmations.hasUnconfirmedSignals,
            confirmations.confirmBeforeClosing(then: { [self] in detach() })
        {
            return
        }
        detach()
    }

    /// Detaches the connection from the process's loop: it is closed on the I/O thread and every
    /// route finished. Calling it again does nothing.
    func detach() {
        guard outgoing.leaveLoop() else { return }
        ProcessRuntime.shared.loop.detach(self, from: loop)
    }

    /// Ends everything one handle of a shared connection added: its routes are removed (their
    /// rules released, their `finish` called, so its streams end), its event handlers dropped and
    /// the rules it took with `acquireRule` released, while the connection and every other
    /// handle's routes carry on. A closed connection has finished every route already.
    func closeScope(_ scope: UInt64) {
        events.closeScope(scope)
        execute { [self] in
            routes.closeScope(scope)
            for (text, count) in rules.scopedRules[scope] ?? [:] {
                for _ in 0..<count { rules.perform(rules.registry.release(text)) }
            }
            rules.scopedRules[scope] = nil
        }
    }

    // MARK: Errors

    func closedError() -> BusError { link.closedError() }

    func notConnected() -> BusError { link.notConnected() }
}

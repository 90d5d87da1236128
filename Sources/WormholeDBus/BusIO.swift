import Dispatch
import Glibc
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
/// The match rules it holds at the daemon, the owners of well-known senders and the quiet
/// `AddMatch` batches are a part of their own (``BusRules``). The class is split by concern:
/// this file holds its state and the libdbus callbacks; `BusIO+Connecting` the greeting and
/// reconnection, `BusIO+Outgoing` sending, confirmation and the drain at exit, `BusIO+MainLoop`
/// the watches and timeouts, `BusIO+Routing` routes, dispatch and events, `BusIO+Scopes` the
/// handles of a shared connection.
///
/// `@unchecked Sendable`: loop-confined properties are touched only on the I/O thread,
/// owner-confined ones only by the holder of the loop's ownership; the rest is immutable,
/// atomic or behind `shared`.
final class BusIO: MainLoopOwner, EventLoopHandler, ExitDrainable, @unchecked Sendable {
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

    struct Shared {
        var outgoing: OutgoingQueue<LibDBus.Message>
        /// Senders waiting for room in `outgoing` (``SendPolicy/refusable(wait:)``).
        var roomWaiters: [DispatchSemaphore] = []
        /// A wait for room ran out and the queue has not moved since: refusable sends are
        /// refused at once.
        var stalled = false
        /// libdbus held ``BusIO/libdbusHighWater`` bytes or more the last time the owner looked:
        /// the socket is full, and only then does a `Posted` replace a queued one (a loop that is
        /// merely busy writes every post).
        var congested = false
        var uniqueName = ""
        /// Counts the connections made (each `Hello` answered): a daemon that restarted may hand
        /// out a unique name it gave before, so the name alone does not tell two apart.
        var session: UInt64 = 0
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
    let shared: Locked<Shared>
    /// The most bytes the outgoing queue holds (``BusConnection/defaultOutgoingLimit``).
    let outgoingLimit: Int
    /// How many bytes libdbus may hold unwritten before new messages wait in the outgoing
    /// queue instead (where they can be replaced or refused): what the socket did not take.
    static let libdbusHighWater = 256 * 1024
    /// Messages refused because the outgoing queue was full.
    let refusedSignals = Atomic<UInt64>(0)
    /// Serialises senders on other threads among themselves (see `send`).
    let emitting = PThreadMutex()
    let nextID = Atomic<UInt64>(1)
    /// Set by ``stop()``: the connection has left the loop, which takes no more of its jobs.
    let detached = Atomic<Bool>(false)
    /// Signals the connection received (after the bus daemon's filtering), for tests and statistics.
    let signalsReceived = Atomic<UInt64>(0)
    /// Signals dropped in the filter, undecoded, because every route they reach had them
    /// already (``expectDuplicate(of:serial:routeID:absorbed:)``).
    let duplicatesAbsorbed = Atomic<UInt64>(0)
    /// The sender name this connection owns inside a sandbox (contract §8; AppNameClaim.swift).
    let appNameClaim = AppNameClaim()
    /// Signals `send` accepted (written or queued), and how many of them the bus has confirmed
    /// by answering a call made after them (``confirm(timeout:)``): a flush and the drain at exit
    /// make that call only when the first is ahead, so a connection that sent nothing pays nothing.
    let acceptedSignals = Atomic<UInt64>(0)
    let confirmedSignals = Atomic<UInt64>(0)
    /// Accepted signals were dropped because the bus went away; the next flush reports it.
    let lostSignals = Atomic<Bool>(false)
    /// Signalled once, when the loop has stopped (the drain at exit waits for a closing connection).
    let stoppedSignal = DispatchSemaphore(value: 0)

    // Loop-confined.
    var connection: LibDBus.Connection?
    /// libdbus's watches and timeouts on the loop.
    var mainLoop = LibDBusWatches()
    var routes = RouteTable<Handlers>()
    /// The match rules this connection holds at the daemon (set once, in `init`, before the
    /// connection is on the loop).
    private(set) var rules: BusRules!
    /// Signals announced before they arrive (a doorbell ring came first); owner-confined like
    /// `routes`.
    var expectedDuplicates = ExpectedDuplicates()
    /// Confirmations waiting for the bus's answer (``confirmOnLoop(deadline:completion:)``), by
    /// id: a connection that goes away fails them (libdbus forgets its pending calls on close).
    var confirmations: [UInt64: (BusError?) -> Void] = [:]
    /// The routes each scope added (a shared connection's handles; see ``closeScope(_:)``).
    var scopedRoutes: [UInt64: Set<UInt64>] = [:]
    var disconnectPending = false
    /// A greeting that failed inside a libdbus callback: the connection is given up after the
    /// dispatch returns (closing it from inside would free it under libdbus's feet).
    var greetingFailure: BusError?
    /// When the greeting in flight gives up (monotonic milliseconds), whatever libdbus does: a
    /// daemon killed during authentication can leave libdbus with neither a reply nor a timeout
    /// to report, and the greeting would wait forever (seen in restart storms).
    var greetingDeadline: UInt64?
    var reconnector: Reconnector?
    /// Where the current connection is in its life: greeting the bus, or ready.
    var phase: Phase

    enum Phase {
        /// Authentication and `Hello` are in flight; `initial` carries the waiting initialiser.
        case greeting(initial: Greeting?)
        case ready
    }

    /// The initialiser's wait for the first `Hello` answer.
    final class Greeting: Sendable {
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<Void, BusError>?>(nil)

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
                complete(
                    .failure(BusError(.connectionFailed, "no answer to Hello in time (the I/O thread did not report)")))
            }
            return outcome.withLock { $0 } ?? .failure(BusError(.connectionFailed, "no answer"))
        }
    }

    init(
        address: BusAddress, automaticReconnect: Bool, connectTimeout: Duration, outgoingLimit: Int, logger: Logger
    ) throws(BusError) {
        LibDBus.initialiseThreads
        self.outgoingLimit = outgoingLimit
        shared = Locked(Shared(outgoing: OutgoingQueue(limit: outgoingLimit)))
        self.address = address
        self.automaticReconnect = automaticReconnect
        self.connectTimeout = connectTimeout
        self.logger = logger
        let runtime = ProcessRuntime.shared
        let loop: EventLoop
        do throws(SystemFailure) {
            loop = try runtime.loop.join()
        } catch {
            throw BusError(error)
        }
        self.loop = loop
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
        self.connection = connection
        let greeting = Greeting()
        phase = .greeting(initial: greeting)
        super.init()
        rules = BusRules(io: self)
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

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    /// Queues `job` on the I/O thread. Returns false when the connection is closed.
    @discardableResult
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool { execute(job) }

    /// Queues `job` on the loop unless this connection was stopped (the loop is the process's,
    /// and runs on for the other connections). The signals queued before it are written before
    /// it runs, those queued after it only once it ran (``OutgoingQueue``).
    @discardableResult
    func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        if detached.load(ordering: .acquiring) { return false }
        return shared.withLock { state in
            state.outgoing.markJob()
            let accepted = loop.execute { [self] in
                writeBeforeJob()
                job()
            }
            if !accepted { state.outgoing.unmarkLastJob() }
            return accepted
        }
    }

    // MARK: libdbus callbacks (MainLoopOwner)

    // On the owner's thread (see <doc:Threading>). Overrides cannot live in extensions: each
    // hands over to the file of its concern.

    override func disconnected() { disconnectPending = true }

    override func received(_ signal: Signal) {
        rules.noteOwnerChange(signal)
        dispatch(signal)
    }

    override func absorbsDuplicate(serial: UInt32, sender: UnsafePointer<CChar>) -> Bool {
        absorbDuplicate(serial: serial, sender: sender)
    }

    override func receivedReply(serial: UInt32, error: (name: String, message: String)?) {
        rules.quietAddAnswered(serial: serial, error: error)
    }

    override func wakeUp() { loop.wake() }
    override func watchAdded(_ watch: LibDBus.Watch) { addWatch(watch) }
    override func watchRemoved(_ watch: LibDBus.Watch) { removeWatch(watch) }
    override func watchToggled(_ watch: LibDBus.Watch) { toggleWatch(watch) }
    override func timeoutChanged(_ timeout: LibDBus.Timeout, removed: Bool) { changeTimeout(timeout, removed: removed) }

    // MARK: Errors

    func closedError() -> BusError {
        BusError(.disconnected, value: address.rawValue, "the connection to \(quoted(address.rawValue)) is closed")
    }

    func droppedError() -> BusError {
        BusError(
            .disconnected, value: address.rawValue,
            "signals were dropped: the bus at \(quoted(address.rawValue)) went away before it confirmed them")
    }

    func timedOut(_ timeout: Duration) -> BusError {
        BusError(
            .timedOut, value: address.rawValue,
            "the bus at \(quoted(address.rawValue)) did not confirm within \(timeout)")
    }

    func notConnected() -> BusError {
        BusError(.disconnected, value: address.rawValue, "not connected to the bus at \(quoted(address.rawValue))")
    }
}

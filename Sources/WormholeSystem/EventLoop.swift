// SPDX-License-Identifier: Apache-2.0
internal import CWormholeSystem  // the epoll and eventfd declarations
import FoundationEssentials
import Glibc
package import Logging
import Synchronization
import SystemPackage

/// What an ``EventLoop`` drives: a bus connection (`BusIO`), the process's inotify instance
/// (`InotifyHub`), a reconnection's wait. One loop drives many handlers (see ``RuntimeLoop``);
/// every method runs on the loop's thread, holding the loop's ownership.
package protocol EventLoopHandler: AnyObject, Sendable {
    /// The handler was attached (``EventLoop/attach(_:)``): first thing on the loop's thread.
    func loopStarted()
    /// A descriptor this handler registered is ready.
    func ready(fd: Int32, _ readiness: Readiness)
    /// How long the loop may sleep for this handler: milliseconds, or -1 for as long as nothing
    /// happens. The loop sleeps for the shortest of its handlers' answers.
    func timeoutMilliseconds() -> Int32
    /// After the ready descriptors, before the queued jobs of this iteration.
    func beforeJobs()
    /// After the queued jobs of this iteration.
    func iterationEnded()
    /// The handler was detached (``EventLoop/detach(_:)``), or the loop is stopping: the last
    /// call it gets. Its descriptors are unregistered right after.
    func loopStopped()
}

extension EventLoopHandler {
    package func ready(fd: Int32, _ readiness: Readiness) {}
    package func timeoutMilliseconds() -> Int32 { -1 }
    package func beforeJobs() {}
    package func iterationEnded() {}
}

/// What a descriptor is ready for, or what is wrong with it.
package struct Readiness: Hashable {
    package var readable = false
    package var writable = false
    package var error = false
    package var hangup = false

    package init(readable: Bool = false, writable: Bool = false, error: Bool = false, hangup: Bool = false) {
        self.readable = readable
        self.writable = writable
        self.error = error
        self.hangup = hangup
    }
}

/// The events a descriptor is watched for.
package struct Interest: Hashable {
    package var readable = false
    package var writable = false

    package init(readable: Bool = false, writable: Bool = false) {
        self.readable = readable
        self.writable = writable
    }

    package var isEmpty: Bool { !readable && !writable }
}

/// One thread that sleeps in `epoll_wait` on the descriptors its handlers register and on an
/// `eventfd` that other threads write to when they queue work. It never polls: its only
/// timed sleep is the shortest one its handlers ask for. A process has one (``RuntimeLoop``),
/// which every bus connection, the inotify instance and every reconnection share.
///
/// Everything marked *loop-confined* is touched only on the loop's thread; ``inEventLoop``
/// says whether the caller is there, and ``assertInEventLoop(file:line:)`` checks it in debug
/// builds only (named as swift-nio names its debug-only check; its `precondition` form is
/// always on, and this loop has none).
///
/// What the loop drives (its handlers' libdbus connections) is *owned*: exactly one thread at a
/// time may touch it, the holder of the ownership lock. The loop's thread holds it whenever it is not
/// asleep in `epoll_wait`; another thread may take it only with ``tryTakeOwnership()``, which
/// never waits, so nothing ever waits behind the loop (the way GRDB serialises a database
/// connection across threads). ``assertOwned()`` checks it in debug builds.
///
/// `@unchecked Sendable`: the descriptors are immutable, the job queue is behind a `Mutex`,
/// the thread identity is atomic, and `interests` and `handlers` are owner-confined.
package final class EventLoop: @unchecked Sendable {
    private struct Queue {
        var jobs: [@Sendable () -> Void] = []
        var stopping = false
    }

    package let name: String
    private let logger: Logger
    private let epollFD: Int32
    private let wakeFD: Int32
    private let thread = Atomic<UInt>(0)
    private let queue = Locked(Queue())
    private let ownership = OwnershipLock()
    /// Owner only: the epoll interest of each registered descriptor, and the handler it is for.
    private var interests: [Int32: (interest: Interest, handler: any EventLoopHandler)] = [:]
    /// Owner only: the attached handlers, in the order they were attached.
    private var handlers: [any EventLoopHandler] = []

    package init(name: String, logger: Logger) throws(SystemFailure) {
        self.name = name
        self.logger = logger
        let epoll = Result { () throws(Errno) in try Syscall.epollCreate() }
        let wake = Result { () throws(Errno) in try Syscall.eventCounter() }
        epollFD = (try? epoll.get()) ?? -1
        wakeFD = (try? wake.get()) ?? -1
        // On the failures below, deinit runs (every property is set) and closes what was opened.
        if case .failure(let error) = epoll { throw SystemFailure(call: "epoll_create1", code: error.rawValue) }
        if case .failure(let error) = wake { throw SystemFailure(call: "eventfd", code: error.rawValue) }
        do throws(Errno) {
            try Syscall.epollControl(epollFD, EPOLL_CTL_ADD, wakeFD, events: EPOLLIN.rawValue)
        } catch {
            throw SystemFailure(call: "epoll_ctl on the eventfd", code: error.rawValue)
        }
    }

    deinit {
        if epollFD >= 0 { Syscall.close(epollFD) }
        if wakeFD >= 0 { Syscall.close(wakeFD) }
    }

    /// Monotonic milliseconds, for the deadlines the handlers keep (`CLOCK_MONOTONIC`).
    package static func nowMilliseconds() -> UInt64 { Syscall.monotonicNanoseconds() / 1_000_000 }

    /// Starts the thread.
    package func start() {
        DetachedThread.start(name: name) { [self] in run() }
    }

    /// Attaches `handler`: its ``EventLoopHandler/loopStarted()`` runs on the loop's thread, then
    /// it takes part in every iteration until detached. The loop keeps it alive meanwhile.
    /// Returns false when the loop is stopping.
    @discardableResult
    package func attach(_ handler: any EventLoopHandler) -> Bool {
        execute { [self] in
            handlers.append(handler)
            handler.loopStarted()
        }
    }

    /// Detaches `handler`: its ``EventLoopHandler/loopStopped()`` runs on the loop's thread and
    /// its descriptors are unregistered. Jobs queued before still run first.
    /// When the loop is stopping already, its thread finishes every handler still attached.
    package func detach(_ handler: any EventLoopHandler) {
        execute { [self] in finish(handler) }
    }

    /// Loop thread: the handler's last call, and its descriptors dropped.
    private func finish(_ handler: any EventLoopHandler) {
        guard let index = handlers.firstIndex(where: { $0 === handler }) else { return }
        handlers.remove(at: index)
        handler.loopStopped()
        removeAllInterests(of: handler)
    }

    /// Whether the caller runs on the loop's thread.
    package var inEventLoop: Bool { thread.load(ordering: .acquiring) == UInt(pthread_self()) }

    /// Traps in debug builds (an `assert`: release builds check nothing) when the caller is not
    /// on the loop's thread.
    package func assertInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "must run on the \(name) thread", file: file, line: line)
    }

    /// Traps in debug builds (an `assert`) when the caller does not hold the ownership lock.
    package func assertOwned(file: StaticString = #fileID, line: UInt = #line) {
        assert(ownership.isHeldByCaller, "must hold the \(name) ownership", file: file, line: line)
    }

    /// Whether the caller holds the ownership lock (the loop's thread while awake, or a thread
    /// that took it with ``tryTakeOwnership()``).
    package var isOwned: Bool { ownership.isHeldByCaller }

    /// Takes the ownership lock if nobody holds it (the loop is asleep); never waits.
    package func tryTakeOwnership() -> Bool { ownership.tryLock() }

    /// Gives back what ``tryTakeOwnership()`` took.
    package func releaseOwnership() { ownership.unlock() }

    /// Queues `job` to run on the loop's thread, in submission order. Returns false (and drops
    /// the job) once the loop is stopping.
    @discardableResult
    package func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        let accepted = queue.withLock { queue -> Bool in
            if queue.stopping { return false }
            queue.jobs.append(job)
            return true
        }
        if accepted { wake() }
        return accepted
    }

    /// Wakes the loop (from another thread; on the loop's thread it is awake already).
    package func wake() {
        if inEventLoop { return }
        signalWake()
    }

    private func signalWake() {
        let one: UInt64 = 1
        do throws(Errno) {
            _ = try withUnsafeBytes(of: one) { bytes throws(Errno) in try Syscall.write(wakeFD, from: bytes) }
        } catch .resourceTemporarilyUnavailable {
            // The counter is already non-zero: the loop is woken either way.
        } catch {
            logger.error("cannot wake the I/O loop: write to eventfd failed: \(error)")
        }
    }

    /// Asks the loop to stop after its current iteration. Jobs queued before still run.
    package func stop() {
        let first = queue.withLock { queue -> Bool in
            defer { queue.stopping = true }
            return !queue.stopping
        }
        if first { signalWake() }
    }

    /// Sets the events a descriptor of `handler` is watched for; an empty interest removes it.
    /// Owner only.
    package func setInterest(fd: Int32, _ interest: Interest, for handler: any EventLoopHandler) {
        assertOwned()
        let current = interests[fd]?.interest
        if current == interest || (current == nil && interest.isEmpty) {
            if current != nil { interests[fd]?.handler = handler }
            return
        }
        let events = (interest.readable ? EPOLLIN.rawValue : 0) | (interest.writable ? EPOLLOUT.rawValue : 0)
        let operation: Int32
        if interest.isEmpty {
            guard current != nil else { return }
            interests[fd] = nil
            operation = EPOLL_CTL_DEL
        } else {
            interests[fd] = (interest, handler)
            operation = current == nil ? EPOLL_CTL_ADD : EPOLL_CTL_MOD
        }
        do throws(Errno) {
            try Syscall.epollControl(epollFD, operation, fd, events: events)
        } catch {
            // EBADF/ENOENT after libdbus closed a socket it had just stopped watching is harmless.
            if !(operation == EPOLL_CTL_DEL && (error == .badFileDescriptor || error == .noSuchFileOrDirectory)) {
                logger.error("epoll_ctl failed for fd \(fd): \(error)")
            }
        }
    }

    /// Forgets every descriptor of `handler` (after what owned them is gone). Owner only.
    package func removeAllInterests(of handler: any EventLoopHandler) {
        assertOwned()
        for (fd, entry) in interests where entry.handler === handler { setInterest(fd: fd, Interest(), for: handler) }
    }

    /// The shortest sleep the handlers ask for (-1: none asks for one).
    private func timeoutMilliseconds() -> Int32 {
        var shortest: Int32 = -1
        for handler in handlers {
            let timeout = handler.timeoutMilliseconds()
            if timeout >= 0 && (shortest < 0 || timeout < shortest) { shortest = timeout }
            if shortest == 0 { break }
        }
        return shortest
    }

    private func run() {
        thread.store(UInt(pthread_self()), ordering: .releasing)
        ownership.lock()
        var events = [epoll_event](repeating: epoll_event(), count: 16)
        while true {
            // Jobs queued on this thread after this iteration's jobs ran (a handler's own, which
            // wrote no eventfd) run at once, not after the next event.
            let timeout = queue.withLock { $0.jobs.isEmpty } ? timeoutMilliseconds() : 0
            // Asleep, the loop lends the connection: a sender may write on its own thread meanwhile.
            ownership.unlock()
            let waited = Result { () throws(Errno) in try Syscall.epollWait(epollFD, &events, timeout: timeout) }
            HopTrace.mark(.epollReturned)
            ownership.lock()
            if case .failure(let error) = waited, error != .interrupted {
                logger.critical("epoll_wait failed; the I/O loop stops: \(error)")
                queue.withLock { $0.stopping = true }
            }
            for index in 0..<((try? waited.get()) ?? 0) {
                let fd = events[index].data.fd
                if fd == wakeFD {
                    var value: UInt64 = 0
                    // EAGAIN: another wake-up already drained it.
                    _ = try? withUnsafeMutableBytes(of: &value) { bytes throws(Errno) in
                        try Syscall.read(wakeFD, into: bytes)
                    }
                } else if let handler = interests[fd]?.handler {
                    let bits = events[index].events
                    handler.ready(
                        fd: fd,
                        Readiness(
                            readable: bits & EPOLLIN.rawValue != 0, writable: bits & EPOLLOUT.rawValue != 0,
                            error: bits & EPOLLERR.rawValue != 0, hangup: bits & EPOLLHUP.rawValue != 0))
                }
            }
            for handler in handlers { handler.beforeJobs() }
            let (jobs, stopping) = queue.withLock { queue in
                defer { queue.jobs = [] }
                return (queue.jobs, queue.stopping)
            }
            for job in jobs { job() }
            for handler in handlers { handler.iterationEnded() }
            HopTrace.mark(.iterationEnded)
            if stopping { break }
        }
        for handler in handlers.reversed() { finish(handler) }
        // Jobs queued while the last iteration ran: run them so their completions are called.
        let late = queue.withLock { queue in
            defer { queue.jobs = [] }
            return queue.jobs
        }
        for job in late { job() }
        ownership.unlock()
        thread.store(0, ordering: .releasing)
    }
}

/// A pthread mutex that knows which thread holds it. `@unchecked Sendable`: the mutex is
/// the synchronisation; `holder` is atomic.
private final class OwnershipLock: @unchecked Sendable {
    private let mutex = PThreadMutex()
    private let holder = Atomic<UInt>(0)

    func lock() {
        mutex.lock()
        holder.store(UInt(pthread_self()), ordering: .relaxed)
    }

    func tryLock() -> Bool {
        guard mutex.tryLock() else { return false }
        holder.store(UInt(pthread_self()), ordering: .relaxed)
        return true
    }

    func unlock() {
        holder.store(0, ordering: .relaxed)
        mutex.unlock()
    }

    var isHeldByCaller: Bool { holder.load(ordering: .relaxed) == UInt(pthread_self()) }
}

internal import CWormholeDBus  // the epoll and eventfd declarations
import Foundation
import Glibc
import Logging
import Synchronization

/// What an ``EventLoop`` drives. Every method runs on the loop's thread.
protocol EventLoopHandler: AnyObject {
    /// First thing on the new thread, before waiting for anything.
    func loopStarted()
    /// A registered descriptor is ready.
    func ready(fd: Int32, _ readiness: Readiness)
    /// How long the loop may sleep: milliseconds, or -1 for as long as nothing happens.
    func timeoutMilliseconds() -> Int32
    /// After the ready descriptors, before the queued jobs of this iteration.
    func beforeJobs()
    /// After the queued jobs of this iteration.
    func iterationEnded()
    /// The loop is stopping: the last thing on the thread.
    func loopStopped()
}

/// What a descriptor is ready for, or what is wrong with it.
struct Readiness: Hashable {
    var readable = false
    var writable = false
    var error = false
    var hangup = false
}

/// The events a descriptor is watched for.
struct Interest: Hashable {
    var readable = false
    var writable = false

    var isEmpty: Bool { !readable && !writable }
}

/// One thread that sleeps in `epoll_wait` on the descriptors its handler registers and on an
/// `eventfd` that other threads write to when they queue work. It never polls: its only
/// timed sleep is the one its handler asks for.
///
/// Everything marked *loop-confined* is touched only on the loop's thread; ``inEventLoop``
/// says whether the caller is there, and ``preconditionInEventLoop()`` checks it in debug
/// builds (the habit swift-nio's event loops have).
///
/// What the loop drives (a libdbus connection) is *owned*: exactly one thread at a time may
/// touch it, the holder of the ownership lock. The loop's thread holds it whenever it is not
/// asleep in `epoll_wait`; another thread may take it only with ``tryTakeOwnership()``, which
/// never waits, so nothing ever waits behind the loop (the way GRDB serialises a database
/// connection across threads). ``preconditionOwned()`` checks it in debug builds.
///
/// `@unchecked Sendable`: the descriptors are immutable, the job queue is behind a `Mutex`,
/// the thread identity is atomic, and `interests` is loop-confined.
final class EventLoop: @unchecked Sendable {
    private struct Queue {
        var jobs: [@Sendable () -> Void] = []
        var stopping = false
    }

    let name: String
    private let logger: Logger
    private let epollFD: Int32
    private let wakeFD: Int32
    private let thread = Atomic<UInt>(0)
    private let queue = Locked(Queue())
    private let ownership = OwnershipLock()
    /// Owner only: the epoll interest of each registered descriptor.
    private var interests: [Int32: Interest] = [:]

    init(name: String, logger: Logger) throws(BusError) {
        self.name = name
        self.logger = logger
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        let epollErrno = errno
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        let wakeErrno = errno
        // On the failures below, deinit runs (every property is set) and closes what was opened.
        guard epollFD >= 0, wakeFD >= 0 else {
            let reason = String(cString: strerror(epollFD < 0 ? epollErrno : wakeErrno))
            throw BusError(.connectionFailed, "cannot create the I/O loop (\(epollFD < 0 ? "epoll_create1" : "eventfd")): \(reason)")
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeFD
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event) == 0 else {
            throw BusError(.connectionFailed, "cannot create the I/O loop (epoll_ctl on the eventfd): \(String(cString: strerror(errno)))")
        }
    }

    deinit {
        if epollFD >= 0 { Glibc.close(epollFD) }
        if wakeFD >= 0 { Glibc.close(wakeFD) }
    }

    /// Starts the thread; it keeps `handler` alive until it stops.
    func start(_ handler: some EventLoopHandler & Sendable) {
        let thread = Thread { [self] in run(handler) }
        thread.name = name
        thread.start()
    }

    /// Whether the caller runs on the loop's thread.
    var inEventLoop: Bool { thread.load(ordering: .acquiring) == UInt(pthread_self()) }

    /// Traps in debug builds when the caller is not on the loop's thread.
    func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "must run on the \(name) thread", file: file, line: line)
    }

    /// Traps in debug builds when the caller does not hold the ownership lock.
    func preconditionOwned(file: StaticString = #fileID, line: UInt = #line) {
        assert(ownership.isHeldByCaller, "must hold the \(name) ownership", file: file, line: line)
    }

    /// Whether the caller holds the ownership lock (the loop's thread while awake, or a thread
    /// that took it with ``tryTakeOwnership()``).
    var isOwned: Bool { ownership.isHeldByCaller }

    /// Takes the ownership lock if nobody holds it (the loop is asleep); never waits.
    func tryTakeOwnership() -> Bool { ownership.tryLock() }

    /// Gives back what ``tryTakeOwnership()`` took.
    func releaseOwnership() { ownership.unlock() }

    /// Queues `job` to run on the loop's thread, in submission order. Returns false (and drops
    /// the job) once the loop is stopping.
    @discardableResult
    func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        let accepted = queue.withLock { queue -> Bool in
            if queue.stopping { return false }
            queue.jobs.append(job)
            return true
        }
        if accepted { wake() }
        return accepted
    }

    /// Wakes the loop (from another thread; on the loop's thread it is awake already).
    func wake() {
        if inEventLoop { return }
        signalWake()
    }

    private func signalWake() {
        var one: UInt64 = 1
        // EAGAIN means the counter is already non-zero: the loop is woken either way.
        if Glibc.write(wakeFD, &one, 8) < 0 && errno != EAGAIN && errno != EINTR {
            logger.error("cannot wake the I/O loop: write to eventfd failed: \(String(cString: strerror(errno)))")
        }
    }

    /// Asks the loop to stop after its current iteration. Jobs queued before still run.
    func stop() {
        let first = queue.withLock { queue -> Bool in
            defer { queue.stopping = true }
            return !queue.stopping
        }
        if first { signalWake() }
    }

    /// Sets the events a descriptor is watched for; an empty interest removes it. Owner only.
    func setInterest(fd: Int32, _ interest: Interest) {
        preconditionOwned()
        let current = interests[fd]
        if current == interest || (current == nil && interest.isEmpty) { return }
        var event = epoll_event()
        event.events = (interest.readable ? EPOLLIN.rawValue : 0) | (interest.writable ? EPOLLOUT.rawValue : 0)
        event.data.fd = fd
        let operation: Int32
        if interest.isEmpty {
            guard current != nil else { return }
            interests[fd] = nil
            operation = EPOLL_CTL_DEL
        } else {
            interests[fd] = interest
            operation = current == nil ? EPOLL_CTL_ADD : EPOLL_CTL_MOD
        }
        if epoll_ctl(epollFD, operation, fd, &event) != 0 {
            // EBADF/ENOENT after libdbus closed a socket it had just stopped watching is harmless.
            let code = errno
            if !(operation == EPOLL_CTL_DEL && (code == EBADF || code == ENOENT)) {
                logger.error("epoll_ctl failed for fd \(fd): \(String(cString: strerror(code)))")
            }
        }
    }

    /// Forgets every descriptor (after the connection that owned them is gone). Owner only.
    func removeAllInterests() {
        preconditionOwned()
        for fd in Array(interests.keys) { setInterest(fd: fd, Interest()) }
    }

    private func run(_ handler: some EventLoopHandler) {
        thread.store(UInt(pthread_self()), ordering: .releasing)
        ownership.lock()
        handler.loopStarted()
        var events = [epoll_event](repeating: epoll_event(), count: 16)
        while true {
            let timeout = handler.timeoutMilliseconds()
            // Asleep, the loop lends the connection: a sender may write on its own thread meanwhile.
            ownership.unlock()
            let count = epoll_wait(epollFD, &events, Int32(events.count), timeout)
            let waitErrno = errno
            ownership.lock()
            if count < 0 && waitErrno != EINTR {
                logger.critical("epoll_wait failed; the I/O loop stops: \(String(cString: strerror(waitErrno)))")
                queue.withLock { $0.stopping = true }
            }
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                if fd == wakeFD {
                    var value: UInt64 = 0
                    _ = Glibc.read(wakeFD, &value, 8)  // EAGAIN: another wake-up already drained it
                } else {
                    let bits = events[index].events
                    handler.ready(
                        fd: fd,
                        Readiness(
                            readable: bits & EPOLLIN.rawValue != 0, writable: bits & EPOLLOUT.rawValue != 0,
                            error: bits & EPOLLERR.rawValue != 0, hangup: bits & EPOLLHUP.rawValue != 0))
                }
            }
            handler.beforeJobs()
            let (jobs, stopping) = queue.withLock { queue in
                defer { queue.jobs = [] }
                return (queue.jobs, queue.stopping)
            }
            for job in jobs { job() }
            handler.iterationEnded()
            if stopping { break }
        }
        handler.loopStopped()
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

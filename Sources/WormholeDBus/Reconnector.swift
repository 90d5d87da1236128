import Dispatch
import Glibc
package import Logging
import Synchronization
import WormholeSystem

/// Brings a connection back after the bus daemon went away.
///
/// For `unix:path=` addresses it watches the socket's directory (on the process's one inotify
/// instance, ``InotifyHub``) and tries to connect as soon as the socket reappears, so a
/// restarted daemon is found at once. A daemon creates its socket a moment before it listens,
/// and other transports (abstract sockets, TCP) give no file to watch, so a failed attempt is
/// also retried after a backoff (10 ms, doubling, at most 2 s): no event exists to wait for
/// there. It runs on the process's loop (``RuntimeLoop``): the backoff is the loop's sleep, and
/// no thread of its own waits.
///
/// `@unchecked Sendable`: every mutable property but `stopped` is loop-confined; `stopped` is atomic.
final class Reconnector: EventLoopHandler, @unchecked Sendable {
    private let address: BusAddress
    private let logger: Logger
    /// Takes the connection that was opened (on the loop's thread); it owns it from then on.
    private let adopt: (LibDBus.Connection) -> Void
    private let stopped = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private var loop: EventLoop?
    private var watches: [InotifyHub.Watch] = []
    private var delay: UInt64 = 10
    /// When the next attempt is due (monotonic milliseconds); nil while none is planned.
    private var nextAttempt: UInt64?

    /// Brings `io`'s connection back.
    convenience init(io: BusIO) {
        self.init(address: io.address, logger: io.logger) { connection in
            let handover = Handover(connection)
            // The new connection passes to the I/O thread's connection job (the same thread),
            // which owns it from then on.
            let accepted = io.submit { io.adoptReconnected(handover.connection) }
            if !accepted { handover.connection.closeAndRelease() }
        }
    }

    /// Opens a connection to `address` as soon as it can be opened and gives it to `adopt`.
    init(address: BusAddress, logger: Logger, adopt: @escaping (LibDBus.Connection) -> Void) {
        self.address = address
        self.logger = logger
        self.adopt = adopt
    }

    /// Starts trying (once). When no loop can be had (no epoll or eventfd left) it logs why and
    /// does nothing.
    func start() {
        if started.exchange(true, ordering: .acquiringAndReleasing) { return }
        do throws(SystemFailure) {
            loop = try ProcessRuntime.shared.loop.join()
        } catch {
            logger.error("cannot wait for the bus at \(address.rawValue): \(error)")
            return
        }
        loop?.attach(self)
    }

    /// Stops trying; `adopt` is not called after the loop has seen it. Calling it again does nothing.
    func stop() {
        if stopped.exchange(true, ordering: .acquiringAndReleasing) { return }
        guard started.load(ordering: .acquiring), let loop else { return }
        ProcessRuntime.shared.loop.detach(self, from: loop)
    }

    func loopStarted() {
        watchSocketDirectories()
        attempt()
    }

    func loopStopped() {
        stopped.store(true, ordering: .releasing)
        for watch in watches { watch.cancel() }
        watches = []
        nextAttempt = nil
    }

    func timeoutMilliseconds() -> Int32 {
        guard let due = nextAttempt else { return -1 }
        let now = EventLoop.nowMilliseconds()
        return due <= now ? 0 : Int32(clamping: due - now)
    }

    func beforeJobs() {
        if let due = nextAttempt, due <= EventLoop.nowMilliseconds() { attempt() }
    }

    private func watchSocketDirectories() {
        for path in address.unixSocketPaths {
            let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(
                separator: "/")
            do throws(SystemFailure) {
                let watch = try ProcessRuntime.shared.inotify.watch(
                    directory.isEmpty ? "/" : directory, mask: UInt32(IN_CREATE | IN_MOVED_TO | IN_ATTRIB)
                ) { [weak self] _ in
                    // On the loop's thread.
                    guard let self, !stopped.load(ordering: .acquiring) else { return }
                    delay = 10
                    attempt()
                }
                watches.append(watch)
            } catch {
                logger.debug("cannot watch \(directory) for the bus socket (\(error)); retrying after a backoff only")
            }
        }
    }

    private func attempt() {
        nextAttempt = nil
        guard !stopped.load(ordering: .acquiring) else { return }
        do {
            // A restarted daemon has a new guid: the address's `guid=` (as `dbus-daemon
            // --print-address` and `dbus-launch` print it) would make libdbus refuse it forever.
            let connection = try LibDBus.Connection.open(address.withoutGUID)
            stop()
            adopt(connection)
        } catch {
            logger.debug("reconnect attempt failed; retrying in \(delay) ms or when the socket appears: \(error)")
            nextAttempt = EventLoop.nowMilliseconds() + delay
            delay = min(delay * 2, 2_000)
        }
    }
}

/// Moves a freshly opened connection from the thread that opened it to the I/O thread.
/// `@unchecked Sendable`: the opening thread never touches the connection after handing it over.
private final class Handover: @unchecked Sendable {
    let connection: LibDBus.Connection
    init(_ connection: LibDBus.Connection) { self.connection = connection }
}

/// Waiting for a bus that is not there yet.
package enum BusWait {
    /// Blocks until a connection to `address` can be opened (the connection is then closed):
    /// for a `unix:path=` address as soon as its socket appears (inotify), otherwise after a
    /// backoff of 10 ms doubling to 2 s, as a connection does when it reconnects.
    package static func untilReachable(_ address: BusAddress) {
        let reachable = DispatchSemaphore(value: 0)
        let reconnector = Reconnector(address: address, logger: Logger(label: "wormhole.dbus")) { connection in
            connection.closeAndRelease()
            reachable.signal()
        }
        reconnector.start()
        reachable.wait()
        reconnector.stop()
    }
}

/// Waits, without blocking anyone, for a bus that cannot be reached yet: calls `reachable` once
/// (on the process's loop: it must return quickly) as soon as a connection to the address can be opened (that connection is
/// closed again), until cancelled. For a `unix:path=` address the socket's directory is watched
/// with inotify; other addresses are tried after a backoff of 10 ms doubling to 2 s.
package final class BusArrivalWatch: Sendable {
    private let reconnector: Reconnector

    package init(address: BusAddress, logger: Logger, reachable: @escaping @Sendable () -> Void) {
        reconnector = Reconnector(address: address, logger: logger) { connection in
            connection.closeAndRelease()
            reachable()
        }
        reconnector.start()
    }

    /// Stops waiting; `reachable` is not called after the loop has seen it.
    package func cancel() { reconnector.stop() }
}

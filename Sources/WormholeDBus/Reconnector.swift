// SPDX-License-Identifier: Apache-2.0
package import Dispatch
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
/// The same watch waits for a bus that is not there yet (``BusArrivalWatch``, ``BusWait``).
///
/// `@unchecked Sendable`: every mutable property is loop-confined; `stopped` is atomic.
package final class Reconnector: EventLoopHandler, @unchecked Sendable {
    private let address: BusAddress
    private let logger: Logger
    /// Takes the connection that was opened (on the loop's thread); it owns it from then on.
    private let adopt: (LibDBus.Connection) -> Void
    private let stopped = Atomic<Bool>(false)
    /// The process's loop, nil when none could be had.
    private let loop: EventLoop?
    private var watches: [InotifyHub.Watch] = []
    private var delay: UInt64 = 10
    /// When the next attempt is due (monotonic milliseconds); nil while none is planned.
    private var nextAttempt: UInt64?

    /// Opens a connection to `address` as soon as it can be opened and gives it to `adopt`,
    /// starting at once. When no loop can be had (no epoll or eventfd left) it logs why and
    /// does nothing.
    init(address: BusAddress, logger: Logger, adopt: @escaping (LibDBus.Connection) -> Void) {
        self.address = address
        self.logger = logger
        self.adopt = adopt
        do throws(SystemFailure) {
            loop = try ProcessRuntime.shared.loop.join()
        } catch {
            logger.error("cannot wait for the bus at \(address.rawValue): \(error)")
            loop = nil
            return
        }
        loop?.attach(self)
    }

    /// Waits, without blocking anyone, for a bus that cannot be reached yet: calls `reachable`
    /// once (on the process's loop: it must return quickly) as soon as a connection to the
    /// address can be opened (that connection is closed again), until cancelled.
    package convenience init(address: BusAddress, logger: Logger, reachable: @escaping @Sendable () -> Void) {
        self.init(address: address, logger: logger) { (connection: LibDBus.Connection) in
            connection.closeAndRelease()
            reachable()
        }
    }

    /// Stops trying; no connection is handed over after the loop has seen it. Calling it again
    /// does nothing.
    package func cancel() {
        if stopped.exchange(true, ordering: .acquiringAndReleasing) { return }
        guard let loop else { return }
        ProcessRuntime.shared.loop.detach(self, from: loop)
    }

    package func loopStarted() {
        watchSocketDirectories()
        attempt()
    }

    package func loopStopped() {
        stopped.store(true, ordering: .releasing)
        watches = []  // released: unwatched
        nextAttempt = nil
    }

    package func timeoutMilliseconds() -> Int32 {
        guard let due = nextAttempt else { return -1 }
        let now = EventLoop.nowMilliseconds()
        return due <= now ? 0 : Int32(clamping: due - now)
    }

    package func beforeJobs() {
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
            cancel()
            adopt(connection)
        } catch {
            logger.debug("reconnect attempt failed; retrying in \(delay) ms or when the socket appears: \(error)")
            nextAttempt = EventLoop.nowMilliseconds() + delay
            delay = min(delay * 2, 2_000)
        }
    }
}

/// Waiting for a bus that is not there yet, without blocking anyone (``Reconnector``): for a
/// `unix:path=` address the socket's directory is watched with inotify; other addresses are
/// tried after a backoff of 10 ms doubling to 2 s. ``Reconnector/cancel()`` stops waiting.
package typealias BusArrivalWatch = Reconnector

/// Waiting for a bus that is not there yet.
package enum BusWait {
    /// Blocks until a connection to `address` can be opened (the connection is then closed),
    /// at most until `deadline`: for a `unix:path=` address as soon as its socket appears
    /// (inotify), otherwise after a backoff of 10 ms doubling to 2 s, as a connection does when
    /// it reconnects. Whether it can be reached.
    @discardableResult
    package static func untilReachable(_ address: BusAddress, deadline: DispatchTime) -> Bool {
        let reachable = BoundedWait<Void?>(nil)
        let watch = BusArrivalWatch(address: address, logger: Logger(label: "wormhole.dbus")) { reachable.answer(()) }
        defer { watch.cancel() }
        return reachable.answer(until: deadline) != nil
    }
}

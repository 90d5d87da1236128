import Dispatch
package import Logging
import Glibc

/// Brings a connection back after the bus daemon went away.
///
/// For `unix:path=` addresses it watches the socket's directory with inotify and tries
/// to connect as soon as the socket reappears, so a restarted daemon is found at once.
/// A daemon creates its socket a moment before it listens, and other transports
/// (abstract sockets, TCP) give no file to watch, so a failed attempt is also retried
/// after a backoff (10 ms, doubling, at most 2 s): no event exists to wait for there.
///
/// `@unchecked Sendable`: every mutable property is touched only on `queue`.
final class Reconnector: @unchecked Sendable {
    private let address: BusAddress
    private let logger: Logger
    /// Takes the connection that was opened (on `queue`); it owns it from then on.
    private let adopt: (LibDBus.Connection) -> Void
    private let queue = DispatchQueue(label: "wormhole-dbus-reconnect")
    private var sources: [any DispatchSourceRead] = []
    private var stopped = false
    private var delay = 0.01
    private var generation = 0

    /// Brings `io`'s connection back.
    convenience init(io: BusIO) {
        self.init(address: io.address, logger: io.logger) { connection in
            let handover = Handover(connection)
            // The new connection passes from this queue to the I/O thread, which owns it from then on.
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

    func start() {
        queue.async { [self] in
            watchSocketDirectories()
            attempt()
        }
    }

    func stop() {
        queue.async { [self] in
            stopped = true
            for source in sources { source.cancel() }
            sources = []
        }
    }

    private func watchSocketDirectories() {
        for path in address.unixSocketPaths {
            let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
            guard fd >= 0 else { continue }
            let mask = UInt32(IN_CREATE | IN_MOVED_TO | IN_ATTRIB)
            guard inotify_add_watch(fd, directory.isEmpty ? "/" : directory, mask) >= 0 else {
                Glibc.close(fd)
                continue
            }
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while Glibc.read(fd, &buffer, buffer.count) > 0 {}
                delay = 0.01
                attempt()
            }
            source.setCancelHandler { Glibc.close(fd) }
            source.resume()
            sources.append(source)
        }
    }

    private func attempt() {
        guard !stopped else { return }
        generation += 1
        do {
            // A restarted daemon has a new guid: the address's `guid=` (as `dbus-daemon
            // --print-address` and `dbus-launch` print it) would make libdbus refuse it forever.
            let connection = try LibDBus.Connection.open(address.withoutGUID)
            stopped = true
            for source in sources { source.cancel() }
            sources = []
            adopt(connection)
        } catch {
            logger.debug("reconnect attempt failed; retrying in \(Int(delay * 1000)) ms or when the socket appears: \(error)")
            let expected = generation
            queue.asyncAfter(deadline: .now() + delay) { [self] in
                if generation == expected { attempt() }
            }
            delay = min(delay * 2, 2.0)
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
/// (on a private queue) as soon as a connection to the address can be opened (that connection is
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

    /// Stops waiting; `reachable` is not called after the watch's queue has seen it.
    package func cancel() { reconnector.stop() }
}

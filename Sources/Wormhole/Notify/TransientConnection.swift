// SPDX-License-Identifier: Apache-2.0
import Logging
import Synchronization
import WormholeDBus
import WormholeSystem

/// A center's connection for transient messages (contract §7): the process's second connection
/// to the bus (shared like the first), made on first use, so that a transient receiver that stops
/// reading, which makes the bus stop reading its sender, holds up only this one.
final class TransientConnection: Sendable {
    /// The center's first connection: the one a send falls back to while this one is being made.
    private let first: BusConnection
    /// The center's runtime, whose shared connections it is made in.
    private let runtime: WormholeRuntime
    private let logger: Logger
    private let held = Locked<BusConnection?>(nil)
    /// The connection is being made off the loop.
    private let opening = Atomic<Bool>(false)
    /// ``close()`` was called: no connection is made after it.
    private let closed = Atomic<Bool>(false)

    init(first: BusConnection, runtime: WormholeRuntime, logger: Logger) {
        self.first = first
        self.runtime = runtime
        self.logger = logger
    }

    /// The connection, when it was made.
    var current: BusConnection? { held.withLock { $0 } }

    /// How many transient messages this process refused because the connection's outgoing queue
    /// was full.
    var refusedMessages: UInt64 { held.withLock { $0?.refusedSignals ?? 0 } }

    /// The connection to send on, made now when there is none.
    ///
    /// Connecting waits for the process's loop; on the loop's own thread (a transient message
    /// sent from an `.ioThread` handler, such as a reply) that wait could never end, so the first
    /// such send goes on the first connection and this one is made off the loop for the next.
    func sender() throws -> BusConnection {
        // The lock is never held while connecting: the loop's thread may take it.
        if let connection = current { return connection }
        // Closed: the first connection (closed too) says so when used.
        if closed.load(ordering: .acquiring) { return first }
        if first.isOnIOThread {
            openOffTheLoop()
            return first
        }
        let made = try BusConnection.shared(
            address: first.address, purpose: .transient, in: runtime.connections, logger: logger)
        let (kept, extra) = held.withLock { held -> (BusConnection, BusConnection?) in
            if let held { return (held, made) }
            // Closed meanwhile: not kept (the closed first connection answers the send).
            if closed.load(ordering: .acquiring) { return (first, made) }
            held = made
            return (made, nil)
        }
        if let extra {
            extra.close()  // another thread made one meanwhile: one handle of the same connection
        } else {
            runtime.ownConnections.insert(made, for: ObjectIdentifier(made))
        }
        return kept
    }

    /// Makes the connection on the process's work pool (once at a time).
    private func openOffTheLoop() {
        if opening.exchange(true, ordering: .acquiringAndReleasing) { return }
        ProcessRuntime.shared.pool.submit { [weak self] in
            guard let self else { return }
            do {
                _ = try sender()
            } catch {
                logger.info("cannot open the transient connection yet: \(error)")
            }
            opening.store(false, ordering: .releasing)
        }
    }

    /// Closes it (the center closes); none is made after this.
    func close() {
        closed.store(true, ordering: .releasing)
        guard
            let connection = held.withLock({ held in
                defer { held = nil }
                return held
            })
        else { return }
        runtime.ownConnections.remove(ObjectIdentifier(connection))
        connection.close()
    }
}

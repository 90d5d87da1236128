// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Logging
import Synchronization
import WormholeSystem

/// How a signal joins a connection's outgoing queue when it cannot be written at once (the
/// socket is full; ``BusConnection/emit(_:policy:)``).
package enum SendPolicy: Sendable {
    /// Queued when it fits; refused (``BusError/Code/queueFull``) at once otherwise.
    case plain
    /// Replaces the queued signal with the same key (a `Posted` signal for one name: the latest
    /// carries the state); refused at once when it does not fit even so.
    case replacing(key: String)
    /// Waits at most `wait` for room, then is refused (a transient message). Once a wait ran
    /// out, later ones are refused at once until the queue moves again (a stopped receiver
    /// holding up the bus costs each call nothing).
    case refusable(wait: Duration)
}

/// The sending side of one connection: the bounded outgoing queue's policies, the one send path
/// (the loop's owner writes, on the loop's thread or on a sender's that took it with `trylock`), the waits for room, and handing queued
/// messages to libdbus on the loop.
///
/// The queue itself is in the connection's locked state (``BusIO/Shared``), beside whether the
/// connection is up and stopping, which a sender checks under the same lock as it appends.
/// Which thread may call what: <doc:Threading>.
final class BusOutgoing: @unchecked Sendable {
    /// The libdbus connection and its phase, the logger and the errors.
    private let link: BusLink
    /// The connection's loop and locked state (the queue, and whether it is up and stopping).
    private let loop: EventLoop
    private let shared: Locked<BusIO.Shared>
    /// Set once the connection left the loop, which takes no more of its jobs.
    private let detached = Atomic<Bool>(false)

    /// The most bytes the outgoing queue holds (``BusConnection/defaultOutgoingLimit``).
    let limit: Int
    /// How many bytes libdbus may hold unwritten before new messages wait in the outgoing
    /// queue instead (where they can be replaced or refused): what the socket did not take.
    static let libdbusHighWater = 256 * 1024
    /// Messages refused because the outgoing queue was full.
    let refused = Atomic<UInt64>(0)
    /// Signals `send` accepted (written or queued); ``BusConfirmations`` counts those the bus
    /// confirmed.
    let accepted = Atomic<UInt64>(0)
    /// Serialises senders on other threads among themselves (see `send`).
    private let emitting = PThreadMutex()
    /// How many times the loop made room in the queue: senders waiting for room
    /// (``SendPolicy/refusable(wait:)``) wait for it to move on.
    private let roomMade = BoundedWait<UInt64>(0)

    init(link: BusLink, limit: Int) {
        self.link = link
        self.limit = limit
        loop = link.loop
        shared = link.shared
    }

    /// Queues `job` on the loop unless the connection left it (the loop is the process's, and
    /// runs on for the other connections); false, and `job` never runs, when it did. The signals
    /// queued before it are written before it runs, those queued after it only once it ran
    /// (``OutgoingQueue``).
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

    /// The connection leaves the loop: no job is taken from now on. Whether this call was the first.
    func leaveLoop() -> Bool { !detached.exchange(true, ordering: .acquiringAndReleasing) }

    private enum Attempt { case sent, full }

    /// Sends a message of about `bytes` bytes (its size on the wire, for the bounded queue).
    ///
    /// One path on every thread: the sender that owns the loop (the loop's own thread, or
    /// another whose `trylock` on its ownership found it asleep) writes when nothing waits
    /// before it; any other joins the outgoing queue, which holds at most ``limit`` bytes. Either
    /// way the connection must be up and greeted (a message written before `Hello` is answered
    /// would be the bus's first and end the connection). libdbus itself is given at most
    /// ``libdbusHighWater`` bytes beyond what the socket took: the rest waits in the queue, where
    /// `policy` may replace an older message or refuse this one.
    ///
    /// `onAccepted` runs once the connection has taken the message (it will be
    /// written, in order) and before it is written: a write that follows cannot fail (libdbus's
    /// preallocated send). It does not run when `send` throws.
    ///
    /// Throws `disconnected` while the connection is down, greeting the bus or closed,
    /// `queueFull` when the queue cannot take the message (for `.refusable`, after waiting at
    /// most its bound; on the loop's thread at once: it cannot wait for itself).
    func send(
        _ message: LibDBus.Message, bytes: Int, policy: SendPolicy = .plain, onAccepted: () -> Void = {}
    ) throws(BusError) {
        let key: String? = if case .replacing(let key) = policy { key } else { nil }
        let onLoop = loop.inEventLoop
        let deadline: DispatchTime? =
            if !onLoop, case .refusable(let wait) = policy { ExitDrain.deadline(after: wait) } else { nil }
        while true {
            switch try attemptSend(message, bytes: bytes, key: key, onLoop: onLoop, onAccepted: onAccepted) {
            case .sent: return
            case .full:
                guard let deadline else { throw refuse(bytes) }
                try waitForRoom(until: deadline, bytes: bytes)
            }
        }
    }

    /// One try of `send`: written by the loop's owner, else queued for it.
    private func attemptSend(
        _ message: LibDBus.Message, bytes: Int, key: String?, onLoop: Bool, onAccepted: () -> Void
    ) throws(BusError) -> Attempt {
        // The loop's thread owns the loop already.
        if onLoop { return try writeAsOwner(message, bytes: bytes, key: key, onAccepted: onAccepted) }
        // Senders on other threads take turns among themselves (never behind the reader): one at
        // a time builds up the queue or writes, which paces many posting threads to what the
        // socket takes instead of letting them outrun the one writer (libdbus's own lock did
        // this before).
        emitting.lock()
        defer { emitting.unlock() }
        if loop.tryTakeOwnership() {
            defer { loop.releaseOwnership() }
            return try writeAsOwner(message, bytes: bytes, key: key, onAccepted: onAccepted)
        }
        guard let wasEmpty = try enqueue(message, bytes: bytes, key: key) else { return .full }
        onAccepted()
        if wasEmpty { loop.wake() }
        return .sent
    }

    /// Writes `message` as the loop's owner when nothing waits before it and libdbus holds little;
    /// otherwise queues it, for the loop to write once the socket takes more. Owner only.
    private func writeAsOwner(
        _ message: LibDBus.Message, bytes: Int, key: String?, onAccepted: () -> Void
    ) throws(BusError) -> Attempt {
        // What other threads queued first goes first: a thread's own posts stay in order.
        pump()
        let direct = try shared.withLock { state throws(BusError) -> Bool in
            if state.stopping { throw link.closedError() }
            if !state.connected { throw link.notConnected() }
            return state.outgoing.isEmpty && !state.outgoing.hasPendingJobs
        }
        guard let connection = link.greeted else { throw link.notConnected() }
        if direct {
            if connection.outgoingSize < Self.libdbusHighWater {
                guard let slot = connection.preallocateSend() else {
                    throw BusError(.outOfMemory, "libdbus could not queue a message")
                }
                accepted.add(1, ordering: .releasing)
                onAccepted()
                connection.send(message, preallocated: slot)
                return .sent
            }
            shared.withLock { $0.congested = true }
        }
        // libdbus holds enough (the socket is full) or jobs wait first: the loop writes it when
        // the socket takes more (libdbus watches it for writing meanwhile).
        if try enqueue(message, bytes: bytes, key: key) == nil { return .full }
        onAccepted()
        return .sent
    }

    /// Appends to the outgoing queue: whether it was empty before, or `nil` when it is full.
    private func enqueue(_ message: LibDBus.Message, bytes: Int, key: String?) throws(BusError) -> Bool? {
        let wasEmpty = try shared.withLock { state throws(BusError) -> Bool? in
            if state.stopping { throw link.closedError() }
            if !state.connected { throw link.notConnected() }
            let wasEmpty = state.outgoing.isEmpty
            return state.outgoing.append(message, bytes: bytes, key: key, replacing: state.congested) ? wasEmpty : nil
        }
        // Counted once queued: a confirmation that reads the count first drains the queue after.
        if wasEmpty != nil { accepted.add(1, ordering: .releasing) }
        return wasEmpty
    }

    /// Waits until the loop wrote some of the queue, at most until `deadline`; throws
    /// `queueFull` when the wait runs out, or at once while the queue is known to be stuck.
    private func waitForRoom(until deadline: DispatchTime, bytes: Int) throws(BusError) {
        // Read first: room made after this is waited for, even when made before the wait starts.
        let seen = roomMade.read { $0 }
        let outcome = shared.withLock { state -> Bool? in
            if state.stalled { return false }
            // The loop may have written since the attempt: try again at once.
            if state.outgoing.fits(bytes, key: nil) { return true }
            return nil
        }
        if outcome == false { throw refuse(bytes) }
        if outcome == true { return }
        if roomMade.wait(until: deadline, for: { $0 != seen ? true : nil }) == nil {
            shared.withLock { $0.stalled = true }
            throw refuse(bytes)
        }
    }

    /// Counts and reports a message the queue could not take.
    private func refuse(_ bytes: Int) -> BusError {
        refused.add(1, ordering: .relaxed)
        let address = link.address.rawValue
        return BusError(
            .queueFull, value: address,
            "not sent: the outgoing queue to the bus at \(quoted(address)) is full (\(limit) bytes; "
                + "a receiver or the bus is not reading), so this \(bytes)-byte message was refused")
    }

    /// Hands queued messages to libdbus while it holds less than ``libdbusHighWater`` bytes
    /// (libdbus writes what the socket takes at once), and wakes senders waiting for room.
    /// Owner only.
    func pump() {
        loop.assertOwned()
        guard let connection = link.connection else { return }
        // The common case costs one lock: nothing waits, and the socket took everything.
        if shared.withLock({ $0.outgoing.isEmpty && !$0.congested }) { return }
        var moved = false
        var congested = false
        while true {
            let room = Self.libdbusHighWater - connection.outgoingSize
            if room <= 0 {
                congested = true
                break
            }
            let batch = shared.withLock { $0.outgoing.take(maximumBytes: room) }
            if batch.isEmpty { break }
            moved = true
            for message in batch where !connection.send(message) {
                link.logger.error("libdbus could not queue a signal (out of memory); it was dropped")
            }
        }
        shared.withLock { $0.congested = congested }
        if moved { wakeRoomWaiters() }
    }

    /// Wakes the senders waiting for room (they try again).
    func wakeRoomWaiters() {
        shared.withLock { $0.stalled = false }
        roomMade.change { $0 &+= 1 }
    }

    /// A job queued through ``BusIO/execute(_:)`` is about to run: the messages queued before it
    /// are handed to libdbus first, whatever it holds (they were accepted before the job). Owner
    /// only.
    func writeBeforeJob() {
        loop.assertOwned()
        let messages = shared.withLock { $0.outgoing.takeBeforeJob() }
        write(messages)
    }

    /// Hands everything queued that may go (nothing after a job that has not run) to libdbus,
    /// whatever it holds: before a confirmation and at exit. Owner only.
    func drain() {
        loop.assertOwned()
        write(shared.withLock { $0.outgoing.take(maximumBytes: .max) })
    }

    private func write(_ messages: [LibDBus.Message]) {
        guard !messages.isEmpty else { return }
        defer { wakeRoomWaiters() }
        guard let connection = link.connection else {
            link.logger.warning(
                "dropped \(messages.count) queued signal(s): the bus went away before they were written")
            return
        }
        for message in messages where !connection.send(message) {
            link.logger.error("libdbus could not queue a signal (out of memory); it was dropped")
        }
    }

    /// Empties the queue when the connection is gone (`connected` false from now on) and wakes
    /// the senders waiting for room; returns how many messages were dropped and whether the
    /// connection is stopping. Loop-confined.
    func dropAll() -> (dropped: Int, stopping: Bool) {
        let result = shared.withLock { state -> (Int, Bool) in
            state.connected = false
            return (state.outgoing.removeAll(), state.stopping)
        }
        wakeRoomWaiters()
        return result
    }
}

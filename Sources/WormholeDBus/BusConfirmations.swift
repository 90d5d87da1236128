// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Logging
import Synchronization
import WormholeSystem

/// Confirmation by the bus of the signals one connection accepted: ``BusConnection/flush(timeout:)``,
/// its form without a waiting thread, the confirmation before a close, and this connection's part
/// of the drain at exit (``ExitDrain``).
///
/// A confirmation writes what is queued, then calls `GetNameOwner` of the connection's own name:
/// once the bus answered, every signal accepted before is on the bus (a proxy on the way passes
/// on what came before it). Only when signals are unconfirmed: a connection that sent nothing
/// pays nothing. Which thread may call what: <doc:Threading>.
final class BusConfirmations: @unchecked Sendable {
    /// The libdbus connection and its phase, the loop, the locked state, logger and errors.
    private let link: BusLink
    /// The sending side: what it accepted, its queue to drain, and the jobs on the loop.
    private let outgoing: BusOutgoing
    /// Answered once, when the loop has stopped (the drain at exit waits for a closing connection).
    private let stopped = BoundedWait<Void?>(nil)

    init(link: BusLink, outgoing: BusOutgoing) {
        self.link = link
        self.outgoing = outgoing
    }

    /// The connection's loop has stopped: a drain at exit waiting for it goes on.
    func loopStopped() { stopped.answer(()) }

    /// How many of the accepted signals (``BusOutgoing/accepted``) the bus has confirmed.
    private let confirmedSignals = Atomic<UInt64>(0)
    /// Accepted signals were dropped because the bus went away; the next flush reports it.
    private let lostSignals = Atomic<Bool>(false)
    /// Confirmations waiting for the bus's answer (``confirmOnLoop(target:deadline:completion:)``),
    /// by id: a connection that goes away fails them (libdbus forgets its pending calls on close).
    /// Loop-confined.
    private var waiting: [UInt64: (BusError?) -> Void] = [:]

    /// How long closing may wait for the bus to confirm the signals it accepted.
    static let closeBound: Duration = .seconds(2)

    private var acceptedSignals: UInt64 { outgoing.accepted.load(ordering: .acquiring) }

    /// Whether signals were accepted that the bus has not confirmed yet.
    var hasUnconfirmedSignals: Bool { acceptedSignals > confirmedSignals.load(ordering: .acquiring) }

    /// Blocks until every signal accepted before the call is on the bus, at most `timeout`.
    /// Returns at once when nothing is unconfirmed. Returns the error when the bus did not
    /// answer in time, or went away and signals were dropped (logged when it happened). On the
    /// I/O thread the call waits on this thread (libdbus reads and writes the socket itself),
    /// within the same bound.
    func confirm(timeout: Duration) -> BusError? {
        let deadline = ExitDrain.deadline(after: timeout)
        if !hasUnconfirmedSignals {
            return lostSignals.exchange(false, ordering: .acquiringAndReleasing) ? droppedError() : nil
        }
        if link.loop.inEventLoop { return confirmInline(deadline: deadline) }
        let outcome = BoundedWait<BusError??>(nil)
        let target = acceptedSignals
        let accepted = outgoing.execute { [self] in
            confirmOnLoop(target: target, deadline: deadline) { error in outcome.answer(error) }
        }
        guard accepted else { return link.closedError() }
        guard let result = outcome.answer(until: deadline) else {
            return BusError(
                .timedOut, value: link.address.rawValue,
                "the bus at \(quoted(link.address.rawValue)) did not confirm within \(timeout)")
        }
        if result == nil, lostSignals.exchange(false, ordering: .acquiringAndReleasing) { return droppedError() }
        return result
    }

    /// ``confirm(timeout:)`` without waiting: `completion` runs on the loop's thread once the
    /// bus answered (or the wait failed); false, and no call, when the connection was stopped.
    func confirmLater(timeout: Duration, completion: @escaping @Sendable (BusError?) -> Void) -> Bool {
        let deadline = ExitDrain.deadline(after: timeout)
        let target = acceptedSignals
        return outgoing.execute { [self] in
            confirmOnLoop(target: target, deadline: deadline) { [self] error in
                if error == nil, lostSignals.exchange(false, ordering: .acquiringAndReleasing) {
                    completion(droppedError())
                } else {
                    completion(error)
                }
            }
        }
    }

    /// Confirms before the connection leaves the loop (``BusIO/stop()``), at most ``closeBound``,
    /// then runs `then` on the loop; false, and no call, when the job could not be queued.
    func confirmBeforeClosing(then: @escaping @Sendable () -> Void) -> Bool {
        let deadline = ExitDrain.deadline(after: Self.closeBound)
        let target = acceptedSignals
        return outgoing.execute { [self] in
            confirmOnLoop(target: target, deadline: deadline) { [self] error in
                if let error { link.logger.warning("closing: signals may not have reached the bus: \(error.message)") }
                then()
            }
        }
    }

    /// Writes what is queued, then calls `GetNameOwner` of our own name; `completion` gets `nil`
    /// once the bus answered (every signal accepted before is then confirmed). Loop-confined.
    ///
    /// `target` is the count of accepted signals read before the job was queued: each of them
    /// was queued before the job, so written before it runs (``BusOutgoing/writeBeforeJob()``),
    /// while signals accepted later may still wait in the queue behind a full socket.
    private func confirmOnLoop(target: UInt64, deadline: DispatchTime, completion: @escaping (BusError?) -> Void) {
        link.loop.assertInEventLoop()
        outgoing.drain()
        guard let connection = link.greeted else {
            completion(link.notConnected())
            return
        }
        let message: LibDBus.Message
        do {
            message = try MessageCoding.makeBusCall("GetNameOwner", arguments: [.string(connection.uniqueName)])
        } catch {
            completion(error)
            return
        }
        let id = link.makeID()
        waiting[id] = completion
        let sent = connection.call(message, timeoutMilliseconds: ExitDrain.milliseconds(until: deadline)) {
            [self] reply in
            guard let completion = waiting.removeValue(forKey: id) else { return }
            if let reply, !Self.isLocalFailure(reply) {
                confirmed(upTo: target)
                completion(nil)
            } else {
                completion(noAnswer())
            }
        }
        if !sent, let completion = waiting.removeValue(forKey: id) { completion(link.notConnected()) }
    }

    /// ``confirmOnLoop(target:deadline:completion:)`` waiting on the I/O thread itself. Loop-confined.
    private func confirmInline(deadline: DispatchTime) -> BusError? {
        link.loop.assertInEventLoop()
        let target = acceptedSignals
        outgoing.drain()
        guard let connection = link.greeted else { return link.notConnected() }
        guard let message = try? MessageCoding.makeBusCall("GetNameOwner", arguments: [.string(connection.uniqueName)])
        else {
            return BusError(.outOfMemory, "libdbus could not build a call")
        }
        guard
            let reply = connection.callBlocking(message, timeoutMilliseconds: ExitDrain.milliseconds(until: deadline)),
            !Self.isLocalFailure(reply)
        else {
            return noAnswer()
        }
        confirmed(upTo: target)
        return nil
    }

    /// An answer libdbus made up itself (no reply in time, or the connection closed), not the bus's.
    private static func isLocalFailure(_ reply: LibDBus.Message) -> Bool {
        guard let error = MessageCoding.readError(reply) else { return false }
        return error.name == "org.freedesktop.DBus.Error.NoReply"
            || error.name == "org.freedesktop.DBus.Error.Disconnected"
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

    /// The connection is gone: signals accepted and not yet confirmed were dropped with it
    /// (remembered for the next flush, and no longer waited for), and every confirmation waiting
    /// for an answer fails. Loop-confined.
    func connectionLost() {
        forgetUnconfirmed()
        failWaiting()
    }

    /// Signals accepted and not yet confirmed were dropped with the connection: remembered for
    /// the next flush, and no longer waited for. Loop-confined.
    func forgetUnconfirmed() {
        link.loop.assertInEventLoop()
        let accepted = acceptedSignals
        if accepted > confirmedSignals.load(ordering: .acquiring) {
            lostSignals.store(true, ordering: .releasing)
            confirmed(upTo: accepted)
        }
    }

    /// Fails every confirmation waiting for an answer: the connection is gone. Loop-confined.
    func failWaiting() {
        link.loop.assertInEventLoop()
        let all = waiting
        waiting = [:]
        for completion in all.values { completion(droppedError()) }
    }

    /// At exit (``ExitDrain/run()``): starts confirming what this connection accepted and returns
    /// how to wait for it (true: confirmed), or `nil` when there is nothing to wait for. A closing
    /// connection is waited for until its loop stops. On the I/O thread it confirms at once.
    func beginExitDrain(deadline: DispatchTime) -> (() -> Bool)? {
        let (stopping, connected) = link.shared.withLock { ($0.stopping, $0.connected) }
        let logger = link.logger
        if stopping && link.loop.inEventLoop {
            // An exit on the loop's thread: the loop cannot finish the closing; confirm here.
            if connected && hasUnconfirmedSignals, let error = confirmInline(deadline: deadline) {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
            }
            return nil
        }
        if stopping {
            return { [stopped] in
                if stopped.answer(until: deadline) == nil {
                    logger.warning("exiting: a closing connection's signals were not confirmed by the bus in time")
                    return false
                }
                return true
            }
        }
        guard connected, hasUnconfirmedSignals else { return nil }
        if link.loop.inEventLoop {
            if let error = confirmInline(deadline: deadline) {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
            }
            return nil
        }
        let outcome = BoundedWait<BusError??>(nil)
        let target = acceptedSignals
        let accepted = outgoing.execute { [self] in
            confirmOnLoop(target: target, deadline: deadline) { error in outcome.answer(error) }
        }
        guard accepted else { return nil }
        let address = link.address.rawValue
        return {
            guard let failure = outcome.answer(until: deadline) else {
                logger.warning(
                    "exiting: signals may not have reached the bus at \(quoted(address)): it did not answer within the exit drain's bound"
                )
                return false
            }
            if let error = failure {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
                return false
            }
            return true
        }
    }

    private func droppedError() -> BusError {
        BusError(
            .disconnected, value: link.address.rawValue,
            "signals were dropped: the bus at \(quoted(link.address.rawValue)) went away before it confirmed them")
    }

    private func noAnswer() -> BusError {
        BusError(
            .timedOut, value: link.address.rawValue,
            "the bus at \(quoted(link.address.rawValue)) did not answer in time")
    }
}

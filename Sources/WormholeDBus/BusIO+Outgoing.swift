import Dispatch
import Logging
import Synchronization
import WormholeSystem

/// Sending: the outgoing queue, the trylock fast path on which a sender writes on its own
/// thread, confirmation by the bus (`flush`), the drain at exit and the bounded close.
/// Which thread may call what: <doc:Threading>.
extension BusIO {
    // MARK: Sending

    /// Sends a message of about `bytes` bytes (its size on the wire, for the bounded queue).
    ///
    /// Off the loop, when the loop is asleep (`trylock` on its ownership) and nothing waits
    /// before it, the message is written on the caller's thread; otherwise it joins the
    /// outgoing queue, which holds at most ``outgoingLimit`` bytes. On the loop's thread it is
    /// written at once when nothing waits before it. libdbus itself is given at most
    /// ``libdbusHighWater`` bytes beyond what the socket took: the rest waits in the queue,
    /// where `policy` may replace an older message or refuse this one.
    ///
    /// Throws `disconnected` while the connection is down or closed, `queueFull` when the
    /// queue cannot take the message (for `.refusable`, after waiting at most its bound).
    func send(_ message: LibDBus.Message, bytes: Int, policy: SendPolicy = .plain) throws(BusError) {
        let key: String? = if case .replacing(let key) = policy { key } else { nil }
        if loop.inEventLoop {
            pumpOutgoing()
            let direct = try shared.withLock { state throws(BusError) -> Bool in
                if state.stopping { throw closedError() }
                return state.outgoing.isEmpty && !state.outgoing.hasPendingJobs
            }
            guard let connection else { throw notConnected() }
            if direct {
                if connection.outgoingSize < Self.libdbusHighWater {
                    if !connection.send(message) { throw BusError(.outOfMemory, "libdbus could not queue a message") }
                    acceptedSignals.add(1, ordering: .releasing)
                    return
                }
                shared.withLock { $0.congested = true }
            }
            // Written by the loop once the socket takes more (it cannot wait for itself).
            if try enqueue(message, bytes: bytes, key: key) == nil { throw refuse(bytes) }
            return
        }
        let deadline: DispatchTime? =
            if case .refusable(let wait) = policy { ExitDrain.deadline(after: wait) } else { nil }
        while true {
            switch try attemptSend(message, bytes: bytes, key: key) {
            case .sent: return
            case .full:
                guard let deadline else { throw refuse(bytes) }
                try waitForRoom(until: deadline, bytes: bytes)
            }
        }
    }

    /// How a message joins the outgoing queue when it cannot be written at once.
    enum SendPolicy {
        /// Queued when it fits; refused (``BusError/Code/queueFull``) at once otherwise.
        case plain
        /// Replaces the queued message with the same key (a `Posted` signal for one name: the
        /// latest carries the state); refused at once when it does not fit even so.
        case replacing(key: String)
        /// Waits at most `wait` for room, then is refused. Once a wait ran out, later ones are
        /// refused at once until the queue moves again (a stopped receiver holding up the bus
        /// costs each call nothing).
        case refusable(wait: Duration)
    }

    enum Attempt { case sent, full }

    /// One try of `send` on another thread than the loop's.
    private func attemptSend(_ message: LibDBus.Message, bytes: Int, key: String?) throws(BusError) -> Attempt {
        // Senders take turns among themselves (never behind the reader): one at a time builds
        // up the queue or writes, which paces many posting threads to what the socket takes
        // instead of letting them outrun the one writer (libdbus's own lock did this before).
        emitting.lock()
        defer { emitting.unlock() }
        if loop.tryTakeOwnership() {
            defer { loop.releaseOwnership() }
            // What other threads queued first goes first: a thread's own posts stay in order.
            pumpOutgoing()
            let direct = try shared.withLock { state throws(BusError) -> Bool in
                if state.stopping { throw closedError() }
                if !state.connected { throw notConnected() }
                return state.outgoing.isEmpty && !state.outgoing.hasPendingJobs
            }
            guard let connection, case .ready = phase else { throw notConnected() }
            if direct {
                if connection.outgoingSize < Self.libdbusHighWater {
                    if !connection.send(message) { throw BusError(.outOfMemory, "libdbus could not queue a message") }
                    acceptedSignals.add(1, ordering: .releasing)
                    return .sent
                }
                shared.withLock { $0.congested = true }
            }
            // libdbus holds enough (the socket is full) or jobs wait first: the loop writes it
            // when the socket takes more (libdbus watches it for writing meanwhile).
            return try enqueue(message, bytes: bytes, key: key) == nil ? .full : .sent
        }
        guard let wasEmpty = try enqueue(message, bytes: bytes, key: key) else { return .full }
        if wasEmpty { loop.wake() }
        return .sent
    }

    /// Appends to the outgoing queue: whether it was empty before, or `nil` when it is full.
    private func enqueue(_ message: LibDBus.Message, bytes: Int, key: String?) throws(BusError) -> Bool? {
        let wasEmpty = try shared.withLock { state throws(BusError) -> Bool? in
            if state.stopping { throw closedError() }
            if !state.connected { throw notConnected() }
            let wasEmpty = state.outgoing.isEmpty
            return state.outgoing.append(message, bytes: bytes, key: key, replacing: state.congested) ? wasEmpty : nil
        }
        // Counted once queued: a confirmation that reads the count first drains the queue after.
        if wasEmpty != nil { acceptedSignals.add(1, ordering: .releasing) }
        return wasEmpty
    }

    /// Waits until the loop wrote some of the queue, at most until `deadline`; throws
    /// `queueFull` when the wait runs out, or at once while the queue is known to be stuck.
    private func waitForRoom(until deadline: DispatchTime, bytes: Int) throws(BusError) {
        let room = DispatchSemaphore(value: 0)
        let outcome = shared.withLock { state -> Bool? in
            if state.stalled { return false }
            // The loop may have written since the attempt: try again at once.
            if state.outgoing.fits(bytes, key: nil) { return true }
            state.roomWaiters.append(room)
            return nil
        }
        if outcome == false { throw refuse(bytes) }
        if outcome == true { return }
        if room.wait(timeout: deadline) == .timedOut {
            shared.withLock { state in
                state.stalled = true
                state.roomWaiters.removeAll { $0 === room }
            }
            throw refuse(bytes)
        }
    }

    /// Counts and reports a message the queue could not take.
    private func refuse(_ bytes: Int) -> BusError {
        refusedSignals.add(1, ordering: .relaxed)
        return BusError(
            .queueFull, value: address.rawValue,
            "not sent: the outgoing queue to the bus at \(quoted(address.rawValue)) is full (\(outgoingLimit) bytes; "
                + "a receiver or the bus is not reading), so this \(bytes)-byte message was refused")
    }

    /// Hands queued messages to libdbus while it holds less than ``libdbusHighWater`` bytes
    /// (libdbus writes what the socket takes at once), and wakes senders waiting for room.
    /// Owner only.
    func pumpOutgoing() {
        loop.assertOwned()
        guard let connection else { return }
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
                logger.error("libdbus could not queue a signal (out of memory); it was dropped")
            }
        }
        shared.withLock { $0.congested = congested }
        if moved { wakeRoomWaiters() }
    }

    /// Wakes the senders waiting for room (they try again).
    func wakeRoomWaiters() {
        let waiters = shared.withLock { state -> [DispatchSemaphore] in
            state.stalled = false
            defer { state.roomWaiters = [] }
            return state.roomWaiters
        }
        for waiter in waiters { waiter.signal() }
    }

    /// A job queued through ``execute(_:)`` is about to run: the messages queued before it are
    /// handed to libdbus first, whatever it holds (they were accepted before the job). Owner only.
    func writeBeforeJob() {
        loop.assertOwned()
        let messages = shared.withLock { $0.outgoing.takeBeforeJob() }
        write(messages)
    }

    /// Hands everything queued that may go (nothing after a job that has not run) to libdbus,
    /// whatever it holds: before a confirmation and at exit. Owner only.
    func drainOutgoing() {
        loop.assertOwned()
        write(shared.withLock { $0.outgoing.take(maximumBytes: .max) })
    }

    private func write(_ messages: [LibDBus.Message]) {
        guard !messages.isEmpty else { return }
        defer { wakeRoomWaiters() }
        guard let connection else {
            logger.warning("dropped \(messages.count) queued signal(s): the bus went away before they were written")
            return
        }
        for message in messages where !connection.send(message) {
            logger.error("libdbus could not queue a signal (out of memory); it was dropped")
        }
    }

    /// Whether signals were accepted that the bus has not confirmed yet.
    var hasUnconfirmedSignals: Bool {
        acceptedSignals.load(ordering: .acquiring) > confirmedSignals.load(ordering: .acquiring)
    }

    /// Blocks until every signal accepted before the call is on the bus: written, and followed by
    /// one call the bus answered (`GetNameOwner` of our own name: a proxy on the way passes on
    /// what came before it), at most `timeout`. Returns at once when nothing is unconfirmed.
    /// Returns the error when the bus did not answer in time, or went away and signals were
    /// dropped (logged when it happened). On the I/O thread the call waits on this thread
    /// (libdbus reads and writes the socket itself), within the same bound.
    func confirm(timeout: Duration) -> BusError? {
        let deadline = ExitDrain.deadline(after: timeout)
        if !hasUnconfirmedSignals {
            return lostSignals.exchange(false, ordering: .acquiringAndReleasing) ? droppedError() : nil
        }
        if loop.inEventLoop { return confirmInline(deadline: deadline) }
        let outcome = Locked<BusError??>(nil)
        let done = DispatchSemaphore(value: 0)
        let target = acceptedSignals.load(ordering: .acquiring)
        let accepted = execute { [self] in
            confirmOnLoop(target: target, deadline: deadline) { error in
                outcome.withLock { $0 = .some(error) }
                done.signal()
            }
        }
        guard accepted else { return closedError() }
        if done.wait(timeout: deadline) == .timedOut {
            return timedOut(timeout)
        }
        let result = outcome.withLock { $0 } ?? nil
        if result == nil, lostSignals.exchange(false, ordering: .acquiringAndReleasing) { return droppedError() }
        return result
    }

    /// ``confirm(timeout:)`` without waiting: `completion` runs on the loop's thread once the
    /// bus answered (or the wait failed); false, and no call, when the connection was stopped.
    func confirmLater(timeout: Duration, completion: @escaping @Sendable (BusError?) -> Void) -> Bool {
        let deadline = ExitDrain.deadline(after: timeout)
        let target = acceptedSignals.load(ordering: .acquiring)
        return execute { [self] in
            confirmOnLoop(target: target, deadline: deadline) { [self] error in
                if error == nil, lostSignals.exchange(false, ordering: .acquiringAndReleasing) {
                    completion(droppedError())
                } else {
                    completion(error)
                }
            }
        }
    }

    /// Writes what is queued, then calls `GetNameOwner` of our own name; `completion` gets `nil`
    /// once the bus answered (every signal accepted before is then confirmed). Loop-confined.
    ///
    /// `target` is the count of accepted signals read before the job was queued: each of them
    /// was queued before the job, so written before it runs (``writeBeforeJob()``), while
    /// signals accepted later may still wait in the queue behind a full socket.
    func confirmOnLoop(target: UInt64, deadline: DispatchTime, completion: @escaping (BusError?) -> Void) {
        loop.assertInEventLoop()
        drainOutgoing()
        guard let connection, case .ready = phase else {
            completion(notConnected())
            return
        }
        let message: LibDBus.Message
        do {
            message = try MessageCoding.makeBusCall("GetNameOwner", arguments: [.string(connection.uniqueName)])
        } catch {
            completion(error)
            return
        }
        let id = makeID()
        confirmations[id] = completion
        let sent = connection.call(message, timeoutMilliseconds: ExitDrain.milliseconds(until: deadline)) {
            [self] reply in
            guard let completion = confirmations.removeValue(forKey: id) else { return }
            if let reply, !Self.isLocalFailure(reply) {
                confirmed(upTo: target)
                completion(nil)
            } else {
                completion(
                    BusError(
                        .timedOut, value: address.rawValue,
                        "the bus at \(quoted(address.rawValue)) did not answer in time"))
            }
        }
        if !sent, let completion = confirmations.removeValue(forKey: id) { completion(notConnected()) }
    }

    /// Fails every confirmation waiting for an answer: the connection is gone. Loop-confined.
    func failConfirmations() {
        loop.assertInEventLoop()
        let waiting = confirmations
        confirmations = [:]
        for completion in waiting.values { completion(droppedError()) }
    }

    /// ``confirmOnLoop(deadline:completion:)`` waiting on the I/O thread itself. Loop-confined.
    func confirmInline(deadline: DispatchTime) -> BusError? {
        loop.assertInEventLoop()
        let target = acceptedSignals.load(ordering: .acquiring)
        drainOutgoing()
        guard let connection, case .ready = phase else { return notConnected() }
        guard let message = try? MessageCoding.makeBusCall("GetNameOwner", arguments: [.string(connection.uniqueName)])
        else {
            return BusError(.outOfMemory, "libdbus could not build a call")
        }
        guard
            let reply = connection.callBlocking(message, timeoutMilliseconds: ExitDrain.milliseconds(until: deadline)),
            !Self.isLocalFailure(reply)
        else {
            return BusError(
                .timedOut, value: address.rawValue, "the bus at \(quoted(address.rawValue)) did not answer in time")
        }
        confirmed(upTo: target)
        return nil
    }

    /// An answer libdbus made up itself (no reply in time, or the connection closed), not the bus's.
    static func isLocalFailure(_ reply: LibDBus.Message) -> Bool {
        guard let error = MessageCoding.readError(reply) else { return false }
        return error.name == "org.freedesktop.DBus.Error.NoReply"
            || error.name == "org.freedesktop.DBus.Error.Disconnected"
    }

    func confirmed(upTo target: UInt64) {
        var current = confirmedSignals.load(ordering: .relaxed)
        while current < target {
            let (exchanged, original) = confirmedSignals.compareExchange(
                expected: current, desired: target, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = original
        }
    }

    /// Signals accepted and not yet confirmed were dropped with the connection: remembered for
    /// the next flush, and no longer waited for. Loop-confined.
    func forgetUnconfirmed() {
        loop.assertInEventLoop()
        let accepted = acceptedSignals.load(ordering: .acquiring)
        if accepted > confirmedSignals.load(ordering: .acquiring) {
            lostSignals.store(true, ordering: .releasing)
            confirmed(upTo: accepted)
        }
    }

    /// At exit (``ExitDrain/run()``): starts confirming what this connection accepted and returns
    /// how to wait for it (true: confirmed), or `nil` when there is nothing to wait for. A closing
    /// connection is waited for until its loop stops. On the I/O thread it confirms at once.
    func beginExitDrain(deadline: DispatchTime) -> (() -> Bool)? {
        let (stopping, connected) = shared.withLock { ($0.stopping, $0.connected) }
        if stopping && loop.inEventLoop {
            // An exit on the loop's thread: the loop cannot finish the closing; confirm here.
            if connected && hasUnconfirmedSignals, let error = confirmInline(deadline: deadline) {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
            }
            return nil
        }
        if stopping {
            return { [self] in
                if stoppedSignal.wait(timeout: deadline) == .timedOut {
                    logger.warning("exiting: a closing connection's signals were not confirmed by the bus in time")
                    return false
                }
                stoppedSignal.signal()  // for anyone else waiting
                return true
            }
        }
        guard connected, hasUnconfirmedSignals else { return nil }
        if loop.inEventLoop {
            if let error = confirmInline(deadline: deadline) {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
            }
            return nil
        }
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<BusError?>(nil)
        let target = acceptedSignals.load(ordering: .acquiring)
        let accepted = execute { [self] in
            confirmOnLoop(target: target, deadline: deadline) { error in
                failure.withLock { $0 = error }
                done.signal()
            }
        }
        guard accepted else { return nil }
        return { [self] in
            if done.wait(timeout: deadline) == .timedOut {
                logger.warning(
                    "exiting: signals may not have reached the bus at \(quoted(address.rawValue)): it did not answer within the exit drain's bound"
                )
                return false
            }
            if let error = failure.withLock({ $0 }) {
                logger.warning("exiting: signals may not have reached the bus: \(error.message)")
                return false
            }
            return true
        }
    }

    /// How long closing may wait for the bus to confirm the signals it accepted.
    static let closeBound: Duration = .seconds(2)

    /// Detaches the connection from the process's loop (``detach()``); the connection is closed on
    /// the I/O thread and every route finished.
    /// Sending stops at once; signals accepted before and not yet confirmed are confirmed first
    /// (one call the bus answers, at most ``closeBound``), without the caller waiting: the drain
    /// at exit waits for it.
    func stop() {
        let (first, connected) = shared.withLock { state -> (Bool, Bool) in
            defer { state.stopping = true }
            return (!state.stopping, state.connected)
        }
        // A second call (a center's close, then its connection's deinit) changes nothing: the
        // first arranged the stop, at once or once the confirmation is done.
        guard first else { return }
        if connected && hasUnconfirmedSignals {
            let deadline = ExitDrain.deadline(after: Self.closeBound)
            let target = acceptedSignals.load(ordering: .acquiring)
            let queued = execute { [self] in
                confirmOnLoop(target: target, deadline: deadline) { [self] error in
                    if let error { logger.warning("closing: signals may not have reached the bus: \(error.message)") }
                    detach()
                }
            }
            if queued { return }
        }
        detach()
    }

    /// Detaches the connection from the process's loop: it is closed on the I/O thread and every
    /// route finished. Calling it again does nothing.
    func detach() {
        if detached.exchange(true, ordering: .acquiringAndReleasing) { return }
        ProcessRuntime.shared.loop.detach(self, from: loop)
    }
}

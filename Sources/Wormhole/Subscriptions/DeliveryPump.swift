import WormholeDBus
import WormholeSystem

/// The serial, coalescing delivery that every kind of subscription shares (mailbox listeners,
/// notification listeners, defaults listeners, journal listeners, transient messages).
///
/// A subscription records what is pending in its own state (mailboxes, notifications, keys, a
/// journal cursor) and calls ``PumpedDelivery/wake()``, from any thread, as often as it likes.
/// The pump turns those wakes into rounds of ``PumpedDelivery/drainPending()`` on the
/// subscription's executor:
/// - two rounds never overlap, whatever the executor (the I/O thread, a serial queue, a
///   concurrent queue, the main queue);
/// - wakes while a round runs cost nothing more than one more round after it, so a burst is
///   read once per round (the coalescing), and nothing recorded before a wake is left behind;
/// - no round starts once ``cancel()`` has returned (a round already running finishes its
///   current handler call; `drainPending` checks its own state between calls).
///
/// What to read and how to merge is each kind's own (its reader); when and where is the pump's.
final class DeliveryPump: Sendable {
    private struct State {
        var cancelled = false
        /// A round is queued or running, or a caller claimed the pump to deliver inline.
        var scheduled = false
        /// Woken since the current round started.
        var woken = false
    }

    /// Where rounds run: inline on the waking thread (`queue == nil`, the I/O thread) or on a queue.
    let executor: DeliveryExecutor
    private let state = Locked(State())

    init(executor: DeliveryExecutor) {
        self.executor = executor
    }

    /// Marks the pump woken; whether the caller must start a round (none is queued or running).
    fileprivate func markWoken() -> Bool {
        state.withLock { state in
            if state.cancelled { return false }
            state.woken = true
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
    }

    /// Claims an idle pump for a delivery the caller makes itself, on its own thread, before
    /// anything else (the fast path of a handler on the I/O thread that keeps up). After a
    /// successful claim the caller must call ``PumpedDelivery/finishClaim()``.
    func claim() -> Bool {
        state.withLock { state in
            if state.cancelled || state.scheduled { return false }
            state.scheduled = true
            return true
        }
    }

    /// Whether another round is due; if not, the pump is released (atomically with the check, so
    /// a wake that comes after it starts a new round).
    fileprivate func nextRound() -> Bool {
        state.withLock { state in
            if state.cancelled || !state.woken {
                state.scheduled = false
                return false
            }
            state.woken = false
            return true
        }
    }

    /// Stops the pump: no round starts after this returns. Whether it was already cancelled.
    func cancel() -> Bool {
        state.withLock { state in
            defer { state.cancelled = true }
            return state.cancelled
        }
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }
}

/// A subscription whose deliveries go through a ``DeliveryPump``.
protocol PumpedDelivery: AnyObject, Sendable {
    var pump: DeliveryPump { get }
    /// Reads what is pending and calls the handler for each delivery; runs on the pump's
    /// executor, never twice at once, and again when woken meanwhile.
    func drainPending()
}

extension PumpedDelivery {
    /// Something is pending: a round runs (inline, or queued on the executor) unless one is
    /// already queued or running, in which case that one is followed by another.
    func wake() {
        guard pump.markWoken() else { return }
        if pump.executor.queue == nil {
            runRounds()
        } else {
            pump.executor.run { self.runRounds() }
        }
    }

    /// Ends a delivery made after ``DeliveryPump/claim()``: runs the rounds woken meanwhile.
    func finishClaim() {
        runRounds()
    }

    private func runRounds() {
        while pump.nextRound() { drainPending() }
    }
}

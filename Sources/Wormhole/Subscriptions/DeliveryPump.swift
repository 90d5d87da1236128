// SPDX-License-Identifier: Apache-2.0
import WormholeDBus
import WormholeSystem

/// The serial, coalescing delivery that every kind of subscription shares (mailbox listeners,
/// notification listeners, defaults listeners, journal listeners, transient messages).
///
/// A subscription records what is pending in its own state (mailboxes, notifications, keys, a
/// journal cursor) and calls ``SubscriptionCore/wake()``, from any thread, as often as it likes.
/// The pump turns those wakes into rounds of ``SubscriptionCore/drainPending()`` on the
/// subscription's executor:
/// - two rounds never overlap, whatever the executor (the I/O thread, a serial queue, a
///   concurrent queue, the main queue);
/// - wakes while a round runs cost nothing more than one more round after it, so a burst is
///   read once per round (the coalescing), and nothing recorded before a wake is left behind;
/// - no round starts once the subscription is cancelled (a round already running finishes its
///   current handler call; `drainPending` checks `isCancelled` between calls), or while it is
///   suspended (its wakes are kept for the resume).
///
/// What to read and how to merge is each kind's own (its reader); when and where is the pump's.
final class DeliveryPump: Sendable {
    private struct State {
        var cancelled = false
        /// Suspended (``Subscription/suspend()``): wakes are kept, no round starts.
        var suspended = false
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
            if state.scheduled || state.suspended { return false }
            state.scheduled = true
            return true
        }
    }

    /// Claims an idle pump for a delivery the caller makes itself, on its own thread, before
    /// anything else (``SubscriptionCore/deliverInline(queuedBehind:deliver:)``, which runs the
    /// rounds woken meanwhile after it).
    func claim() -> Bool {
        state.withLock { state in
            if state.cancelled || state.scheduled || state.suspended { return false }
            state.scheduled = true
            return true
        }
    }

    /// What an offer finds the pump doing, in one look (``look(claimingIdle:)``).
    enum Look {
        /// Stopped for good: the offer is dropped.
        case cancelled
        /// Suspended: the reader keeps the offer for the resume.
        case suspended
        /// The pump was idle with rounds inline and is now claimed for the caller's own delivery,
        /// on its thread, before anything else (the caller then ends with
        /// ``SubscriptionCore/runClaimedRounds()``).
        case claimed
        /// A round is queued or running, rounds run on a queue, or the caller did not ask to
        /// claim: the reader queues the offer and wakes the pump.
        case busy
    }

    /// Whether the pump is cancelled or suspended and, if neither and `claimingIdle`, claims it
    /// like ``claim()`` when rounds run inline and none is queued or running: the checks an
    /// offer makes, in one lock round trip. Called under the reader's lock (this lock is a leaf),
    /// so that what the reader then queues or keeps is decided with the same look.
    func look(claimingIdle: Bool) -> Look {
        state.withLock { state in
            if state.cancelled { return .cancelled }
            if state.suspended { return .suspended }
            if !claimingIdle || state.scheduled || executor.queue != nil { return .busy }
            state.scheduled = true
            return .claimed
        }
    }

    /// Whether another round is due; if not, the pump is released (atomically with the check, so
    /// a wake that comes after it starts a new round).
    fileprivate func nextRound() -> Bool {
        state.withLock { state in
            if state.cancelled || state.suspended || !state.woken {
                state.scheduled = false
                return false
            }
            state.woken = false
            return true
        }
    }

    /// Stops the pump for good: no round starts after this returns. Whether this call stopped it
    /// (false when it was stopped already).
    func stop() -> Bool {
        state.withLock { state in
            defer { state.cancelled = true }
            return !state.cancelled
        }
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Holds the rounds: wakes are remembered (the reader keeps what is pending, merged as it
    /// merges), and no round starts until ``resumed()``. A round already running finishes.
    func suspended() { state.withLock { $0.suspended = true } }

    /// Lets rounds start again; whether the caller must run one now (woken while suspended, or
    /// `woken`: the reader released what it kept while suspended).
    func resumed(woken: Bool = false) -> Bool {
        state.withLock { state in
            state.suspended = false
            if woken && !state.cancelled { state.woken = true }
            if state.cancelled || !state.woken || state.scheduled { return false }
            state.scheduled = true
            return true
        }
    }

    var isSuspended: Bool { state.withLock { $0.suspended } }
}

/// The one core of every kind of subscription: a reader (what is pending, and how to read and
/// deliver it) whose deliveries go through a ``DeliveryPump``. Cancelling, suspending and
/// resuming are written here once; a kind adds only what its reader must forget or hold.
protocol SubscriptionCore: AnyObject, Sendable {
    var pump: DeliveryPump { get }
    /// Reads what is pending and calls the handler for each delivery; runs on the pump's
    /// executor, never twice at once, and again when woken meanwhile. It checks
    /// `pump.isCancelled` before each handler call.
    func drainPending()
    /// Called once, by the call that cancels: drop what is pending (it will never be read).
    func forgetPending()
    /// Holds deliveries (``Subscription/suspend()``).
    func suspend()
    /// Delivers what came meanwhile and goes on (``Subscription/resume()``).
    func resume()
    var isSuspended: Bool { get }
}

extension SubscriptionCore {
    func forgetPending() {}

    func suspend() { pump.suspended() }

    var isSuspended: Bool { pump.isSuspended }

    func resume() { resumeRounds() }

    /// Lets the pump's rounds start again, and runs the one the wakes while suspended asked for.
    func resumeRounds() {
        if pump.resumed() { startRounds() }
    }

    var isCancelled: Bool { pump.isCancelled }

    /// Something is pending: a round runs (inline, or queued on the executor) unless one is
    /// already queued or running, in which case that one is followed by another. While
    /// suspended the wake is kept for ``resume()``.
    func wake() {
        if pump.markWoken() { startRounds() }
    }

    /// Runs the rounds here (the I/O thread's executor) or on the executor's queue.
    func startRounds() {
        if pump.executor.queue == nil {
            runRounds()
        } else {
            pump.executor.run { self.runRounds() }
        }
    }

    /// The one drain of every reader, for its ``drainPending()``: `take` hands over what is
    /// pending, in order (under the reader's own lock; `nil` when nothing is), `deliver` is
    /// called for each item, and `take` is asked again, until it has nothing; the drain stops
    /// before the next item once the subscription is cancelled (from the handler too).
    func drain<Item>(taking take: () -> [Item]?, deliver: (Item) -> Void) {
        while let batch = take() {
            for item in batch {
                if isCancelled { return }
                deliver(item)
            }
        }
    }

    /// The one fast path of a handler on the I/O thread that keeps up: when rounds run inline
    /// and the pump is idle, the caller delivers here, on its own thread, with no queueing.
    /// `queuedBehind` (under the reader's lock) says whether something is pending already or the
    /// subscription was cancelled; if so it has queued the item behind what is pending and a
    /// round delivers both, in order; else `deliver` delivers it. Then the rounds woken meanwhile
    /// run. False when the pump could not be claimed: the caller queues the item and wakes.
    func deliverInline(queuedBehind: () -> Bool, deliver: () -> Void) -> Bool {
        guard pump.executor.queue == nil, pump.claim() else { return false }
        if queuedBehind() { drainPending() } else { deliver() }
        runRounds()
        return true
    }

    /// After a delivery made by the caller that claimed the pump (``DeliveryPump/look(claimingIdle:)``
    /// answered `.claimed`): runs the rounds woken meanwhile, then releases the pump.
    func runClaimedRounds() { runRounds() }

    private func runRounds() {
        while pump.nextRound() { drainPending() }
    }
}

extension Array {
    /// Everything it holds, leaving it empty; `nil` when it was empty: a reader's `take` for
    /// ``SubscriptionCore/drain(taking:deliver:)``.
    mutating func takeAll() -> Self? {
        if isEmpty { return nil }
        defer { self = [] }
        return self
    }
}

// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Logging
import WormholeDBus
import WormholeSystem

/// Posts a journal's notification after appends: at most one post in flight (until the bus
/// confirmed it) per journal in this process, carrying the last sequence number appended when it
/// is sent, so a burst of appends costs a few posts, not one each.
///
/// While the bus's sockets are missing (no bus runs), nothing is posted and nothing is queued.
/// Once the process has its connection, the posts of a burst run on the connection's I/O thread:
/// the appender that starts a burst queues one job there (a wake of the loop), the post is
/// written there, and the bus's confirmation, arriving there too, sends the next post when more
/// records were appended meanwhile; no thread waits. The first post (which connects) and the
/// posts of a sandboxed app (whose sender name may have to be claimed first, a wait) run on the
/// process's work pool instead (``WorkPool``; one burst at a time per journal, as `running` says).
final class JournalPoster: Sendable {
    private struct State {
        var latest: UInt64 = 0
        var posted: UInt64 = 0
        var running = false
        var error: (any Error)?
    }

    private let name: NotificationName
    private let center: MessageCenter
    private let state = Locked(State())
    /// Bursts of this poster in flight (`flush` waits for none, with a deadline).
    private let busy = BoundedWait(0)
    /// Bursts of any poster of the process in flight: the drain at exit waits for none before the
    /// connections are drained, so an append's notification is on the bus before the process exits.
    private static let anyBusy = BoundedWait(0)
    private static let exitHook: UInt64 = ProcessRuntime.shared.exitDrain.addHook { deadline in
        // On the loop's thread the posts could not go on while it waited.
        if ProcessRuntime.shared.loop.isCurrentThread { return }
        _ = JournalPoster.anyBusy.waitForNone(until: deadline)
    }

    init(name: NotificationName, center: MessageCenter) {
        self.name = name
        self.center = center
    }

    func posted(_ sequence: UInt64) {
        let start = state.withLock { state -> Bool in
            state.latest = max(state.latest, sequence)
            if state.running { return false }
            state.running = true
            return true
        }
        guard start else { return }
        if center.centers.existing() == nil, let error = center.centers.knownUnreachable() {
            // No bus, and its sockets still missing: a post would fail the same way, so none is
            // queued (readers without a bus wake on the journal directory). `flush` reports it.
            state.withLock { state in
                state.posted = max(state.posted, state.latest)
                state.error = error
                state.running = false
            }
            return
        }
        _ = Self.exitHook
        busy.enter()
        Self.anyBusy.enter()
        // Without an app ID no sender name is ever claimed (an invalid one: the queue, where the post says so).
        let unsandboxed = (try? (AppIdentity.current() == nil)) ?? false
        if unsandboxed, let notifications = center.centers.existing() {
            // An append on the I/O thread (an `.ioThread` handler) posts at once: written before
            // anything the handler does next, an `exit()` included.
            if notifications.connection.isOnIOThread { return postOnLoop(notifications) }
            if notifications.connection.execute({ self.postOnLoop(notifications) }) { return }
        }
        ProcessRuntime.shared.pool.submit {
            self.run()
            self.finished()
        }
    }

    private func finished() {
        busy.leave()
        Self.anyBusy.leave()
    }

    /// The next state to post, or nil (and the burst is over) when every append was posted.
    private func next() -> UInt64? {
        state.withLock { state -> UInt64? in
            if state.latest <= state.posted {
                state.running = false
                return nil
            }
            return state.latest
        }
    }

    private func done(_ sequence: UInt64, _ error: (any Error)?) {
        if let error {
            center.logger.warning(
                "journal record appended but readers were not notified",
                metadata: ["name": "\(name)", "error": "\(error)"])
        }
        state.withLock {
            $0.posted = max($0.posted, sequence)
            if let error { $0.error = error }
        }
    }

    /// On the I/O thread: posts the latest sequence number, and again from the confirmation
    /// while appends came in meanwhile.
    private func postOnLoop(_ notifications: DarwinNotificationCenter) {
        while let sequence = next() {
            do {
                try notifications.post(name, state: sequence)
            } catch {
                done(sequence, error)
                continue
            }
            let confirming = notifications.connection.flush { error in
                self.done(sequence, error)
                self.postOnLoop(notifications)
            }
            if confirming { return }
            done(
                sequence,
                BusError(.disconnected, value: name.rawValue, "the connection closed before '\(name)' was confirmed"))
        }
        finished()
    }

    /// On the work pool: posts and waits for each confirmation, while appends come in.
    private func run() {
        while let sequence = next() {
            do {
                let notifications = try center.notificationCenter()
                try notifications.post(name, state: sequence)
                // In flight until on the bus: appends meanwhile share the next post.
                done(sequence, notifications.flush())
            } catch {
                done(sequence, error)
            }
        }
    }

    func flush(timeout: Duration) -> (any Error)? {
        let deadline = ExitDrain.deadline(after: timeout)
        if !busy.waitForNone(until: deadline) {
            return BusError(
                .timedOut, value: name.rawValue, "the notification of '\(name)' was not on the bus within \(timeout)")
        }
        let flushed = center.flush(timeout: ExitDrain.remaining(until: deadline))
        let earlier = state.withLock { state in
            defer { state.error = nil }
            return state.error
        }
        return earlier ?? flushed
    }
}

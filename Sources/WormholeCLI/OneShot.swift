// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// The bound of a one-shot command (contract §4, v1.2): `send`, `post`, `clear`,
/// `defaults write` and the other commands that do one thing and exit finish within 15 seconds
/// whatever the bus does (gone, restarting, or accepting and never answering).
///
/// Every bus call of the library is bounded on its own (connecting 5 s, a flush
/// ``flushTimeout``, the drain at exit 3 s), and the file lock a write waits for 10 s; the
/// watchdog armed here is the backstop for anything that still hangs (a blocking `connect` to a
/// socket whose daemon is stopped, say). When it fires, the stored part is done (the store
/// comes before any bus call, and its lock wait gives up after 10 s), so it says that the
/// notification was not sent and exits 0; for the commands that store nothing (`post`,
/// `send --transient`) it exits 1. It exits with `_exit`: the drain at exit would wait again.
enum OneShot {
    /// How long a one-shot command waits for the bus to confirm its notification.
    static let flushTimeout: Duration = .seconds(3)
    /// When the watchdog gives up, counted from when it was armed.
    static let watchdogSeconds = 14

    private static let armed = Atomic<Bool>(false)

    /// Arms the watchdog (once per process). `done`: what the command has done when the bus is
    /// all that is left ("message stored"); `nil` when the notification is its only effect (then
    /// `what`, such as "the post of 'N'", was not sent, and that is a failure).
    static func arm(_ what: String, done: String?) {
        guard !armed.exchange(true, ordering: .relaxed) else { return }
        // A deadline of the process's loop: no thread of its own.
        runAfter(milliseconds: UInt64(watchdogSeconds) * 1000) {
            guard let done else {
                writeError("wormhole: \(what) was not sent: the bus did not answer within \(watchdogSeconds) s")
                _exit(1)
            }
            writeError(
                "wormhole: warning: \(done), but the notification was not sent: the bus did not answer within \(watchdogSeconds) s"
            )
            _exit(0)
        }
    }

    /// Waits for the bus to confirm the notification, at most ``flushTimeout``; on failure writes
    /// the one line saying it was not confirmed (unless the send already said it was not sent).
    /// The connection accepted it, so an observer may have it (contract §1, v1.3): "not
    /// confirmed", not "not sent".
    static func confirm(_ done: String, alreadyReported: Bool, flush: (Duration) -> (any Error)?) {
        guard let error = flush(flushTimeout), !alreadyReported else { return }
        writeError("wormhole: warning: \(done), but the notification was not confirmed: \(error)")
    }
}

// SPDX-License-Identifier: Apache-2.0
import Logging
import Synchronization

/// Runs a closure once on the process's loop (``ProcessRuntime/loop``) after a delay: the loop's own
/// timed sleep, with no thread and no descriptor of its own. For the one kind of wait that no
/// descriptor can end, an event that did not come (a post that should have followed a rename).
/// The loop runs while a deadline is pending, and the deadline gives its place back when it
/// fires. It cannot be taken back: what it runs checks whether it is still wanted.
package final class LoopDeadline: EventLoopHandler, @unchecked Sendable {
    private let action: @Sendable () -> Void
    /// When it fires (``EventLoop/nowMilliseconds()``); set before it is attached, then read on
    /// the loop's thread only.
    private let due: UInt64
    private let runtime: RuntimeLoop
    private let loop: EventLoop
    private let finished = Atomic<Bool>(false)

    private init(due: UInt64, runtime: RuntimeLoop, loop: EventLoop, action: @escaping @Sendable () -> Void) {
        self.due = due
        self.runtime = runtime
        self.loop = loop
        self.action = action
    }

    /// Calls `action` on the loop's thread `milliseconds` from now (it must return quickly).
    /// - Throws: ``SystemFailure`` when no loop can be had (no epoll or eventfd left, or the
    ///   loop is stopping).
    package static func schedule(
        after milliseconds: UInt64, on runtime: RuntimeLoop = ProcessRuntime.shared.loop,
        _ action: @escaping @Sendable () -> Void
    ) throws(SystemFailure) {
        let loop = try runtime.join()
        let deadline = LoopDeadline(
            due: EventLoop.nowMilliseconds() + milliseconds, runtime: runtime, loop: loop, action: action)
        if !loop.attach(deadline) {
            // The loop is stopping: it would never fire; its place is given back now.
            deadline.finished.store(true, ordering: .releasing)
            runtime.leave(loop)
            throw SystemFailure(
                call: "the runtime loop", code: 0, detail: "the process's loop is stopping: no deadline can be kept")
        }
    }

    package func loopStarted() {}

    package func loopStopped() {
        finished.store(true, ordering: .releasing)
    }

    package func timeoutMilliseconds() -> Int32 {
        let now = EventLoop.nowMilliseconds()
        return due <= now ? 0 : Int32(clamping: due - now)
    }

    package func beforeJobs() {
        guard due <= EventLoop.nowMilliseconds(), !finished.exchange(true, ordering: .acquiringAndReleasing) else {
            return
        }
        runtime.detach(self, from: loop)
        action()
    }
}

import Logging
import Synchronization

/// Runs a closure once on the process's loop (``RuntimeLoop``) after a delay: the loop's own
/// timed sleep, with no thread and no descriptor of its own. For the one kind of wait that no
/// descriptor can end, an event that did not come (a post that should have followed a rename).
/// The loop runs while a deadline is pending, and the deadline gives its place back when it
/// fires or is cancelled.
package final class LoopDeadline: EventLoopHandler, @unchecked Sendable {
    private let action: @Sendable () -> Void
    /// When it fires (``EventLoop/nowMilliseconds()``); set before it is attached, then read on
    /// the loop's thread only.
    private let due: UInt64
    private let loop: EventLoop
    private let finished = Atomic<Bool>(false)

    private init(due: UInt64, loop: EventLoop, action: @escaping @Sendable () -> Void) {
        self.due = due
        self.loop = loop
        self.action = action
    }

    /// Calls `action` on the loop's thread `milliseconds` from now (it must return quickly).
    /// - Throws: ``BusError`` when no loop can be had (no epoll or eventfd left).
    @discardableResult
    package static func schedule(
        after milliseconds: UInt64, _ action: @escaping @Sendable () -> Void
    ) throws(BusError) -> LoopDeadline {
        let loop = try RuntimeLoop.join()
        let deadline = LoopDeadline(due: EventLoop.nowMilliseconds() + milliseconds, loop: loop, action: action)
        if !loop.attach(deadline) {
            // The loop is stopping: it would never fire; its place is given back now.
            deadline.finished.store(true, ordering: .releasing)
            RuntimeLoop.leave(loop)
            throw BusError(.disconnected, "the process's loop is stopping: no deadline can be kept")
        }
        return deadline
    }

    /// Stops it from firing if it has not yet (on the loop's thread: not at all; elsewhere: not
    /// after the loop's next iteration). Calling it again does nothing.
    package func cancel() {
        if finished.exchange(true, ordering: .acquiringAndReleasing) { return }
        RuntimeLoop.detach(self, from: loop)
    }

    func loopStarted() {}

    func loopStopped() {
        finished.store(true, ordering: .releasing)
    }

    func timeoutMilliseconds() -> Int32 {
        let now = EventLoop.nowMilliseconds()
        return due <= now ? 0 : Int32(clamping: due - now)
    }

    func beforeJobs() {
        guard due <= EventLoop.nowMilliseconds(), !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        RuntimeLoop.detach(self, from: loop)
        action()
    }
}

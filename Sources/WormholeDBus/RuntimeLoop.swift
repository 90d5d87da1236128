import Logging
import Synchronization

/// The process's one event loop: a single thread on which every bus connection (`BusIO`), the
/// process's inotify instance (`InotifyHub`) and every wait for a bus (`Reconnector`) run, the
/// shape of GDBus's one worker thread per process and swift-nio's singleton event loop group.
///
/// The loop starts with its first handler and stops when its last one is detached, so an idle
/// process holds no thread of the library's own (and a process whose main thread ends with
/// `pthread_exit` is not kept alive). A handler attached after that gets a new loop.
package enum RuntimeLoop {
    private struct State {
        var loop: EventLoop?
        var handlers = 0
    }

    private static let state = Locked(State())

    /// Takes a place on the process's loop (starting one when none runs) for a handler that is
    /// not made yet: the caller attaches it (``EventLoop/attach(_:)``) once it can, and gives the
    /// place back once with ``detach(_:from:)``, or with ``leave(_:)`` if it never attached.
    /// - Throws: ``BusError`` when a loop cannot be made (no epoll or eventfd left).
    static func join() throws(BusError) -> EventLoop {
        try state.withLock { state throws(BusError) -> EventLoop in
            let loop: EventLoop
            if let running = state.loop {
                loop = running
            } else {
                loop = try EventLoop(name: "wormhole-loop", logger: Logger(label: "wormhole.runtime"))
                loop.start()
                state.loop = loop
            }
            state.handlers += 1
            return loop
        }
    }

    /// Detaches `handler` from `loop` (attached after ``join()``) and gives its place back; the
    /// last place stops the loop. Call it once per attach.
    static func detach(_ handler: any EventLoopHandler, from loop: EventLoop) {
        loop.detach(handler)
        leave(loop)
    }

    /// Whether the calling thread is the process's loop (a wait for the loop would never end).
    package static var isCurrentThread: Bool { state.withLock { $0.loop?.inEventLoop ?? false } }

    /// Gives back a place taken with ``join()``; the last one stops the loop.
    static func leave(_ loop: EventLoop) {
        state.withLock { state in
            guard state.loop === loop else { return }
            state.handlers -= 1
            if state.handlers == 0 {
                state.loop = nil
                loop.stop()
            }
        }
    }
}

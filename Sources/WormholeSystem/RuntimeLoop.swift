// SPDX-License-Identifier: Apache-2.0
import Logging
import Synchronization

/// The process's one event loop (``ProcessRuntime/loop``): a single thread on which every bus
/// connection, the inotify instance, the doorbell's endpoint, deadlines and every wait for a bus
/// run, the shape of GDBus's one worker thread per process and swift-nio's singleton event loop
/// group.
///
/// The loop starts with its first handler and stops when its last one is detached, so an idle
/// process holds no thread of the library's own (and a process whose main thread ends with
/// `pthread_exit` is not kept alive). A handler attached after that gets a new loop.
package final class RuntimeLoop: Sendable {
    private struct State {
        var loop: EventLoop?
        var handlers = 0
    }

    private let state = Locked(State())

    init() {}

    /// Takes a place on the process's loop (starting one when none runs) for a handler that is
    /// not made yet: the caller attaches it (``EventLoop/attach(_:)``) once it can, and gives the
    /// place back once with ``detach(_:from:)``, or with ``leave(_:)`` if it never attached.
    /// - Throws: ``SystemFailure`` when a loop cannot be made (no epoll or eventfd left).
    package func join() throws(SystemFailure) -> EventLoop {
        try state.withLock { state throws(SystemFailure) -> EventLoop in
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
    package func detach(_ handler: any EventLoopHandler, from loop: EventLoop) {
        loop.detach(handler)
        leave(loop)
    }

    /// Whether the calling thread is the process's loop (a wait for the loop would never end).
    package var isCurrentThread: Bool { state.withLock { $0.loop?.inEventLoop ?? false } }

    /// Gives back a place taken with ``join()``; the last one stops the loop.
    package func leave(_ loop: EventLoop) {
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

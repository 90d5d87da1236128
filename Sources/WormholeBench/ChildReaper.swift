// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Glibc
import Synchronization

/// Kills the bench's children (helpers, floors, the private daemon) and removes its scratch
/// directories when the bench is interrupted (SIGINT, SIGTERM, SIGHUP). Normal exits and thrown
/// errors clean up through `deinit` and `defer`; this covers the signals that skip them.
///
/// The signals are read from `DispatchSource` signal sources (libdispatch blocks them and
/// reads a `signalfd`), not from a handler, so the clean-up runs as ordinary code on a dispatch
/// thread. Starting a child and creating a directory happen under the same lock the clean-up
/// takes, so nothing started during an interrupt escapes it: once the clean-up began, a new
/// start is refused and killed.
enum ChildReaper {
    /// The signals the bench handles; children get their default actions back.
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    private struct State {
        var pids: Set<pid_t> = []
        var directories: Set<String> = []
        /// Set once the clean-up began: whatever starts after it is stopped at once.
        var interrupted = false
    }

    private static let state = Mutex(State())

    /// Installs the sources once: the signals' default actions are replaced (ignored) and the
    /// sources deliver them instead.
    private static let handlers: Void = {
        for signal in signals {
            Glibc.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
            source.setEventHandler { interrupted(by: signal) }
            source.resume()
            // The sources live as long as the process.
            _ = Unmanaged.passRetained(source as AnyObject)
        }
    }()

    /// Installs the signal sources (before anything is started, so an early Ctrl-C is caught).
    static func install() {
        _ = handlers
    }

    /// Runs `start` (a `posix_spawn`) under the lock and registers the pid it returns, so an
    /// interrupt either sees the child or refuses to start it.
    static func spawn(_ start: () throws -> pid_t) throws -> pid_t {
        try tracked(start) { $0.pids.insert($1) }
    }

    static func unregister(_ pid: pid_t) {
        state.withLock { _ = $0.pids.remove(pid) }
    }

    /// Runs `make` (a `mkdtemp`) under the lock and removes the directory it returns if the
    /// bench is interrupted before it does so itself.
    static func makeDirectory(_ make: () throws -> String) throws -> String {
        try tracked(make) { $0.directories.insert($1) }
    }

    /// Runs `make` under the lock, unless the clean-up began, and has `keep` record what it made.
    private static func tracked<Made>(
        _ make: () throws -> Made, keep: (inout State, Made) -> Void
    ) throws -> Made {
        _ = handlers
        return try state.withLock { state in
            if state.interrupted { throw BenchFailure("interrupted") }
            let made = try make()
            keep(&state, made)
            return made
        }
    }

    /// Blocks for good once an interrupt's clean-up began, so the thread that was measuring does
    /// not end the process on its own (its children just died: it sees errors) before the
    /// clean-up has reaped everything and removed the directories; the clean-up ends the process.
    static func holdIfInterrupted() {
        guard state.withLock({ $0.interrupted }) else { return }
        DispatchSemaphore(value: 0).wait()
    }

    static func removed(_ path: String) {
        state.withLock { _ = $0.directories.remove(path) }
    }

    /// Stops every child (SIGKILL, then reaps it), removes the directories, and ends the process
    /// with `signal`'s default action, so the caller (a shell) sees it was interrupted.
    private static func interrupted(by signal: Int32) {
        let (pids, directories) = state.withLock { state in
            state.interrupted = true
            return (state.pids, state.directories)
        }
        for pid in pids { kill(pid, SIGKILL) }
        for pid in pids {
            while waitpid(pid, nil, 0) < 0 && errno == EINTR {}
        }
        for path in directories { try? FileManager.default.removeItem(atPath: path) }
        Console.progress("wormhole-bench: interrupted (signal \(signal)); children stopped, temporary files removed")
        // Re-raise with the default action, unblocked on this thread only.
        Glibc.signal(signal, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(signal)
        exit(128 + signal)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import WormholeDBus
import WormholeSystem

/// Set once the readiness line is written.
private let isReady = Atomic<Bool>(false)

/// What a serving command keeps alive until the process ends: its facades and subscriptions.
/// Held in a global, not by a local's extended lifetime: a lifetime extended over a call that
/// never returns may end at its last use in an optimised build, and releasing a subscription
/// cancels it (the release build's `listen` lost its bus lines that way).
private let served = Mutex<[ServedValue]>([])

/// A value kept by ``announceReadyAndServe(keeping:afterReady:)``; it is only held, never used.
private struct ServedValue: @unchecked Sendable {
    let value: Any
}

/// Writes the readiness line (the subscriptions in `keeping` are active), runs `afterReady`
/// (work whose output must follow the readiness line), and serves deliveries (on the process's
/// loop thread) until a handler, the timeout or an ending signal (``EndingSignals``) exits the
/// process. The subscriptions are kept alive until then: releasing them would cancel them.
func announceReadyAndServe(keeping subscriptions: Any, afterReady: () -> Void = {}) -> Never {
    served.withLock { $0.append(ServedValue(value: subscriptions)) }
    EndingSignals.install()
    writeError("ready")
    isReady.store(true, ordering: .releasing)
    afterReady()
    EndingSignals.waitThenExit()
}

/// Arms `--timeout` for the whole command, connecting included: after `seconds` it exits 124
/// when a count was asked for and 0 otherwise. Armed before anything touches the bus, so a bus
/// that never answers cannot hold the command past it; if the command was not listening yet,
/// one line on standard error says so. It is a deadline of the process's loop: no thread of its
/// own.
func armTimeout(_ seconds: Double?, countGiven: Bool) {
    guard let seconds else { return }
    let fire: @Sendable () -> Void = {
        if !isReady.load(ordering: .acquiring) {
            writeError(
                "wormhole: timed out after \(seconds) s before listening started (the bus did not answer in time)")
        } else if countGiven {
            writeError("wormhole: timed out after \(seconds) s before the requested count")
        }
        exit(countGiven ? 124 : 0)
    }
    runAfter(milliseconds: UInt64(max(0, seconds) * 1000), fire)
}

/// Runs `action` once after `milliseconds`, on the process's loop (``LoopDeadline``); only when
/// no loop can be had (no epoll or eventfd left) on a thread of libdispatch's.
func runAfter(milliseconds: UInt64, _ action: @escaping @Sendable () -> Void) {
    do {
        try LoopDeadline.schedule(after: milliseconds, action)
    } catch {
        DispatchQueue.global().asyncAfter(
            deadline: .now() + .milliseconds(Int(clamping: milliseconds)), execute: action)
    }
}

/// SIGINT (Ctrl-C), SIGTERM and SIGHUP end a serving command (`listen`, `observe`, `defaults
/// observe`, `monitor`) as a normal end: the exit drain runs (signals sent are confirmed) and the
/// process's doorbell registrations and endpoint are removed, then it exits with 128 + the signal's
/// number (130, 143, 129), the status a shell reports for a process ended by that signal.
///
/// The handler only writes the signal's number to a pipe (async-signal-safe); the main thread,
/// once serving, reads it and exits. The handler is installed just before the readiness line: a
/// signal that comes before (while the command connects) ends it at once, as the signal's default
/// action does.
enum EndingSignals {
    static let numbers: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    /// The pipe the handler writes to: read end, write end (-1 before ``install()``).
    fileprivate static let readEnd = Atomic<Int32>(-1)
    fileprivate static let writeEnd = Atomic<Int32>(-1)
    fileprivate static let serving = Atomic<Bool>(false)

    /// Installs the handler for the three signals (once, when the command starts serving, before
    /// its readiness line). From then on a signal waits in the pipe until the main thread reads it,
    /// even one that comes while the work after the readiness line still runs.
    static func install() {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        readEnd.store(fds[0], ordering: .releasing)
        writeEnd.store(fds[1], ordering: .releasing)
        serving.store(true, ordering: .releasing)
        for number in numbers {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = endingSignalHandler
            action.sa_flags = SA_RESTART
            sigemptyset(&action.sa_mask)
            sigaction(number, &action, nil)
        }
    }

    /// Serves: waits for an ending signal, then exits with its status.
    static func waitThenExit() -> Never {
        let fd = readEnd.load(ordering: .acquiring)
        while fd >= 0 {
            var number: UInt8 = 0
            let count = read(fd, &number, 1)
            if count == 1 { exit(128 + Int32(number)) }
            if count < 0 && errno == EINTR { continue }
            break
        }
        // Without the pipe (none could be made): the signals keep their default action.
        while true { pause() }
    }
}

/// The handler of ``EndingSignals``: hands the signal to the serving main thread, or, before the
/// command serves, ends the process as the signal's default action would.
private func endingSignalHandler(_ number: Int32) {
    let fd = EndingSignals.writeEnd.load(ordering: .relaxed)
    if EndingSignals.serving.load(ordering: .relaxed), fd >= 0 {
        var byte = UInt8(truncatingIfNeeded: number)
        _ = write(fd, &byte, 1)
        return
    }
    signal(number, SIG_DFL)
    raise(number)
}

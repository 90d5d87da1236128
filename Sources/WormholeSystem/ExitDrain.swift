// SPDX-License-Identifier: Apache-2.0
package import Dispatch
import Glibc

/// A connection the drain at exit waits for (``ExitDrain/register(_:)``).
package protocol ExitDrainable: AnyObject, Sendable {
    /// Starts what confirms the connection's accepted signals by `deadline`, and returns the
    /// wait for it (true when confirmed), or nil when nothing is unconfirmed.
    func beginExitDrain(deadline: DispatchTime) -> (() -> Bool)?
}

/// What a process does with the signals it accepted, when it exits normally.
///
/// Every connection registers itself here while it is alive. The first one installs an
/// `atexit` hook, so returning from `main` or calling `exit()` runs ``run()``: the hooks added
/// with ``addHook(_:)`` first (layers above that still have signals to emit, such as a journal's
/// notification on its own queue), then, for every connection with signals the bus has not yet
/// confirmed, what is queued is written and one call is made that the bus answers
/// (`GetNameOwner` of the connection's own unique name): written to the socket is not enough,
/// since a proxy on the way (`xdg-dbus-proxy`) drops what it has not passed on when its client
/// goes. Connections that are closing (``BusConnection/close()``, or the last reference gone)
/// do the same on their own loop; the exit waits for them too.
///
/// All of it within ``bound`` together; what the bus has not taken by then is logged and
/// dropped (the stored part of a message is on disk regardless). A process that sent nothing
/// pays nothing. Not covered: `_exit`, `execve`, a crash, SIGKILL, or a terminating signal
/// the program does not handle.
package final class ExitDrain: Sendable {
    /// How long the drain at exit may take in all: 3 seconds.
    package static let bound: Duration = .seconds(3)

    private struct State {
        var connections: [ObjectIdentifier: any ExitDrainable] = [:]
        var hooks: [UInt64: @Sendable (DispatchTime) -> Void] = [:]
        var nextHook: UInt64 = 1
        var installed = false
    }

    private let state = Locked(State())

    /// The process's drain is ``ProcessRuntime/exitDrain``.
    init() {}

    /// Installs the `atexit` hook (once per process).
    private func installIfNeeded(_ state: inout State) {
        guard !state.installed else { return }
        state.installed = true
        atexit { ProcessRuntime.shared.exitDrain.run() }
    }

    /// Drains `connection` at exit until ``unregister(_:)``.
    package func register(_ connection: any ExitDrainable) {
        state.withLock {
            installIfNeeded(&$0)
            $0.connections[ObjectIdentifier(connection)] = connection
        }
    }

    package func unregister(_ connection: any ExitDrainable) {
        _ = state.withLock { $0.connections.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    /// Adds work to do at exit before the connections are drained: `hook` gets the deadline of
    /// the whole drain and must return by then. Returns an id for ``removeHook(_:)``.
    package func addHook(_ hook: @escaping @Sendable (DispatchTime) -> Void) -> UInt64 {
        state.withLock {
            installIfNeeded(&$0)
            let id = $0.nextHook
            $0.nextHook += 1
            $0.hooks[id] = hook
            return id
        }
    }

    package func removeHook(_ id: UInt64) {
        _ = state.withLock { $0.hooks.removeValue(forKey: id) }
    }

    /// A deadline `duration` from now.
    package static func deadline(after duration: Duration) -> DispatchTime {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        return DispatchTime.now() + .nanoseconds(Int(clamping: nanoseconds))
    }

    /// The time from now until `deadline` (zero when it passed).
    package static func remaining(until deadline: DispatchTime) -> Duration {
        let now = DispatchTime.now().uptimeNanoseconds
        let end = deadline.uptimeNanoseconds
        return end <= now ? .zero : .nanoseconds(Int64(clamping: end - now))
    }

    /// Milliseconds from now until `deadline` (at least 1).
    package static func milliseconds(until deadline: DispatchTime) -> Int32 {
        let now = DispatchTime.now().uptimeNanoseconds
        let end = deadline.uptimeNanoseconds
        return end <= now ? 1 : Int32(clamping: max(1, (end - now) / 1_000_000))
    }

    /// Drains every connection of the process, at most ``bound`` in all (what the `atexit` hook
    /// runs; tests call it directly). Returns how many connections did not confirm in time.
    @discardableResult
    package func run() -> Int {
        let deadline = Self.deadline(after: Self.bound)
        let hooks = state.withLock { $0.hooks.sorted { $0.key < $1.key }.map(\.value) }
        for hook in hooks { hook(deadline) }
        let connections = state.withLock { Array($0.connections.values) }
        // Every connection starts its round trip before any is waited for: one bound for all.
        let waits = connections.compactMap { $0.beginExitDrain(deadline: deadline) }
        var failed = 0
        for wait in waits where !wait() { failed += 1 }
        return failed
    }
}

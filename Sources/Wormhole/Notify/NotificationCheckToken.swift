// SPDX-License-Identifier: Apache-2.0
import Synchronization
public import WormholeDBus
import WormholeSystem

/// A check token (see ``DarwinNotificationCenter/makeCheckToken(for:)``).
///
/// ``check()`` compares the name's generation in the shared table, which Wormhole posters
/// bump before they signal, and a local counter that the token's own bus rules bump when a
/// signal arrives (posts made with `dbus-send` do not touch the table). False positives
/// happen (the first check, names sharing a table slot); false negatives never.
///
/// Its bus rules stay until ``cancel()`` or until the last reference to it is released
/// (the rule of every `SubscriptionHandle`).
public final class NotificationCheckToken: SubscriptionHandle {
    private struct State {
        var first = true
        var lastShared: UInt64 = 0
        var lastLocal: UInt64 = 0
        var cancelled = false
        var connection: BusConnection?
        var routeID: UInt64?
    }

    private let table: SharedStateTable?
    private let slot: SharedStateTable.Slot?
    private let local = Atomic<UInt64>(0)
    private let state = Locked(State())

    init(table: SharedStateTable?, slot: SharedStateTable.Slot?) {
        self.table = table
        self.slot = slot
    }

    deinit { cancel() }

    func attach(connection: BusConnection, routeID: UInt64) {
        state.withLock {
            $0.connection = connection
            $0.routeID = routeID
        }
    }

    func signalled() { local.wrappingAdd(1, ordering: .releasing) }

    /// Whether the name was posted since the last call (like `notify_check`). Memory loads
    /// only: no system call, no bus traffic. After ``cancel()`` only the shared table is
    /// consulted.
    public func check() -> Bool {
        let shared = slot.flatMap { slot in table?.generation(slot) } ?? 0
        let localNow = local.load(ordering: .acquiring)
        return state.withLock { state in
            let changed = state.first || shared != state.lastShared || localNow != state.lastLocal
            state.first = false
            state.lastShared = shared
            state.lastLocal = localNow
            return changed
        }
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Removes the token's bus rules (like `notify_cancel`). Calling it twice does nothing.
    public func cancel() {
        let (connection, routeID) = state.withLock { state in
            defer {
                state.cancelled = true
                state.connection = nil
                state.routeID = nil
            }
            return (state.connection, state.routeID)
        }
        if let connection, let routeID { connection.removeRoute(routeID) }
    }
}

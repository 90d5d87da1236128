// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// The handlers of one connection's events (``BusConnectionEvent``): added from any thread,
/// called on the loop's thread in the order they were added, and ended together per scope (a
/// shared connection's handle). Thread-safe.
final class BusEvents: Sendable {
    private struct State {
        var nextID: UInt64 = 1
        var handlers: [UInt64: @Sendable (BusConnectionEvent) -> Void] = [:]
        /// The scope of each handler added by a shared connection's handle.
        var scopes: [UInt64: UInt64] = [:]
    }

    private let state = Locked(State())

    /// Adds `handler` for `scope` (0: none); returns its id for ``remove(_:)``.
    func add(scope: UInt64 = 0, _ handler: @escaping @Sendable (BusConnectionEvent) -> Void) -> UInt64 {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.handlers[id] = handler
            if scope != 0 { state.scopes[id] = scope }
            return id
        }
    }

    func remove(_ id: UInt64) {
        state.withLock { state in
            state.handlers[id] = nil
            state.scopes[id] = nil
        }
    }

    /// Drops the handlers `scope` added.
    func closeScope(_ scope: UInt64) {
        state.withLock { state in
            for (id, owner) in state.scopes where owner == scope {
                state.handlers[id] = nil
                state.scopes[id] = nil
            }
        }
    }

    /// Drops every handler: the connection is closed.
    func removeAll() {
        state.withLock { state in
            state.handlers = [:]
            state.scopes = [:]
        }
    }

    /// Calls every handler with `event`, on the loop's thread.
    func report(_ event: BusConnectionEvent) {
        // In the order they were added (IDs increase): a layer above that added its handler
        // first (a notification center's catch-up) has acted when a later one runs.
        let handlers = state.withLock { $0.handlers.sorted { $0.key < $1.key }.map(\.value) }
        for handler in handlers { handler(event) }
    }
}

import WormholeSystem

/// Scopes: what each handle of a shared connection added, ended together when it closes.
extension BusIO {
    // MARK: Scopes (the handles of a shared connection)

    /// Ends everything one handle of a shared connection added: its routes are removed (their
    /// rules released, their `finish` called, so its streams end), its event handlers dropped and
    /// the rules it took with `acquireRule` released, while the connection and every other
    /// handle's routes carry on. A closed connection has finished every route already.
    func closeScope(_ scope: UInt64) {
        shared.withLock { state in
            for (id, owner) in state.eventScopes where owner == scope {
                state.eventHandlers[id] = nil
                state.eventScopes[id] = nil
            }
        }
        execute { [self] in
            for id in scopedRoutes[scope] ?? [] { removeRoute(confined: id)?.finish() }
            scopedRoutes[scope] = nil
            for (text, count) in rules.scopedRules[scope] ?? [:] {
                for _ in 0..<count { rules.perform(rules.registry.release(text)) }
            }
            rules.scopedRules[scope] = nil
        }
    }
}

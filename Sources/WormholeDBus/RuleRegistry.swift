// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// The match rules one connection holds on the bus, as a state machine with no I/O.
///
/// Identical rules are reference counted: the bus sees `AddMatch` for the first reference and
/// `RemoveMatch` when the last one goes. Every event (a reference taken or dropped, the bus's
/// answer, the connection lost, restored or closed) is a mutating call that returns what to
/// do: requests to send and waiters to complete. The owner (the connection's I/O thread)
/// performs them; tests drive the machine directly, without a bus.
///
/// `Waiter` is whatever the owner completes when a rule is acknowledged (a closure there, a
/// number in tests).
package struct RuleRegistry<Waiter> {
    /// What the owner must do after an event.
    package enum Action {
        /// Send `AddMatch` for the rule; report the answer with `answered(_:generation:_:)`.
        case add(String, generation: UInt64)
        /// Send `RemoveMatch` for the rule (fire and forget: nothing waits for it).
        case remove(String)
        /// Complete these waiters with this outcome.
        case complete([Waiter], Result<Void, BusError>)
    }

    private enum Phase: Equatable {
        /// `AddMatch` is in flight.
        case pending
        /// The bus acknowledged the rule.
        case active
        /// The connection was lost; the rule is re-added when it comes back.
        case lost
    }

    private struct Entry {
        var count: Int
        var phase: Phase
        /// Identifies the `AddMatch` in flight, so a late answer to an earlier one is ignored.
        var generation: UInt64
        var waiters: [Waiter]
    }

    private var entries: [String: Entry] = [:]
    private var nextGeneration: UInt64 = 1
    /// Whether the connection is up; requests are only sent while it is.
    package private(set) var connected: Bool

    package init(connected: Bool) { self.connected = connected }

    /// How many references `rule` has (0 when unknown).
    package func count(of rule: String) -> Int { entries[rule]?.count ?? 0 }

    /// Whether the bus acknowledged `rule` on the current connection.
    package func isActive(_ rule: String) -> Bool { entries[rule]?.phase == .active }

    /// Every rule with at least one reference.
    package var rules: [String] { entries.keys.sorted() }

    private mutating func generation() -> UInt64 {
        defer { nextGeneration &+= 1 }
        return nextGeneration
    }

    /// Takes one reference on `rule`; `waiter` is completed once the bus has it.
    ///
    /// While disconnected the reference is refused at once (and not counted): a rule that
    /// cannot reach the bus must not leave its caller waiting for a reconnect that may
    /// never come.
    package mutating func acquire(_ rule: String, waiter: Waiter) -> [Action] {
        guard connected else {
            return [
                .complete(
                    [waiter],
                    .failure(
                        BusError(
                            .disconnected, value: rule, "cannot add match rule \(rule): not connected to the bus")))
            ]
        }
        if var entry = entries[rule] {
            entry.count += 1
            switch entry.phase {
            case .active:
                entries[rule] = entry
                return [.complete([waiter], .success(()))]
            case .pending:
                entry.waiters.append(waiter)
                entries[rule] = entry
                return []
            case .lost:
                // Connected but not yet re-added (the reconnect is being processed): add it now.
                let generation = generation()
                entry.phase = .pending
                entry.generation = generation
                entry.waiters.append(waiter)
                entries[rule] = entry
                return [.add(rule, generation: generation)]
            }
        }
        let generation = generation()
        entries[rule] = Entry(count: 1, phase: .pending, generation: generation, waiters: [waiter])
        return [.add(rule, generation: generation)]
    }

    /// Drops one reference on `rule`. The last one sends `RemoveMatch` (when connected) and
    /// fails any waiter still waiting for the bus's answer.
    package mutating func release(_ rule: String) -> [Action] {
        guard var entry = entries[rule] else { return [] }
        entry.count -= 1
        if entry.count > 0 {
            entries[rule] = entry
            return []
        }
        entries[rule] = nil
        var actions: [Action] = []
        if connected && entry.phase != .lost { actions.append(.remove(rule)) }
        if !entry.waiters.isEmpty {
            actions.append(
                .complete(
                    entry.waiters,
                    .failure(
                        BusError(
                            .disconnected, value: rule, "match rule \(rule) was released before the bus acknowledged it"
                        ))))
        }
        return actions
    }

    /// The bus answered the `AddMatch` of `generation` for `rule`.
    package mutating func answered(_ rule: String, generation: UInt64, _ result: Result<Void, BusError>) -> [Action] {
        guard var entry = entries[rule], entry.phase == .pending, entry.generation == generation else { return [] }
        let waiters = entry.waiters
        entry.waiters = []
        switch result {
        case .success:
            entry.phase = .active
            entries[rule] = entry
        case .failure:
            // Every reference taken so far was waiting for this answer: none of them holds the rule.
            entries[rule] = nil
        }
        return waiters.isEmpty ? [] : [.complete(waiters, result)]
    }

    /// The connection was lost. With `keepRules` (automatic reconnection) the references stay
    /// and are re-added by ``reconnected()``; without, every rule is forgotten (the routes
    /// that held them are finished). Waiters are failed either way.
    package mutating func disconnected(keepRules: Bool) -> [Action] {
        connected = false
        var failed: [Waiter] = []
        for key in entries.keys {
            guard var entry = entries[key] else { continue }
            failed += entry.waiters
            entry.waiters = []
            entry.phase = .lost
            entries[key] = entry
        }
        if !keepRules { entries = [:] }
        guard !failed.isEmpty else { return [] }
        return [
            .complete(
                failed,
                .failure(
                    BusError(
                        .disconnected, "the bus went away before it acknowledged the match rule")))
        ]
    }

    /// A new connection is up: re-add every rule that still has references.
    package mutating func reconnected() -> [Action] {
        connected = true
        var actions: [Action] = []
        for key in entries.keys.sorted() {
            guard var entry = entries[key] else { continue }
            let generation = generation()
            entry.phase = .pending
            entry.generation = generation
            entries[key] = entry
            actions.append(.add(key, generation: generation))
        }
        return actions
    }

    /// The connection is closed for good: fail every waiter and forget every rule.
    package mutating func closed() -> [Action] {
        connected = false
        let waiters = entries.values.flatMap(\.waiters)
        entries = [:]
        guard !waiters.isEmpty else { return [] }
        return [.complete(waiters, .failure(BusError(.disconnected, "the connection is closed")))]
    }
}

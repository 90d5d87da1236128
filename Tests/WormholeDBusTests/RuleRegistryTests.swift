// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import WormholeDBus

/// The rule registry is a state machine with no I/O: these tests drive it event by event.
@Suite("Match rule registry (no bus)")
struct RuleRegistryTests {
    typealias Registry = RuleRegistry<Int>

    /// The rules the actions add, remove, and the waiters they complete, split by outcome.
    struct Effects: Equatable {
        var added: [String] = []
        var removed: [String] = []
        var succeeded: [Int] = []
        var failed: [Int] = []
        var generations: [String: UInt64] = [:]

        init(_ actions: [Registry.Action]) {
            for action in actions {
                switch action {
                case .add(let rule, let generation):
                    added.append(rule)
                    generations[rule] = generation
                case .remove(let rule): removed.append(rule)
                case .complete(let waiters, .success): succeeded += waiters
                case .complete(let waiters, .failure): failed += waiters
                }
            }
        }

        init(added: [String] = [], removed: [String] = [], succeeded: [Int] = [], failed: [Int] = []) {
            self.added = added
            self.removed = removed
            self.succeeded = succeeded
            self.failed = failed
        }

        static func == (lhs: Effects, rhs: Effects) -> Bool {
            lhs.added == rhs.added && lhs.removed == rhs.removed && lhs.succeeded == rhs.succeeded
                && lhs.failed == rhs.failed
        }
    }

    static let failure = BusError(.requestFailed, value: "r", "refused")

    @Test("the first reference adds the rule; later ones wait for the same answer or succeed at once")
    func sharing() {
        var registry = Registry(connected: true)
        let first = Effects(registry.acquire("r", waiter: 1))
        #expect(first == Effects(added: ["r"]))
        #expect(Effects(registry.acquire("r", waiter: 2)) == Effects())
        let generation = first.generations["r"]!
        #expect(Effects(registry.answered("r", generation: generation, .success(()))) == Effects(succeeded: [1, 2]))
        #expect(registry.isActive("r"))
        #expect(Effects(registry.acquire("r", waiter: 3)) == Effects(succeeded: [3]))
        #expect(registry.count(of: "r") == 3)
    }

    @Test("the last release removes the rule from the bus; earlier ones do not")
    func release() {
        var registry = Registry(connected: true)
        let generation = Effects(registry.acquire("r", waiter: 1)).generations["r"]!
        _ = registry.acquire("r", waiter: 2)
        _ = registry.answered("r", generation: generation, .success(()))
        #expect(Effects(registry.release("r")) == Effects())
        #expect(Effects(registry.release("r")) == Effects(removed: ["r"]))
        #expect(registry.count(of: "r") == 0)
        #expect(Effects(registry.release("r")) == Effects(), "releasing an unknown rule does nothing")
    }

    @Test("a refused rule fails every waiter and is not counted")
    func refused() {
        var registry = Registry(connected: true)
        let generation = Effects(registry.acquire("r", waiter: 1)).generations["r"]!
        _ = registry.acquire("r", waiter: 2)
        #expect(
            Effects(registry.answered("r", generation: generation, .failure(Self.failure))) == Effects(failed: [1, 2]))
        #expect(registry.count(of: "r") == 0)
        #expect(Effects(registry.acquire("r", waiter: 3)).added == ["r"], "the next reference asks again")
    }

    @Test("a late answer to an earlier AddMatch does not activate a rule added again since")
    func staleAnswer() {
        var registry = Registry(connected: true)
        let old = Effects(registry.acquire("r", waiter: 1)).generations["r"]!
        #expect(Effects(registry.release("r")) == Effects(removed: ["r"], failed: [1]))
        let new = Effects(registry.acquire("r", waiter: 2)).generations["r"]!
        #expect(old != new)
        #expect(Effects(registry.answered("r", generation: old, .success(()))) == Effects())
        #expect(!registry.isActive("r"))
        #expect(Effects(registry.answered("r", generation: new, .success(()))) == Effects(succeeded: [2]))
    }

    @Test("without reconnection, a lost connection forgets every rule and later references fail at once")
    func lostForGood() {
        var registry = Registry(connected: true)
        let generation = Effects(registry.acquire("active", waiter: 1)).generations["active"]!
        _ = registry.answered("active", generation: generation, .success(()))
        _ = registry.acquire("pending", waiter: 2)
        #expect(Effects(registry.disconnected(keepRules: false)) == Effects(failed: [2]))
        #expect(registry.rules.isEmpty, "no reference count leaks")
        // The bug this guards against: a reference to a rule that was active before the
        // disconnection waited forever for an answer nothing would send.
        #expect(Effects(registry.acquire("active", waiter: 3)) == Effects(failed: [3]))
        #expect(registry.count(of: "active") == 0)
    }

    @Test("with reconnection, counted rules are added again on the new connection")
    func reconnection() {
        var registry = Registry(connected: true)
        for rule in ["a", "b"] {
            let generation = Effects(registry.acquire(rule, waiter: 0)).generations[rule]!
            _ = registry.answered(rule, generation: generation, .success(()))
        }
        _ = registry.release("b")
        #expect(Effects(registry.disconnected(keepRules: true)) == Effects())
        #expect(Effects(registry.acquire("a", waiter: 5)) == Effects(failed: [5]), "refused while down")
        #expect(Effects(registry.release("a")) == Effects(), "no RemoveMatch while down")
        _ = registry.disconnected(keepRules: true)
        var fresh = Registry(connected: true)
        let generation = Effects(fresh.acquire("a", waiter: 0)).generations["a"]!
        _ = fresh.answered("a", generation: generation, .success(()))
        _ = fresh.acquire("a", waiter: 0)
        _ = fresh.disconnected(keepRules: true)
        let again = Effects(fresh.reconnected())
        #expect(again.added == ["a"])
        #expect(fresh.count(of: "a") == 2)
        #expect(Effects(fresh.acquire("a", waiter: 6)) == Effects(), "waits for the re-add")
        #expect(
            Effects(fresh.answered("a", generation: again.generations["a"]!, .success(()))) == Effects(succeeded: [6]))
    }

    @Test("releasing the last reference while the bus has not answered fails the waiters; closing fails all")
    func releaseWhilePendingAndClose() {
        var registry = Registry(connected: true)
        _ = registry.acquire("r", waiter: 1)
        #expect(Effects(registry.release("r")) == Effects(removed: ["r"], failed: [1]))
        _ = registry.acquire("s", waiter: 2)
        _ = registry.acquire("t", waiter: 3)
        let closed = Effects(registry.closed())
        #expect(Set(closed.failed) == [2, 3])
        #expect(registry.rules.isEmpty)
        #expect(Effects(registry.acquire("s", waiter: 4)) == Effects(failed: [4]))
    }
}

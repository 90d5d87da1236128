// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// Which subscriptions of a connection receive a signal: decided once per signal, by index.
///
/// The bus daemon sends a connection every signal that matches any of its rules; the table
/// then picks the routes whose rules match, by the daemon's own matching rules (see
/// ``MatchRule/matches(_:)``). Rules are indexed by their most selective part, so the cost
/// per signal does not grow with the number of routes:
/// - a rule with `arg0='V'`: a hash lookup of the signal's first argument;
/// - a rule with `arg0path='P'`: one lookup per `/` in the first argument (its ancestors);
/// - any other rule: checked one by one (connections hold few of those).
///
/// A value type with no I/O; the connection's I/O thread owns it.
package struct RouteTable<Payload> {
    /// A route: its rules and what it carries (the deliver and finish closures, for the owner).
    package struct Route {
        package var rules: [MatchRule]
        /// `argNpath='P/'` matches only values equal to or below `P/` (the daemon also sends
        /// values that are prefixes of `P/`, which such a route does not want).
        package var strictArgumentPaths: Bool
        package var payload: Payload

        package init(rules: [MatchRule], strictArgumentPaths: Bool, payload: Payload) {
            self.rules = rules
            self.strictArgumentPaths = strictArgumentPaths
            self.payload = payload
        }
    }

    /// One rule of one route where the index keeps it: a reference, so that walking the
    /// candidates of a signal copies neither the rule nor the route.
    private final class Entry {
        let id: UInt64
        let rule: MatchRule
        let route: Route

        init(id: UInt64, rule: MatchRule, route: Route) {
            self.id = id
            self.rule = rule
            self.route = route
        }
    }

    private var routes: [UInt64: Route] = [:]
    private var byArgument: [String: [Entry]] = [:]
    private var byArgumentPath: [String: [Entry]] = [:]
    private var others: [Entry] = []

    /// The current unique owner of each well-known name that a rule's `sender` names.
    /// Signals carry the sender's unique name, so a rule with `sender='org.example.Name'`
    /// matches a signal whose sender owns that name now.
    package var owners: [String: String] = [:]

    package init() {}

    package var count: Int { routes.count }
    package var isEmpty: Bool { routes.isEmpty }
    package var all: [Route] { Array(routes.values) }

    /// Every well-known name used as a rule's sender.
    package var wellKnownSenders: Set<String> {
        Set(routes.values.flatMap { $0.rules.compactMap(\.sender) }.filter { !$0.hasPrefix(":") })
    }

    package mutating func insert(_ route: Route, id: UInt64) {
        if routes[id] != nil { _ = remove(id: id) }
        routes[id] = route
        for rule in route.rules {
            let entry = Entry(id: id, rule: rule, route: route)
            if let value = rule.arguments[0] {
                byArgument[value, default: []].append(entry)
            } else if let value = rule.argumentPaths[0] {
                byArgumentPath[value, default: []].append(entry)
            } else {
                others.append(entry)
            }
        }
    }

    package mutating func remove(id: UInt64) -> Route? {
        guard let route = routes.removeValue(forKey: id) else { return nil }
        for rule in route.rules {
            if let value = rule.arguments[0] {
                Self.drop(id, from: &byArgument, at: value)
            } else if let value = rule.argumentPaths[0] {
                Self.drop(id, from: &byArgumentPath, at: value)
            } else {
                others.removeAll { $0.id == id }
            }
        }
        return route
    }

    package mutating func removeAll() -> [Route] {
        defer {
            routes = [:]
            byArgument = [:]
            byArgumentPath = [:]
            others = []
        }
        return Array(routes.values)
    }

    private static func drop(_ id: UInt64, from index: inout [String: [Entry]], at value: String) {
        guard var entries = index[value] else { return }
        entries.removeAll { $0.id == id }
        index[value] = entries.isEmpty ? nil : entries
    }

    /// The routes that receive `signal`, each once, in no particular order.
    package func routes(for signal: Signal) -> [Route] {
        var found: [Route] = []
        forEachRoute(for: signal) { _, route, _ in found.append(route) }
        return found
    }

    /// The IDs of the routes that receive `signal`, each once, in no particular order.
    package func routeIDs(for signal: Signal) -> [UInt64] {
        var found: [UInt64] = []
        forEachRoute(for: signal) { id, _, _ in found.append(id) }
        return found
    }

    /// Calls `body` with the ID and the route of each route that receives `signal`, and the
    /// signal itself (so that `body` need not capture it: a closure's capture of a borrowed value
    /// copies it, a retain per field), each once, in no particular order. The candidates are
    /// walked where the index keeps them and the first routes matched are remembered without an
    /// allocation, so the common case (no `arg0path` rule) makes no array and copies neither the
    /// signal nor a rule. `body` must not change the table (a caller whose `body` may, walks a
    /// copy).
    package func forEachRoute(for signal: Signal, _ body: (UInt64, Route, Signal) -> Void) {
        var argument: String?
        var exact: [Entry]?
        if let first = signal.arguments.first {
            switch first {
            case .string(let value):
                argument = value
                exact = byArgument[value]
            case .objectPath(let path): argument = path.rawValue
            default: break
            }
        }
        var matched = MatchedIDs()
        for entry in others where takes(entry, signal, &matched) { body(entry.id, entry.route, signal) }
        for entry in exact ?? [] where takes(entry, signal, &matched) { body(entry.id, entry.route, signal) }
        guard let argument, !byArgumentPath.isEmpty else { return }
        for entry in pathCandidates(argument) where takes(entry, signal, &matched) {
            body(entry.id, entry.route, signal)
        }
    }

    /// Whether `entry`'s route receives `signal` and was not matched before (then it is now).
    private func takes(_ entry: Entry, _ signal: Signal, _ matched: inout MatchedIDs) -> Bool {
        guard !matched.contains(entry.id),
            entry.rule.matches(signal, strictArgumentPaths: entry.route.strictArgumentPaths, owners: owners)
        else { return false }
        matched.insert(entry.id)
        return true
    }

    /// The IDs of the routes a signal matched so far: the first two in place, more in an array.
    private struct MatchedIDs {
        private var first: UInt64?
        private var second: UInt64?
        private var more: [UInt64] = []

        func contains(_ id: UInt64) -> Bool { first == id || second == id || more.contains(id) }

        mutating func insert(_ id: UInt64) {
            if first == nil {
                first = id
            } else if second == nil {
                second = id
            } else {
                more.append(id)
            }
        }
    }

    /// The `arg0path` entries related to `argument`: itself, its ancestors ending in `/`, and
    /// (only when it ends in `/`, which names rarely do) the values below it.
    private func pathCandidates(_ argument: String) -> [Entry] {
        var entries: [Entry] = []
        if let exact = byArgumentPath[argument] { entries += exact }
        let bytes = Array(argument.utf8)
        for index in bytes.indices.dropLast() where bytes[index] == UInt8(ascii: "/") {
            let ancestor = String(decoding: bytes[...index], as: UTF8.self)
            if let found = byArgumentPath[ancestor] { entries += found }
        }
        if argument.hasSuffix("/") {
            for (value, found) in byArgumentPath where value != argument && value.hasPrefix(argument) {
                entries += found
            }
        }
        return entries
    }
}

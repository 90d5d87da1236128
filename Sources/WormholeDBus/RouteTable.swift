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

    private struct Key: Hashable {
        var route: UInt64
        var rule: Int
    }

    private var routes: [UInt64: Route] = [:]
    private var byArgument: [String: [Key]] = [:]
    private var byArgumentPath: [String: [Key]] = [:]
    private var others: [Key] = []

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
        for (index, rule) in route.rules.enumerated() {
            let key = Key(route: id, rule: index)
            if let value = rule.arguments[0] {
                byArgument[value, default: []].append(key)
            } else if let value = rule.argumentPaths[0] {
                byArgumentPath[value, default: []].append(key)
            } else {
                others.append(key)
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
                others.removeAll { $0.route == id }
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

    private static func drop(_ id: UInt64, from index: inout [String: [Key]], at value: String) {
        guard var keys = index[value] else { return }
        keys.removeAll { $0.route == id }
        index[value] = keys.isEmpty ? nil : keys
    }

    /// The routes that receive `signal`, each once, in no particular order.
    package func routes(for signal: Signal) -> [Route] { matching(signal).map(\.route) }

    /// The IDs of the routes that receive `signal`, each once, in no particular order.
    package func routeIDs(for signal: Signal) -> [UInt64] { matching(signal).map(\.id) }

    private func matching(_ signal: Signal) -> [(id: UInt64, route: Route)] {
        var candidates: [Key] = others
        if let first = signal.arguments.first {
            let argument: String?
            switch first {
            case .string(let value): argument = value
            case .objectPath(let path): argument = path.rawValue
            default: argument = nil
            }
            if let argument {
                if case .string = first, let keys = byArgument[argument] { candidates += keys }
                if !byArgumentPath.isEmpty { candidates += pathCandidates(argument) }
            }
        }
        var result: [(id: UInt64, route: Route)] = []
        for key in candidates where !result.contains(where: { $0.id == key.route }) {
            guard let route = routes[key.route] else { continue }
            let rule = route.rules[key.rule]
            if rule.matches(signal, strictArgumentPaths: route.strictArgumentPaths, owners: owners) {
                result.append((key.route, route))
            }
        }
        return result
    }

    /// The `arg0path` keys related to `argument`: itself, its ancestors ending in `/`, and
    /// (only when it ends in `/`, which names rarely do) the values below it.
    private func pathCandidates(_ argument: String) -> [Key] {
        var keys: [Key] = []
        if let exact = byArgumentPath[argument] { keys += exact }
        let bytes = Array(argument.utf8)
        for index in bytes.indices.dropLast() where bytes[index] == UInt8(ascii: "/") {
            let ancestor = String(decoding: bytes[...index], as: UTF8.self)
            if let found = byArgumentPath[ancestor] { keys += found }
        }
        if argument.hasSuffix("/") {
            for (value, found) in byArgumentPath where value != argument && value.hasPrefix(argument) { keys += found }
        }
        return keys
    }
}

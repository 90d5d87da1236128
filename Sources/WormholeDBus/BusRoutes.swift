// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Logging
import Synchronization
import WormholeSystem

/// Which subscription of one connection gets a signal: the route table, adding and removing
/// routes with their rules (through ``BusRules``), dispatch of what arrived, the routes each
/// handle of a shared connection added, and the signals announced before they arrive (the
/// doorbell's dedupe, ``ExpectedDuplicates``).
///
/// Loop-confined (owner-confined for what libdbus's filter calls), except the counters: see
/// <doc:Threading>. The connection (``BusIO``) it belongs to owns it.
final class BusRoutes: @unchecked Sendable {
    /// Ids, the address and errors.
    private let link: BusLink
    /// The connection's match rules, which each route's rules are counted in.
    private let rules: BusRules
    /// Jobs on the connection's loop (``BusOutgoing/execute(_:)``).
    private let execute: LoopJobs
    /// The connection's loop.
    private let loop: EventLoop

    init(link: BusLink, rules: BusRules, execute: @escaping LoopJobs) {
        self.link = link
        self.rules = rules
        self.execute = execute
        loop = link.loop
    }

    /// A route as the layers above describe it.
    struct Route {
        /// The route receives a signal when any of its rules matches it.
        var rules: [MatchRule]
        /// `rules` as the bus daemon reads them (their descriptions), made once by the caller.
        var texts: [String]
        /// `argNpath` rules route only values at or below their value (see `BusConnection.addRoute`).
        var strictArgumentPaths: Bool
        var deliver: @Sendable (Signal) -> Void
        var finish: @Sendable () -> Void
        /// The scope that added the route (a shared connection's handle, see ``BusIO/closeScope(_:)``);
        /// 0 for a private connection's routes.
        var scope: UInt64

        /// A route of `rules`, their texts made and checked here, once (``MatchRule/validate()``).
        static func checked(
            _ rules: [MatchRule], _ strictArgumentPaths: Bool, _ deliver: @escaping @Sendable (Signal) -> Void,
            _ finish: @escaping @Sendable () -> Void, scope: UInt64
        ) throws(BusError) -> Route {
            var texts: [String] = []
            texts.reserveCapacity(rules.count)
            for rule in rules {
                let text = rule.description
                try rule.validate(description: text)
                texts.append(text)
            }
            return Route(
                rules: rules, texts: texts, strictArgumentPaths: strictArgumentPaths, deliver: deliver, finish: finish,
                scope: scope)
        }
    }

    /// What a route table entry carries.
    struct Handlers {
        var deliver: @Sendable (Signal) -> Void
        var finish: @Sendable () -> Void
        /// The route's rules as the bus daemon reads them.
        var texts: [String]
        /// The scope that added the route; 0 for none.
        var scope: UInt64
    }

    /// Signals the connection received (after the bus daemon's filtering), for tests and statistics.
    let signalsReceived = Atomic<UInt64>(0)
    /// Signals dropped in the filter, undecoded, because every route they reach had them
    /// already (``expectDuplicate(of:serial:routeID:absorbed:)``).
    let duplicatesAbsorbed = Atomic<UInt64>(0)

    // Loop-confined.
    var table = RouteTable<Handlers>()
    /// The routes each scope added (a shared connection's handles; see ``BusIO/closeScope(_:)``).
    private var scoped: [UInt64: Set<UInt64>] = [:]
    /// Signals announced before they arrive (a doorbell ring came first); owner-confined like
    /// `table`.
    private var expectedDuplicates = ExpectedDuplicates()

    /// How long a blocking add waits for the loop's answer: every call to the bus daemon behind it
    /// has libdbus's default bound (25 s) and the loop answers when it passes; this is the
    /// backstop should the loop never answer.
    static let answerBound: Duration = .seconds(30)

    /// Adds `route` under a new id and blocks until the bus acknowledged every rule; throws why
    /// it could not be added (it is not, then). Not on the I/O thread.
    func addWaiting(_ route: Route) throws(BusError) -> UInt64 {
        precondition(!loop.inEventLoop, "routes must not be added from the connection's I/O thread")
        let id = link.makeID()
        let result = BoundedWait<Result<Void, BusError>?>(nil)
        add(id: id, route) { result.answer($0) }
        switch result.answer(until: ExitDrain.deadline(after: Self.answerBound)) {
        case .success: return id
        case .failure(let error): throw error
        case nil:
            remove(id: id)
            throw noAnswer()
        }
    }

    /// The error of a blocking add that the loop did not answer within ``answerBound``.
    private func noAnswer() -> BusError {
        BusError(
            .timedOut, value: link.address.rawValue,
            "the bus at \(quoted(link.address.rawValue)) did not acknowledge the match rules within \(Self.answerBound)"
        )
    }

    /// Adds `route` under a new id and returns it once the bus acknowledged every rule.
    func add(_ route: Route) async throws -> UInt64 {
        let id = link.makeID()
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            add(id: id, route) { done.resume(with: $0.mapError { $0 as any Error }) }
        }
        return id
    }

    /// Adds every route that could be made (each of `routes` is one, or why not) in one batch
    /// (``add(_:completion:)``) and blocks until the bus answered for all; returns, in order,
    /// each route's id or why it could not be added. Not on the I/O thread.
    func addWaiting(_ routes: [Result<Route, BusError>]) -> [Result<UInt64, BusError>] {
        var results = [Result<UInt64, BusError>?](repeating: nil, count: routes.count)
        var batch: [(id: UInt64, route: Route)] = []
        var positions: [Int] = []
        batch.reserveCapacity(routes.count)
        positions.reserveCapacity(routes.count)
        for (index, route) in routes.enumerated() {
            switch route {
            case .success(let route):
                batch.append((link.makeID(), route))
                positions.append(index)
            case .failure(let error): results[index] = .failure(error)
            }
        }
        if !batch.isEmpty {
            let answer = BoundedWait<[Result<Void, BusError>]?>(nil)
            add(batch) { answer.answer($0) }
            let outcomes: [Result<Void, BusError>]
            if let all = answer.answer(until: ExitDrain.deadline(after: Self.answerBound)) {
                outcomes = all
            } else {
                for entry in batch { remove(id: entry.id) }
                outcomes = Array(repeating: .failure(noAnswer()), count: batch.count)
            }
            for (position, (entry, outcome)) in zip(positions, zip(batch, outcomes)) {
                results[position] = outcome.map { entry.id }
            }
        }
        return results.map { $0! }
    }

    /// Adds a route and its rules; `completion` runs on the I/O thread once the bus acknowledged
    /// every rule (and, for a rule with a well-known sender, told who owns that name). If any
    /// fails, the route is removed and its rules released.
    func add(id: UInt64, _ route: Route, completion: @escaping BusIO.Completion) {
        let accepted = execute { [self] in add(confined: id, route, completion: completion) }
        if !accepted { completion(.failure(link.closedError())) }
    }

    /// Adds many routes in one job on the I/O thread: every `AddMatch` is sent before any answer
    /// is awaited, so the round trips overlap; where the daemon reports refusals of calls sent
    /// without reply (see `quietAddsReported`), they are sent that way, followed by one barrier.
    /// `completion` runs once, on the I/O thread, with each route's outcome in the order of
    /// `batch` (as ``add(id:_:completion:)`` would report it).
    func add(
        _ batch: [(id: UInt64, route: Route)], completion: @escaping @Sendable ([Result<Void, BusError>]) -> Void
    ) {
        let accepted = execute { [self] in
            rules.whenQuietAddsKnown { [self] quiet in
                let outcomes = BatchOutcomes(count: batch.count, completion: completion)
                rules.quietAdds = quiet
                for (index, entry) in batch.enumerated() {
                    add(confined: entry.id, entry.route) { outcomes.record($0, at: index) }
                }
                rules.quietAdds = false
                rules.sendBarrier()
            }
        }
        if !accepted { completion(Array(repeating: .failure(link.closedError()), count: batch.count)) }
    }

    private func add(confined id: UInt64, _ route: Route, completion: @escaping BusIO.Completion) {
        loop.assertInEventLoop()
        table.insert(
            RouteTable.Route(
                rules: route.rules, strictArgumentPaths: route.strictArgumentPaths,
                payload: Handlers(deliver: route.deliver, finish: route.finish, texts: route.texts, scope: route.scope)),
            id: id)
        if route.scope != 0 { scoped[route.scope, default: []].insert(id) }
        let names = Set(route.rules.compactMap(\.sender).filter(BusRules.isWellKnown))
        let outcomes = OutcomeCollector(count: route.rules.count + names.count)
        let finished: @Sendable () -> Void = { [self] in
            guard let all = outcomes.finished() else { return }
            if let failure = all.lazy.compactMap({ if case .failure(let error) = $0 { error } else { nil } }).first {
                remove(confined: id)
                completion(.failure(failure))
            } else {
                completion(.success(()))
            }
        }
        if route.rules.isEmpty && names.isEmpty { completion(.success(())) }
        for text in route.texts {
            rules.perform(
                rules.registry.acquire(
                    text,
                    waiter: { result in
                        outcomes.record(result)
                        finished()
                    }))
        }
        for name in names {
            rules.track(name) { result in
                outcomes.record(result)
                finished()
            }
        }
    }

    /// Removes a route and releases its rules.
    func remove(id: UInt64) {
        _ = execute { [self] in remove(confined: id) }
    }

    /// Removes a route and releases its rules; returns what it carried (nil: no such route).
    @discardableResult
    private func remove(confined id: UInt64) -> Handlers? {
        loop.assertInEventLoop()
        guard let route = table.remove(id: id) else { return nil }
        let scope = route.payload.scope
        if scope != 0 {
            scoped[scope]?.remove(id)
            if scoped[scope]?.isEmpty == true { scoped[scope] = nil }
        }
        for text in route.payload.texts { rules.perform(rules.registry.release(text)) }
        for name in Set(route.rules.compactMap(\.sender).filter(BusRules.isWellKnown)) { rules.untrack(name) }
        return route.payload
    }

    /// Removes the routes `scope` added and finishes them (their streams end). Loop-confined.
    func closeScope(_ scope: UInt64) {
        loop.assertInEventLoop()
        for id in scoped[scope] ?? [] { remove(confined: id)?.finish() }
        scoped[scope] = nil
    }

    /// Removes every route and finishes it, without releasing rules: the connection is closed
    /// for good. Loop-confined.
    func finishAll() {
        loop.assertInEventLoop()
        for route in table.removeAll() { route.payload.finish() }
        scoped = [:]
    }

    /// The connection went away: the owners of names and the announced signals belong to it.
    /// Loop-confined.
    func disconnected() {
        loop.assertInEventLoop()
        table.owners = [:]
        // A new connection's signals never bring those announced on this one.
        expectedDuplicates.removeAll()
    }

    /// Hands a signal that arrived to every route it matches. Owner-confined (libdbus's filter).
    func dispatch(_ signal: Signal) {
        loop.assertOwned()
        // The daemon's own signals to us (NameAcquired) are not counted: only other connections' signals.
        if signal.interface.rawValue != MatchRule.busDaemonName { signalsReceived.add(1, ordering: .relaxed) }
        // A copy: a handler on this thread may change the table (closing the connection
        // finishes every route) while the walk goes on.
        let table = table
        table.forEachRoute(for: signal) { _, route, signal in route.payload.deliver(signal) }
    }

    /// Announces that the signal `probe` (its sender set) with `serial` will arrive, and that the
    /// route `routeID` has already had its content. Owner-confined (the doorbell's rings are read
    /// on the loop).
    func expectDuplicate(of probe: Signal, serial: UInt32, routeID: UInt64, absorbed: @escaping @Sendable () -> Void) {
        loop.assertOwned()
        expectedDuplicates.expect(probe, serial: serial, routeID: routeID, absorbed: absorbed)
    }

    /// In libdbus's filter, before decoding: whether the signal from `sender` with `serial` was
    /// announced and every route it reaches now has had it (then it is dropped here, and each
    /// route's `absorbed` runs). Owner-confined.
    func absorbDuplicate(serial: UInt32, sender: UnsafePointer<CChar>) -> Bool {
        loop.assertOwned()
        HopTrace.mark(.duplicateChecked)
        // Nothing announced (always, without a doorbell): no copy of the table to look.
        guard !expectedDuplicates.isEmpty,
            let absorbers = expectedDuplicates.take(serial: serial, sender: sender, routes: table)
        else {
            return false
        }
        signalsReceived.add(1, ordering: .relaxed)
        duplicatesAbsorbed.add(1, ordering: .relaxed)
        HopTrace.mark(.duplicateDropped)
        for absorbed in absorbers { absorbed() }
        return true
    }
}

/// Gathers the outcomes of several requests that complete on the I/O thread.
/// `@unchecked Sendable`: created and used only on the I/O thread.
final class OutcomeCollector: @unchecked Sendable {
    let count: Int
    var results: [Result<Void, BusError>] = []

    init(count: Int) { self.count = count }

    func record(_ result: Result<Void, BusError>) { results.append(result) }

    /// Every result once all have answered (once only), else `nil`.
    func finished() -> [Result<Void, BusError>]? { results.count == count ? results : nil }
}

/// The outcomes of a batch of routes, each recorded as it is known, handed over once all are.
/// `@unchecked Sendable`: created and used only on the I/O thread.
final class BatchOutcomes: @unchecked Sendable {
    var results: [Result<Void, BusError>?]
    var remaining: Int
    let completion: @Sendable ([Result<Void, BusError>]) -> Void

    init(count: Int, completion: @escaping @Sendable ([Result<Void, BusError>]) -> Void) {
        results = Array(repeating: nil, count: count)
        remaining = count
        self.completion = completion
        if count == 0 { completion([]) }
    }

    func record(_ result: Result<Void, BusError>, at index: Int) {
        guard case .none = results[index] else { return }
        results[index] = result
        remaining -= 1
        if remaining == 0 { completion(results.map { $0! }) }
    }
}

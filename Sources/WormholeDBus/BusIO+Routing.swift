import Glibc
import Logging
import Synchronization
import WormholeSystem

/// Routing: the route table (which subscription gets a signal), dispatch of what arrived, and
/// connection events. The table is loop-confined; see <doc:Threading>.
extension BusIO {
    // MARK: Routes and rules (on the I/O thread)

    /// Adds a route and its rules; `completion` runs on the I/O thread once the bus acknowledged
    /// every rule (and, for a rule with a well-known sender, told who owns that name). If any
    /// fails, the route is removed and its rules released.
    func addRoute(id: UInt64, _ route: Route, completion: @escaping Completion) {
        let accepted = execute { [self] in addRoute(confined: id, route, completion: completion) }
        if !accepted { completion(.failure(closedError())) }
    }

    /// Adds many routes in one job on the I/O thread: every `AddMatch` is sent before any answer
    /// is awaited, so the round trips overlap; where the daemon reports refusals of calls sent
    /// without reply (see `quietAddsReported`), they are sent that way, followed by one barrier.
    /// `completion` runs once, on the I/O thread, with each route's outcome in the order of
    /// `batch` (as ``addRoute(id:_:completion:)`` would report it).
    func addRoutes(
        _ batch: [(id: UInt64, route: Route)], completion: @escaping @Sendable ([Result<Void, BusError>]) -> Void
    ) {
        let accepted = execute { [self] in
            rules.whenQuietAddsKnown { [self] quiet in
                let outcomes = BatchOutcomes(count: batch.count, completion: completion)
                rules.quietAdds = quiet
                for (index, entry) in batch.enumerated() {
                    addRoute(confined: entry.id, entry.route) { outcomes.record($0, at: index) }
                }
                rules.quietAdds = false
                rules.sendBarrier()
            }
        }
        if !accepted { completion(Array(repeating: .failure(closedError()), count: batch.count)) }
    }

    func addRoute(confined id: UInt64, _ route: Route, completion: @escaping Completion) {
        loop.assertInEventLoop()
        routes.insert(
            RouteTable.Route(
                rules: route.rules, strictArgumentPaths: route.strictArgumentPaths,
                payload: Handlers(deliver: route.deliver, finish: route.finish, texts: route.texts, scope: route.scope)),
            id: id)
        if route.scope != 0 { scopedRoutes[route.scope, default: []].insert(id) }
        let names = Set(route.rules.compactMap(\.sender).filter(BusRules.isWellKnown))
        let outcomes = OutcomeCollector(count: route.rules.count + names.count)
        let finished: @Sendable () -> Void = { [self] in
            guard let all = outcomes.finished() else { return }
            if let failure = all.lazy.compactMap({ if case .failure(let error) = $0 { error } else { nil } }).first {
                removeRoute(confined: id)
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
    func removeRoute(id: UInt64) {
        execute { [self] in removeRoute(confined: id) }
    }

    /// Removes a route and releases its rules; returns what it carried (nil: no such route).
    @discardableResult
    func removeRoute(confined id: UInt64) -> Handlers? {
        loop.assertInEventLoop()
        guard let route = routes.remove(id: id) else { return nil }
        let scope = route.payload.scope
        if scope != 0 {
            scopedRoutes[scope]?.remove(id)
            if scopedRoutes[scope]?.isEmpty == true { scopedRoutes[scope] = nil }
        }
        for text in route.payload.texts { rules.perform(rules.registry.release(text)) }
        for name in Set(route.rules.compactMap(\.sender).filter(BusRules.isWellKnown)) { rules.untrack(name) }
        return route.payload
    }

    /// Hands a signal that arrived to every route it matches. Owner-confined (libdbus's filter).
    func dispatch(_ signal: Signal) {
        loop.assertOwned()
        // The daemon's own signals to us (NameAcquired) are not counted: only other connections' signals.
        if signal.interface.rawValue != MatchRule.busDaemonName { signalsReceived.add(1, ordering: .relaxed) }
        for route in routes.routes(for: signal) { route.payload.deliver(signal) }
    }

    // MARK: Duplicates announced in advance (the doorbell's dedupe, ``ExpectedDuplicates``)

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
        guard let absorbers = expectedDuplicates.take(serial: serial, sender: sender, routes: routes) else {
            return false
        }
        signalsReceived.add(1, ordering: .relaxed)
        duplicatesAbsorbed.add(1, ordering: .relaxed)
        HopTrace.mark(.duplicateDropped)
        for absorbed in absorbers { absorbed() }
        return true
    }

    // MARK: Events

    func addEventHandler(scope: UInt64 = 0, _ handler: @escaping @Sendable (BusConnectionEvent) -> Void) -> UInt64 {
        let id = makeID()
        shared.withLock {
            $0.eventHandlers[id] = handler
            if scope != 0 { $0.eventScopes[id] = scope }
        }
        return id
    }

    func removeEventHandler(_ id: UInt64) {
        shared.withLock {
            $0.eventHandlers[id] = nil
            $0.eventScopes[id] = nil
        }
    }

    func report(_ event: BusConnectionEvent) {
        loop.assertInEventLoop()
        // In the order they were added (IDs increase): a layer above that added its handler
        // first (a notification center's catch-up) has acted when a later one runs.
        let handlers = shared.withLock { $0.eventHandlers.sorted { $0.key < $1.key }.map(\.value) }
        for handler in handlers { handler(event) }
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

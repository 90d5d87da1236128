import WormholeSystem

/// Owners of well-known sender names: a route whose rule names a well-known sender is given
/// signals from that name's current owner. Loop-confined; see <doc:Threading>.
extension BusIO {
    // MARK: Owners of well-known sender names

    static func isWellKnown(_ name: String) -> Bool {
        !name.hasPrefix(":") && name != MatchRule.busDaemonName
    }

    static func ownerRule(for name: String) -> MatchRule {
        MatchRule(
            sender: MatchRule.busDaemonName, interface: InterfaceName(unchecked: "org.freedesktop.DBus"),
            member: MemberName(unchecked: "NameOwnerChanged"), arguments: [0: name])
    }

    /// Starts following who owns `name` (a rule for its `NameOwnerChanged`, then `GetNameOwner`);
    /// `completion` runs once the owner is known. Loop-confined.
    func track(_ name: String, completion: @escaping Completion) {
        loop.preconditionInEventLoop()
        trackedNames[name, default: 0] += 1
        perform(registry.acquire(Self.ownerRule(for: name).description, waiter: { [self] result in
            if case .failure = result {
                completion(result)
                return
            }
            askOwner(of: name, completion: completion)
        }))
    }

    func askOwner(of name: String, completion: Completion?) {
        loop.preconditionInEventLoop()
        callBus("GetNameOwner", name) { [self] result in
            switch result {
            case .success(let arguments):
                if case .string(let owner)? = arguments.first, trackedNames[name] != nil { routes.owners[name] = owner }
                completion?(.success(()))
            case .failure(let error) where error.dbusName == "org.freedesktop.DBus.Error.NameHasNoOwner":
                routes.owners[name] = nil
                completion?(.success(()))
            case .failure(let error):
                completion?(.failure(error))
            }
        }
    }

    func untrack(_ name: String) {
        loop.preconditionInEventLoop()
        guard let count = trackedNames[name] else { return }
        if count > 1 {
            trackedNames[name] = count - 1
            return
        }
        trackedNames[name] = nil
        routes.owners[name] = nil
        perform(registry.release(Self.ownerRule(for: name).description))
    }

    /// A `NameOwnerChanged` for a tracked name updates the route table's owners. Owner-confined
    /// (called from libdbus's filter while the signal is dispatched).
    func noteOwnerChange(_ signal: Signal) {
        loop.preconditionOwned()
        guard signal.sender == MatchRule.busDaemonName && signal.member.rawValue == "NameOwnerChanged",
            signal.arguments.count == 3, case .string(let name) = signal.arguments[0], trackedNames[name] != nil,
            case .string(let owner) = signal.arguments[2]
        else { return }
        routes.owners[name] = owner.isEmpty ? nil : owner
    }
}

// SPDX-License-Identifier: Apache-2.0
import Logging
import Synchronization
import WormholeSystem

/// The match rules one connection holds at the bus daemon: each rule counted once however many
/// routes and handles want it (``RuleRegistry``), the rules each handle of a shared connection
/// took, the owners of the well-known sender names routes follow, the calls to the daemon, and
/// `AddMatch` batches sent without replies behind one barrier.
///
/// Loop-confined (see <doc:Threading>), except ``quietAddsKnown``: every method runs on the
/// process's loop, with the connection (``BusIO``) it belongs to, which owns it.
final class BusRules: @unchecked Sendable {
    /// The libdbus connection and its phase, the loop, logger and errors.
    private let link: BusLink
    /// Jobs on the connection's loop (``BusOutgoing/execute(_:)``).
    private let execute: LoopJobs
    /// Tells the route table who owns a well-known sender name now (`nil`: nobody). Loop-confined.
    private let setOwner: (_ name: String, _ owner: String?) -> Void

    init(link: BusLink, execute: @escaping LoopJobs, setOwner: @escaping (_ name: String, _ owner: String?) -> Void) {
        self.link = link
        self.execute = execute
        self.setOwner = setOwner
    }

    var registry = RuleRegistry<BusIO.Completion>(connected: true)
    /// Routes per well-known sender name whose owner the route table must know.
    var trackedNames: [String: Int] = [:]
    /// The rules each scope took with ``acquireRule(_:scope:completion:)``, with their counts.
    var scopedRules: [UInt64: [String: Int]] = [:]
    /// Whether the bus daemon on this connection reports a refused `AddMatch` sent with the
    /// no-reply flag (dbus-daemon 1.14 does; dbus-broker 33 stays silent, as the D-Bus
    /// specification allows): `nil` until asked once per connection (``whenQuietAddsKnown(_:)``).
    /// When it does, a batch of routes sends its `AddMatch` calls without asking for replies
    /// and one `GetId` after them: the daemon handles a connection's messages in order, so
    /// `GetId`'s answer means every rule before it is active, and each refused rule has had
    /// its error (naming its serial, so the rule). This spares the daemon one reply per rule,
    /// most of its work for a batch (docs/performance.md, *Figures behind the design*).
    var quietAddsReported: Bool? {
        didSet { quietAddsKnown.store(quietAddsReported.map { $0 ? 2 : 1 } ?? 0, ordering: .relaxed) }
    }
    /// `quietAddsReported` for other threads (tests): 0 not known, 1 no, 2 yes.
    let quietAddsKnown = Atomic<UInt8>(0)
    /// Batches waiting for the answer to the question above, and the probe asking it.
    var quietAddsWaiters: [(Bool) -> Void] = []
    var probe: (serial: UInt32, refused: Bool, generation: UInt64)?
    var probeGeneration: UInt64 = 0
    /// While a batch's job runs: `AddMatch` goes out without asking for a reply.
    var quietAdds = false
    /// `AddMatch` calls sent without reply by serial, until refused or acknowledged by a barrier.
    var quietMatches: [UInt32: (rule: String, generation: UInt64)] = [:]
    /// Quiet `AddMatch` calls of the running batch, built and not yet sent: they go out together
    /// (``sendBarrier()``), so that the daemon reads many per wake-up instead of one.
    var unsent: [(message: LibDBus.Message, rule: String, generation: UInt64)] = []
    /// Takes one reference on a rule outside any route (`BusConnection.addMatch`). Loop-confined.
    func acquireRule(_ rule: MatchRule, scope: UInt64 = 0, completion: @escaping BusIO.Completion) {
        link.loop.assertInEventLoop()
        let text = rule.description
        if scope != 0 { scopedRules[scope, default: [:]][text, default: 0] += 1 }
        perform(registry.acquire(text, waiter: completion))
    }

    /// Drops one reference taken with `acquireRule`. Loop-confined.
    func releaseRule(_ rule: MatchRule, scope: UInt64 = 0, completion: BusIO.Completion? = nil) {
        link.loop.assertInEventLoop()
        let text = rule.description
        if scope != 0 {
            // A scope releases only what it took (a second release of one rule is not another's).
            guard let count = scopedRules[scope]?[text] else {
                completion?(.success(()))
                return
            }
            scopedRules[scope]?[text] = count > 1 ? count - 1 : nil
            if scopedRules[scope]?.isEmpty == true { scopedRules[scope] = nil }
        }
        perform(registry.release(text))
        completion?(.success(()))
    }

    /// Carries out what the rule registry asked for. Loop-confined.
    func perform(_ actions: [RuleRegistry<BusIO.Completion>.Action]) {
        link.loop.assertInEventLoop()
        for action in actions {
            switch action {
            case .add(let rule, let generation):
                if quietAdds {
                    addMatchQuietly(rule, generation: generation)
                } else {
                    callBus("AddMatch", rule) { [self] result in
                        perform(registry.answered(rule, generation: generation, result.map { _ in () }))
                    }
                }
            case .remove(let rule):
                // A quiet AddMatch of the rule may wait to be sent: it must reach the daemon first.
                if !unsent.isEmpty { sendBarrier() }
                callBus("RemoveMatch", rule) { [self] result in
                    if case .failure(let error) = result, link.connection != nil {
                        link.logger.warning("the bus refused RemoveMatch: \(error)")
                    }
                }
            case .complete(let waiters, let result):
                for waiter in waiters { waiter(result) }
            }
        }
    }

    /// Calls a method of the bus daemon with one string argument; `completion` gets the reply's
    /// arguments, or the daemon's error. Loop-confined.
    func callBus(
        _ method: String, _ argument: String, completion: @escaping (Result<[DBusValue], BusError>) -> Void
    ) {
        callBus(method, arguments: [.string(argument)], naming: argument, completion: completion)
    }

    /// Calls a method of the bus daemon (`org.freedesktop.DBus`); `completion` gets the reply's
    /// arguments, or the daemon's error, which names `naming`. Loop-confined.
    func callBus(
        _ method: String, arguments: [DBusValue], naming argument: String,
        completion: @escaping (Result<[DBusValue], BusError>) -> Void
    ) {
        callBus(
            method, interface: "org.freedesktop.DBus", arguments: arguments, naming: argument,
            decode: { .success(MessageCoding.readArguments($0)) }, completion: completion)
    }

    /// Runs `request` on the loop and returns what it completes with, from another thread than
    /// the loop's; throws ``BusError/Code/disconnected`` when the connection is closed.
    func onLoop<Reply: Sendable>(
        _ request: @escaping @Sendable (BusRules, @escaping @Sendable (Result<Reply, BusError>) -> Void) -> Void
    ) async throws -> Reply {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Reply, any Error>) in
            let accepted = execute { [self] in request(self) { continuation.resume(with: $0.mapError { $0 }) } }
            if !accepted { continuation.resume(throwing: link.closedError()) }
        }
    }

    /// Calls a method of the bus daemon on `interface` (one of the daemon's own interfaces);
    /// `decode` reads the reply, `completion` gets what it read, or the daemon's error, which
    /// names `naming`. Loop-confined.
    func callBus<Reply>(
        _ method: String, interface: String, arguments: [DBusValue], naming argument: String,
        decode: @escaping (LibDBus.Message) -> Result<Reply, BusError>,
        completion: @escaping (Result<Reply, BusError>) -> Void
    ) {
        link.loop.assertInEventLoop()
        guard let connection = link.connection else {
            completion(.failure(link.notConnected()))
            return
        }
        let message: LibDBus.Message
        do {
            message = try MessageCoding.makeBusCall(method, interface: interface, arguments: arguments)
        } catch {
            completion(.failure(error))
            return
        }
        let sent = connection.call(message) { reply in
            guard let reply else {
                completion(.failure(BusError(.disconnected, value: argument, "no reply to \(method) for \(argument)")))
                return
            }
            if let error = MessageCoding.readError(reply) {
                completion(
                    .failure(
                        BusError(
                            .requestFailed, value: argument, dbusName: error.name,
                            "the bus refused \(method) for \(argument): \(error.message)")))
            } else {
                completion(decode(reply))
            }
        }
        if !sent {
            completion(
                .failure(
                    BusError(
                        .disconnected, value: argument,
                        "cannot send \(method) for \(argument): the connection is closed")))
        }
    }

    // MARK: AddMatch without replies, for batches

    /// The rule of the probe: one every daemon refuses (there is no message type `wormhole-probe`).
    static let probeRule = "type='wormhole-probe'"

    /// Runs `body` with `quietAddsReported` once it is known, asking the daemon first if needed:
    /// the probe is an `AddMatch` of a rule it refuses, sent without reply, then `GetId`. Its
    /// refusal arriving before `GetId`'s answer means refusals are reported. Loop-confined.
    func whenQuietAddsKnown(_ body: @escaping (Bool) -> Void) {
        link.loop.assertInEventLoop()
        if let known = quietAddsReported {
            body(known)
            return
        }
        quietAddsWaiters.append(body)
        guard quietAddsWaiters.count == 1 else { return }  // a probe is on its way
        guard let connection = link.greeted,
            let message = MessageCoding.makeAddMatch(Self.probeRule, noReply: true),
            let serial = connection.sendReturningSerial(message)
        else {
            finishProbe(reported: false)
            return
        }
        probeGeneration &+= 1
        let generation = probeGeneration
        probe = (serial, false, generation)
        callBus("GetId", arguments: [], naming: "GetId") { [self] result in
            guard let asked = probe, asked.generation == generation else { return }
            if case .success = result { quietAddsReported = asked.refused }
            finishProbe(reported: quietAddsReported ?? false)
        }
    }

    /// Hands the probe's answer to the batches waiting for it (`false` when there is none:
    /// they then use one reply per rule). Loop-confined.
    func finishProbe(reported: Bool) {
        link.loop.assertInEventLoop()
        probe = nil
        let waiters = quietAddsWaiters
        quietAddsWaiters = []
        for waiter in waiters { waiter(reported) }
    }

    /// Builds `AddMatch(rule)` without reply, sent with the batch's others by ``sendBarrier()``;
    /// a refusal is an error naming its serial, and the barrier acknowledges it otherwise.
    /// Loop-confined.
    func addMatchQuietly(_ rule: String, generation: UInt64) {
        link.loop.assertInEventLoop()
        guard let message = MessageCoding.makeAddMatch(rule, noReply: true) else {
            perform(
                registry.answered(
                    rule, generation: generation,
                    .failure(
                        BusError(
                            .outOfMemory, value: rule, "libdbus could not build AddMatch for \(rule)"))))
            return
        }
        unsent.append((message, rule, generation))
    }

    /// Sends the batch's quiet `AddMatch` calls, then one `GetId`, whose answer acknowledges
    /// every one of them that was not refused (the daemon answers a connection's calls in
    /// order). Loop-confined.
    func sendBarrier() {
        link.loop.assertInEventLoop()
        guard !unsent.isEmpty else { return }
        let batch = unsent
        unsent = []
        var covered: [UInt32] = []
        covered.reserveCapacity(batch.count)
        for call in batch {
            guard let connection = link.connection, let serial = connection.sendReturningSerial(call.message) else {
                perform(
                    registry.answered(
                        call.rule, generation: call.generation,
                        .failure(
                            BusError(
                                .disconnected, value: call.rule,
                                "cannot send AddMatch for \(call.rule): the connection is closed"))))
                continue
            }
            quietMatches[serial] = (call.rule, call.generation)
            covered.append(serial)
        }
        guard !covered.isEmpty else { return }
        callBus("GetId", arguments: [], naming: "GetId") { [self] result in
            for serial in covered {
                guard let pending = quietMatches.removeValue(forKey: serial) else { continue }
                let outcome: Result<Void, BusError> =
                    switch result {
                    case .success: .success(())
                    case .failure(let error):
                        .failure(
                            BusError(
                                error.code, value: pending.rule, dbusName: error.dbusName,
                                "no answer to AddMatch for \(pending.rule): \(error.message)"))
                    }
                perform(registry.answered(pending.rule, generation: pending.generation, outcome))
            }
        }
    }

    /// Forgets the quiet calls and the probe of a connection that is gone (the registry fails
    /// the waiters); batches waiting for the probe go on without it. Loop-confined.
    func forgetQuietAdds() {
        link.loop.assertInEventLoop()
        quietMatches = [:]
        unsent = []
        quietAddsReported = nil
        if probe != nil || !quietAddsWaiters.isEmpty { finishProbe(reported: false) }
    }

    /// A reply no pending call waited for: the probe's refusal, or the answer to a quiet
    /// `AddMatch` (a refusal, or a daemon that answers calls sent without reply). Owner-confined.
    func quietAddAnswered(serial: UInt32, error: (name: String, message: String)?) {
        link.loop.assertOwned()
        if let asked = probe, asked.serial == serial {
            if error != nil { probe?.refused = true }
            return
        }
        guard let pending = quietMatches.removeValue(forKey: serial) else { return }
        let outcome: Result<Void, BusError> =
            if let error {
                .failure(
                    BusError(
                        .requestFailed, value: pending.rule, dbusName: error.name,
                        "the bus refused AddMatch for \(pending.rule): \(error.message)"))
            } else {
                .success(())  // a daemon that answers even calls sent without reply
            }
        perform(registry.answered(pending.rule, generation: pending.generation, outcome))
    }

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
    func track(_ name: String, completion: @escaping BusIO.Completion) {
        link.loop.assertInEventLoop()
        trackedNames[name, default: 0] += 1
        perform(
            registry.acquire(
                Self.ownerRule(for: name).description,
                waiter: { [self] result in
                    if case .failure = result {
                        completion(result)
                        return
                    }
                    askOwner(of: name, completion: completion)
                }))
    }

    func askOwner(of name: String, completion: BusIO.Completion?) {
        link.loop.assertInEventLoop()
        callBus("GetNameOwner", name) { [self] result in
            switch result {
            case .success(let arguments):
                if case .string(let owner)? = arguments.first, trackedNames[name] != nil {
                    setOwner(name, owner)
                }
                completion?(.success(()))
            case .failure(let error) where error.dbusName == "org.freedesktop.DBus.Error.NameHasNoOwner":
                setOwner(name, nil)
                completion?(.success(()))
            case .failure(let error):
                completion?(.failure(error))
            }
        }
    }

    func untrack(_ name: String) {
        link.loop.assertInEventLoop()
        guard let count = trackedNames[name] else { return }
        if count > 1 {
            trackedNames[name] = count - 1
            return
        }
        trackedNames[name] = nil
        setOwner(name, nil)
        perform(registry.release(Self.ownerRule(for: name).description))
    }

    /// A `NameOwnerChanged` for a tracked name updates the route table's owners. Owner-confined
    /// (called from libdbus's filter while the signal is dispatched).
    func noteOwnerChange(_ signal: Signal) {
        link.loop.assertOwned()
        guard signal.sender == MatchRule.busDaemonName && signal.member.rawValue == "NameOwnerChanged",
            signal.arguments.count == 3, case .string(let name) = signal.arguments[0], trackedNames[name] != nil,
            case .string(let owner) = signal.arguments[2]
        else { return }
        setOwner(name, owner.isEmpty ? nil : owner)
    }
}

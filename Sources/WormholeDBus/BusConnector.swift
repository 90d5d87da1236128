// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Logging
import WormholeSystem

/// Connecting one connection to its bus: authentication and `Hello` on each new libdbus
/// connection within the connect timeout, giving up a greeting that failed, and bringing the
/// connection back after the bus went away (``Reconnector``, then every rule restored).
///
/// Loop-confined (see <doc:Threading>), except ``Greeting``, the initialiser's wait. The
/// connection (``BusIO``) it belongs to owns it; it moves the link's ``BusLink/phase``.
final class BusConnector: @unchecked Sendable {
    /// What the connector asks of the connection that owns it: the two steps that touch
    /// libdbus's watches and timeouts, which the owner holds. Loop-confined.
    struct Hooks {
        /// Installs the owner's watches and timeouts on a new libdbus connection.
        let install: (LibDBus.Connection) -> Void
        /// Closes the libdbus connection of the moment and drops its watches and timeouts.
        let drop: () -> Void
    }

    /// The libdbus connection and its phase, the loop, the locked state and the logger.
    private let link: BusLink
    /// The match rules, restored after a reconnection.
    private let rules: BusRules
    /// Where `.reconnected` is reported.
    private let events: BusEvents
    /// Jobs on the connection's loop (``BusOutgoing/execute(_:)``).
    private let execute: LoopJobs
    private let hooks: Hooks

    init(link: BusLink, rules: BusRules, events: BusEvents, execute: @escaping LoopJobs, hooks: Hooks) {
        self.link = link
        self.rules = rules
        self.events = events
        self.execute = execute
        self.hooks = hooks
    }

    /// A greeting that failed inside a libdbus callback: the connection is given up after the
    /// dispatch returns (closing it from inside would free it under libdbus's feet).
    private(set) var greetingFailure: BusError?
    /// When the greeting in flight gives up (monotonic milliseconds), whatever libdbus does: a
    /// daemon killed during authentication can leave libdbus with neither a reply nor a timeout
    /// to report, and the greeting would wait forever (seen in restart storms).
    private(set) var greetingDeadline: UInt64?
    private var reconnector: Reconnector?

    /// The initialiser's wait for the first `Hello` answer.
    final class Greeting: Sendable {
        private let outcome = BoundedWait<Result<Void, BusError>?>(nil)

        /// The first outcome stays: the loop's, or the initialiser's own when it stopped waiting.
        func complete(_ result: Result<Void, BusError>) { outcome.answer(result) }

        func wait(timeout: DispatchTime) -> Result<Void, BusError> {
            if let result = outcome.answer(until: timeout) { return result }
            complete(
                .failure(BusError(.connectionFailed, "no answer to Hello in time (the I/O thread did not report)")))
            return outcome.answer(until: .now()) ?? .failure(BusError(.connectionFailed, "no answer"))
        }
    }

    private var address: BusAddress { link.address }

    /// Sends `Hello` on a new connection (libdbus authenticates first, through the watches) and
    /// moves to `.ready` with its answer, or gives the connection up when the deadline passes.
    func greet(_ connection: LibDBus.Connection) {
        link.loop.assertInEventLoop()
        let connectTimeout = link.connectTimeout
        let seconds = connectTimeout.components.seconds
        let milliseconds = Int32(
            clamping: seconds * 1_000 + connectTimeout.components.attoseconds / 1_000_000_000_000_000)
        // libdbus's own timeout for Hello first; this one only if libdbus never reports.
        greetingDeadline = EventLoop.nowMilliseconds() + UInt64(max(1, milliseconds)) + 250
        let context = "the bus at \(quoted(address.rawValue))"
        let sent: Bool
        do {
            sent = connection.call(
                try MessageCoding.makeBusCall("Hello", arguments: []), timeoutMilliseconds: max(1, milliseconds)
            ) {
                [self] reply in
                greeted(
                    connection,
                    reply.map(Self.helloOutcome)
                        ?? .failure(
                            BusError(
                                .connectionFailed, value: address.rawValue,
                                "\(context) closed the connection before answering Hello")))
            }
        } catch {
            sent = false
        }
        if !sent {
            greeted(
                connection,
                .failure(BusError(.connectionFailed, value: address.rawValue, "cannot send Hello to \(context)")))
        }
    }

    private static func helloOutcome(_ reply: LibDBus.Message) -> Result<String, BusError> {
        if let error = MessageCoding.readError(reply) {
            return .failure(BusError(.connectionFailed, dbusName: error.name, error.message))
        }
        guard case .string(let name)? = MessageCoding.readArguments(reply).first else {
            return .failure(BusError(.connectionFailed, "the answer to Hello carries no unique name"))
        }
        return .success(name)
    }

    /// The bus answered (or did not answer) `Hello` on `connection`.
    private func greeted(_ connection: LibDBus.Connection, _ outcome: Result<String, BusError>) {
        link.loop.assertInEventLoop()
        guard case .greeting(let initial) = link.phase, link.connection == connection else { return }
        var outcome = outcome
        if case .success(let name) = outcome, !connection.setUniqueName(name) {
            outcome = .failure(BusError(.outOfMemory, "libdbus could not record the unique name"))
        }
        switch outcome {
        case .success(let name):
            link.phase = .ready
            greetingDeadline = nil
            link.shared.withLock {
                $0.uniqueName = name
                $0.session &+= 1
                $0.connected = true
            }
            if let initial {
                initial.complete(.success(()))
            } else {
                restoreRules()
            }
        case .failure(let error):
            greetingFailure =
                error.dbusName == "org.freedesktop.DBus.Error.NoReply"
                ? greetingTimedOut(dbusName: error.dbusName)
                : BusError(
                    .connectionFailed, value: address.rawValue, dbusName: error.dbusName,
                    "cannot connect to the bus at \(quoted(address.rawValue)): it refused the connection: \(error.message)"
                )
        }
    }

    /// The error of a greeting that ran out of time. Two clocks can see it first, with the same
    /// deadline: libdbus's timeout of the `Hello` call, and the loop's deadline of the whole
    /// greeting (authentication included); both say the same.
    private func greetingTimedOut(dbusName: String? = nil) -> BusError {
        BusError(
            .connectionFailed, value: address.rawValue, dbusName: dbusName,
            "cannot connect to the bus at \(quoted(address.rawValue)): it did not answer within \(link.connectTimeout) "
                + "(authentication and Hello); is the bus daemon stopped?")
    }

    /// At the end of a loop iteration, outside any libdbus call: a greeting past its deadline
    /// fails, and a failed greeting's connection is given up.
    func iterationEnded() {
        if let deadline = greetingDeadline, EventLoop.nowMilliseconds() >= deadline {
            greetingDeadline = nil
            if case .greeting = link.phase, greetingFailure == nil {
                greetingFailure = greetingTimedOut()
            }
        }
        if let greetingFailure { abandonGreeting(greetingFailure) }
    }

    /// The connection went away while greeting: the greeting fails (the initialiser throws, or
    /// the reconnector tries again); nobody was told the connection was up, so nobody is told it
    /// went down. Loop-confined.
    func lostWhileGreeting() {
        abandonGreeting(
            greetingFailure
                ?? BusError(
                    .connectionFailed, value: address.rawValue,
                    "cannot connect to the bus at \(quoted(address.rawValue)): it closed the connection during authentication"
                ))
    }

    /// Gives up a connection whose greeting failed: outside any libdbus call. Loop-confined.
    private func abandonGreeting(_ failure: BusError) {
        link.loop.assertInEventLoop()
        greetingFailure = nil
        greetingDeadline = nil
        guard case .greeting(let initial) = link.phase else { return }
        hooks.drop()
        if let initial {
            initial.complete(.failure(failure))
        } else if !link.shared.withLock({ $0.stopping }) {
            link.logger.info("reconnecting: \(failure.message)")
            startReconnecting()
        }
    }

    func startReconnecting() {
        link.loop.assertInEventLoop()
        link.phase = .greeting(initial: nil)
        reconnector?.cancel()
        reconnector = Reconnector(address: address, logger: link.logger) { [self] connection in
            let handover = Handover(connection)
            // The new connection passes to the I/O thread's connection job (the same thread),
            // which owns it from then on.
            let accepted = execute { [self] in adoptReconnected(handover.connection) }
            if !accepted { handover.connection.closeAndRelease() }
        }
    }

    /// Stops reconnecting: the connection is closing. Loop-confined.
    func stopReconnecting() {
        reconnector?.cancel()
        reconnector = nil
    }

    /// Called on the I/O thread with a new connection from the reconnector: greet the bus on it.
    private func adoptReconnected(_ connection: LibDBus.Connection) {
        link.loop.assertInEventLoop()
        stopReconnecting()
        if link.shared.withLock({ $0.stopping }) {
            connection.closeAndRelease()
            return
        }
        link.connection = connection
        link.phase = .greeting(initial: nil)
        hooks.install(connection)
        greet(connection)
    }

    /// After a reconnection's `Hello`: re-add every rule, learn the tracked names' owners, then
    /// report `.reconnected`.
    private func restoreRules() {
        link.loop.assertInEventLoop()
        let actions = rules.registry.reconnected()
        let names = Array(rules.trackedNames.keys)
        let remaining = OutcomeCollector(count: actions.count + names.count)
        link.logger.info(
            "reconnected to the bus", metadata: ["address": "\(address.rawValue)", "rules": "\(actions.count)"])
        if actions.isEmpty && names.isEmpty {
            events.report(.reconnected)
            return
        }
        let counted: BusIO.Completion = { [self] result in
            if case .failure(let error) = result {
                link.logger.error("could not restore a match rule after reconnecting: \(error)")
            }
            remaining.record(result)
            if remaining.finished() != nil { events.report(.reconnected) }
        }
        for action in actions {
            guard case .add(let rule, let generation) = action else { continue }
            rules.callBus("AddMatch", rule) { [rules] result in
                rules.perform(rules.registry.answered(rule, generation: generation, result.map { _ in () }))
                counted(result.map { _ in () })
            }
        }
        for name in names { rules.askOwner(of: name, completion: counted) }
    }
}

/// Moves a freshly opened connection from the thread that opened it to the I/O thread.
/// `@unchecked Sendable`: the opening thread never touches the connection after handing it over.
private final class Handover: @unchecked Sendable {
    let connection: LibDBus.Connection
    init(_ connection: LibDBus.Connection) { self.connection = connection }
}

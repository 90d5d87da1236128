// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Logging
import WormholeSystem

/// Connecting one connection to its bus: authentication and `Hello` on each new libdbus
/// connection within the connect timeout, giving up a greeting that failed, and bringing the
/// connection back after the bus went away (``Reconnector``, then every rule restored).
///
/// Loop-confined (see <doc:Threading>), except ``Greeting``, the initialiser's wait. The
/// connection (``BusIO``) it belongs to owns it and moves its ``BusIO/phase``.
final class BusConnector: @unchecked Sendable {
    /// The connection: its libdbus connection, phase, loop, rules, routes and logger.
    unowned let io: BusIO

    init(io: BusIO) { self.io = io }

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
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<Void, BusError>?>(nil)

        func complete(_ result: Result<Void, BusError>) {
            let first = outcome.withLock { value -> Bool in
                if value != nil { return false }
                value = result
                return true
            }
            if first { done.signal() }
        }

        func wait(timeout: DispatchTime) -> Result<Void, BusError> {
            if done.wait(timeout: timeout) == .timedOut {
                complete(
                    .failure(BusError(.connectionFailed, "no answer to Hello in time (the I/O thread did not report)")))
            }
            return outcome.withLock { $0 } ?? .failure(BusError(.connectionFailed, "no answer"))
        }
    }

    private var address: BusAddress { io.address }

    /// Sends `Hello` on a new connection (libdbus authenticates first, through the watches) and
    /// moves to `.ready` with its answer, or gives the connection up when the deadline passes.
    func greet(_ connection: LibDBus.Connection) {
        io.loop.assertInEventLoop()
        let connectTimeout = io.connectTimeout
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
        io.loop.assertInEventLoop()
        guard case .greeting(let initial) = io.phase, io.connection == connection else { return }
        var outcome = outcome
        if case .success(let name) = outcome, !connection.setUniqueName(name) {
            outcome = .failure(BusError(.outOfMemory, "libdbus could not record the unique name"))
        }
        switch outcome {
        case .success(let name):
            io.phase = .ready
            greetingDeadline = nil
            io.shared.withLock {
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
            "cannot connect to the bus at \(quoted(address.rawValue)): it did not answer within \(io.connectTimeout) "
                + "(authentication and Hello); is the bus daemon stopped?")
    }

    /// At the end of a loop iteration, outside any libdbus call: a greeting past its deadline
    /// fails, and a failed greeting's connection is given up.
    func iterationEnded() {
        if let deadline = greetingDeadline, EventLoop.nowMilliseconds() >= deadline {
            greetingDeadline = nil
            if case .greeting = io.phase, greetingFailure == nil {
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
        io.loop.assertInEventLoop()
        greetingFailure = nil
        greetingDeadline = nil
        guard case .greeting(let initial) = io.phase else { return }
        io.connection?.closeAndRelease()
        io.connection = nil
        io.clearWatchesAndTimeouts()
        if let initial {
            initial.complete(.failure(failure))
        } else if !io.shared.withLock({ $0.stopping }) {
            io.logger.info("reconnecting: \(failure.message)")
            startReconnecting()
        }
    }

    func startReconnecting() {
        io.loop.assertInEventLoop()
        io.phase = .greeting(initial: nil)
        reconnector?.cancel()
        let io = self.io
        reconnector = Reconnector(address: address, logger: io.logger) { connection in
            let handover = Handover(connection)
            // The new connection passes to the I/O thread's connection job (the same thread),
            // which owns it from then on.
            let accepted = io.execute { io.connector.adoptReconnected(handover.connection) }
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
        io.loop.assertInEventLoop()
        stopReconnecting()
        if io.shared.withLock({ $0.stopping }) {
            connection.closeAndRelease()
            return
        }
        io.connection = connection
        io.phase = .greeting(initial: nil)
        connection.installMainLoop(io)
        greet(connection)
    }

    /// After a reconnection's `Hello`: re-add every rule, learn the tracked names' owners, then
    /// report `.reconnected`.
    private func restoreRules() {
        io.loop.assertInEventLoop()
        let rules = io.rules!
        let actions = rules.registry.reconnected()
        let names = Array(rules.trackedNames.keys)
        let remaining = OutcomeCollector(count: actions.count + names.count)
        io.logger.info(
            "reconnected to the bus", metadata: ["address": "\(address.rawValue)", "rules": "\(actions.count)"])
        if actions.isEmpty && names.isEmpty {
            io.events.report(.reconnected)
            return
        }
        let counted: BusIO.Completion = { [self] result in
            if case .failure(let error) = result {
                io.logger.error("could not restore a match rule after reconnecting: \(error)")
            }
            remaining.record(result)
            if remaining.finished() != nil { io.events.report(.reconnected) }
        }
        for action in actions {
            guard case .add(let rule, let generation) = action else { continue }
            rules.callBus("AddMatch", rule) { result in
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

import Logging
import WormholeSystem

/// Greeting and connecting: authentication and `Hello` on each new connection, within the
/// connect timeout, and losing and regaining the bus. Loop-confined; see <doc:Threading>.
extension BusIO {
    // MARK: The loop (EventLoopHandler)

    func loopStarted() {
        loop.assertInEventLoop()
        guard let connection else { return }
        connection.installMainLoop(self)
        greet(connection)
    }

    /// Sends `Hello` on a new connection (libdbus authenticates first, through the watches) and
    /// moves to `.ready` with its answer, or gives the connection up when the deadline passes.
    func greet(_ connection: LibDBus.Connection) {
        loop.assertInEventLoop()
        let seconds = connectTimeout.components.seconds
        let milliseconds = Int32(
            clamping: seconds * 1_000 + connectTimeout.components.attoseconds / 1_000_000_000_000_000)
        // libdbus's own timeout for Hello first; this one only if libdbus never reports.
        greetingDeadline = Self.now() + UInt64(max(1, milliseconds)) + 250
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

    static func helloOutcome(_ reply: LibDBus.Message) -> Result<String, BusError> {
        if let error = MessageCoding.readError(reply) {
            return .failure(BusError(.connectionFailed, dbusName: error.name, error.message))
        }
        guard case .string(let name)? = MessageCoding.readArguments(reply).first else {
            return .failure(BusError(.connectionFailed, "the answer to Hello carries no unique name"))
        }
        return .success(name)
    }

    /// The bus answered (or did not answer) `Hello` on `connection`.
    func greeted(_ connection: LibDBus.Connection, _ outcome: Result<String, BusError>) {
        loop.assertInEventLoop()
        guard case .greeting(let initial) = phase, self.connection == connection else { return }
        var outcome = outcome
        if case .success(let name) = outcome, !connection.setUniqueName(name) {
            outcome = .failure(BusError(.outOfMemory, "libdbus could not record the unique name"))
        }
        switch outcome {
        case .success(let name):
            phase = .ready
            greetingDeadline = nil
            shared.withLock {
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
    func greetingTimedOut(dbusName: String? = nil) -> BusError {
        BusError(
            .connectionFailed, value: address.rawValue, dbusName: dbusName,
            "cannot connect to the bus at \(quoted(address.rawValue)): it did not answer within \(connectTimeout) "
                + "(authentication and Hello); is the bus daemon stopped?")
    }

    /// Gives up a connection whose greeting failed: outside any libdbus call. Loop-confined.
    func abandonGreeting(_ failure: BusError) {
        loop.assertInEventLoop()
        greetingFailure = nil
        greetingDeadline = nil
        guard case .greeting(let initial) = phase else { return }
        connection?.closeAndRelease()
        connection = nil
        clearWatchesAndTimeouts()
        if let initial {
            initial.complete(.failure(failure))
        } else if !shared.withLock({ $0.stopping }) {
            logger.info("reconnecting: \(failure.message)")
            startReconnecting()
        }
    }

    // MARK: Disconnection and reconnection

    func handleDisconnect() {
        loop.assertInEventLoop()
        disconnectPending = false
        if case .greeting = phase {
            // Lost while greeting: the greeting fails (the initialiser throws, or the reconnector
            // tries again); nobody was told the connection was up, so nobody is told it went down.
            abandonGreeting(
                greetingFailure
                    ?? BusError(
                        .connectionFailed, value: address.rawValue,
                        "cannot connect to the bus at \(quoted(address.rawValue)): it closed the connection during authentication"
                    ))
            return
        }
        connection?.closeAndRelease()
        connection = nil
        clearWatchesAndTimeouts()
        let (dropped, stopping) = shared.withLock { state -> (Int, Bool) in
            state.connected = false
            return (state.outgoing.removeAll(), state.stopping)
        }
        wakeRoomWaiters()
        if dropped > 0 {
            logger.warning("dropped \(dropped) queued signal(s): the bus went away before they were written")
        }
        forgetUnconfirmed()
        rules.perform(rules.registry.disconnected(keepRules: automaticReconnect))
        rules.forgetQuietAdds()
        routes.owners = [:]
        // A new connection's signals never bring those announced on this one.
        expectedDuplicates.removeAll()
        logger.info("disconnected from the bus", metadata: ["address": "\(address.rawValue)"])
        report(.disconnected)
        if automaticReconnect {
            if !stopping { startReconnecting() }
        } else {
            for route in routes.removeAll() { route.payload.finish() }
            rules.trackedNames = [:]
            scopedRoutes = [:]
        }
        failConfirmations()
    }

    func startReconnecting() {
        loop.assertInEventLoop()
        phase = .greeting(initial: nil)
        reconnector?.stop()
        reconnector = Reconnector(io: self)
        reconnector?.start()
    }

    /// Called on the I/O thread with a new connection from the reconnector: greet the bus on it.
    func adoptReconnected(_ connection: LibDBus.Connection) {
        loop.assertInEventLoop()
        reconnector?.stop()
        reconnector = nil
        if shared.withLock({ $0.stopping }) {
            connection.closeAndRelease()
            return
        }
        self.connection = connection
        phase = .greeting(initial: nil)
        connection.installMainLoop(self)
        greet(connection)
    }

    /// After a reconnection's `Hello`: re-add every rule, learn the tracked names' owners, then
    /// report `.reconnected`.
    func restoreRules() {
        loop.assertInEventLoop()
        let actions = rules.registry.reconnected()
        let names = Array(rules.trackedNames.keys)
        let remaining = OutcomeCollector(count: actions.count + names.count)
        logger.info(
            "reconnected to the bus", metadata: ["address": "\(address.rawValue)", "rules": "\(actions.count)"])
        if actions.isEmpty && names.isEmpty {
            report(.reconnected)
            return
        }
        let counted: Completion = { [self] result in
            if case .failure(let error) = result {
                logger.error("could not restore a match rule after reconnecting: \(error)")
            }
            remaining.record(result)
            if remaining.finished() != nil { report(.reconnected) }
        }
        for action in actions {
            guard case .add(let rule, let generation) = action else { continue }
            rules.callBus("AddMatch", rule) { [self] result in
                rules.perform(rules.registry.answered(rule, generation: generation, result.map { _ in () }))
                counted(result.map { _ in () })
            }
        }
        for name in names { rules.askOwner(of: name, completion: counted) }
    }
}

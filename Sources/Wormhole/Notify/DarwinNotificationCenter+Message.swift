// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Logging
import WormholeDBus

/// One `Message` signal (contract §7) as a message listener receives it, checked.
enum TransientSignal: Sendable {
    /// A well-formed signal: the name it carries and its payload, checked to be one JSON text.
    case message(name: NotificationName, payload: Data)
    /// A signal for `name` that is not (`s` name, `s` message), whose payload is over the limit
    /// or not JSON: dropped, with the reason (already logged), for the listener to report.
    case malformed(name: NotificationName, reason: String)
}

extension DarwinNotificationCenter {
    // MARK: Transient messages (contract §7)

    /// Emits `Message(name, payload)` on the name's bucket interface. The payload must already
    /// be one compact JSON document of at most `NotifyContract.transientMessageLimit` bytes.
    ///
    /// It travels on the transient connection (``TransientConnection/sender()``); when that connection's
    /// bounded queue cannot take it within ``BusConnection/defaultRefusalWait``, it is refused.
    ///
    /// - Throws: ``BusError`` with ``BusError/Code/disconnected`` while the bus is away,
    ///   ``BusError/Code/queueFull`` when it was refused (nothing was sent).
    func emitMessage(_ name: NotificationName, payload: String) throws {
        let signal = Signal(
            path: NotifyContract.path, interface: NotifyContract.bucket(for: name.rawValue),
            member: NotifyContract.message, arguments: [.string(name.rawValue), .string(payload)])
        let sender = try transient.sender()
        try claimSenderName(on: sender)
        try sender.emit(signal, policy: .refusable(wait: BusConnection.defaultRefusalWait))
    }

    /// The rules that receive the `Message` signals of `target` (a name, or a prefix ending in
    /// `/`): the §1 rules with `member='Message'`, filtered by the bus daemon like `Posted`.
    private static func messageRules(_ target: NotificationName, isPrefix: Bool) -> [MatchRule] {
        isPrefix
            ? [NotifyContract.messageRule(observingPrefix: target)] : NotifyContract.messageRules(observing: target)
    }

    /// Routes the `Message` signals of `target` to `handler` (on the I/O thread); blocking until
    /// the bus acknowledged the rules. Returns the route, for ``removeMessageRoute(_:)``.
    func addMessageRoute(
        _ target: NotificationName, isPrefix: Bool, handler: @escaping @Sendable (TransientSignal) -> Void
    ) throws -> UInt64 {
        let rules = Self.messageRules(target, isPrefix: isPrefix)
        return try connection.addRoute(rules, strictArgumentPaths: true) { [weak self] signal in
            self?.receivedMessage(signal, target: target, isPrefix: isPrefix, handler: handler)
        }
    }

    /// The non-blocking form, for streams.
    func addMessageRoute(
        _ target: NotificationName, isPrefix: Bool, handler: @escaping @Sendable (TransientSignal) -> Void
    ) async throws -> UInt64 {
        let rules = Self.messageRules(target, isPrefix: isPrefix)
        return try await connection.addRoute(rules, strictArgumentPaths: true) { [weak self] signal in
            self?.receivedMessage(signal, target: target, isPrefix: isPrefix, handler: handler)
        }
    }

    /// Routes the `Message` signals of many names at once (each to its handler, on the I/O
    /// thread): every rule is sent to the bus before any answer is awaited. Returns the routes in
    /// the order of `requests`; if any fails, none is kept and the first failure is thrown.
    func addMessageRoutes(
        _ requests: [(name: NotificationName, handler: @Sendable (TransientSignal) -> Void)]
    ) throws -> [UInt64] {
        let routes = requests.map { request in
            BusConnection.RouteRequest(
                rules: Self.messageRules(request.name, isPrefix: false), strictArgumentPaths: true
            ) {
                [weak self] signal in
                self?.receivedMessage(signal, target: request.name, isPrefix: false, handler: request.handler)
            }
        }
        let results = connection.addRoutes(routes)
        var ids: [UInt64] = []
        ids.reserveCapacity(results.count)
        for result in results {
            switch result {
            case .success(let id): ids.append(id)
            case .failure(let error):
                for case .success(let id) in results { connection.removeRoute(id) }
                throw error
            }
        }
        return ids
    }

    /// Removes a route made by `addMessageRoute` and releases its rules.
    func removeMessageRoute(_ id: UInt64) { connection.removeRoute(id) }

    /// Checks one `Message` signal on the I/O thread. The rules chose member, name (or prefix)
    /// and, for a name, the interface; what they do not say is checked here. A signal that
    /// names nothing usable is dropped with a log line; one that names the listener's name but
    /// is otherwise malformed is passed on as ``TransientSignal/malformed(name:reason:)``.
    private func receivedMessage(
        _ signal: Signal, target: NotificationName, isPrefix: Bool, handler: @Sendable (TransientSignal) -> Void
    ) {
        guard let (name, _) = NotifyContract.name(in: signal, routedTo: target, isPrefix: isPrefix) else {
            logger.warning(
                "dropped a malformed Message signal (expected (s name, s message) on the name's interface or the plain one, with a valid name): \(signal)"
            )
            return
        }
        func drop(_ problem: String) {
            let reason = "transient message for \(quoted(name.rawValue)) dropped: \(problem)"
            logger.warning("\(reason)")
            handler(.malformed(name: name, reason: reason))
        }
        guard signal.arguments.count >= 2, case .string(let payload) = signal.arguments[1] else {
            return drop("its arguments are '\(signal.signature)', expected 'ss' (name, message)")
        }
        let size = payload.utf8.count
        if size > NotifyContract.transientMessageLimit {
            return drop("it is \(size) bytes, over the limit of \(NotifyContract.transientMessageLimit) bytes (64 KiB)")
        }
        var text = payload
        if let failure = text.withUTF8({ JSONSyntax.check(UnsafeRawBufferPointer($0)) }) {
            return drop("not a JSON document (\(size) bytes): \(failure)")
        }
        handler(.message(name: name, payload: Data(text.utf8)))
    }
}

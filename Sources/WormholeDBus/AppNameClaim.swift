// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Logging
import Synchronization
import WormholeSystem

// The well-known name a sandboxed sender owns before it emits (contract §8). `xdg-dbus-proxy`,
// between a Flatpak app and the session bus, passes a broadcast signal to the app only when its
// sender owns a name the app may talk to: `<APPID>` and `<APPID>.*` by default. So a connection
// that knows its app ID owns `<APPID>.Wormhole.c<unique>` (unique name without `:`, `.` as `_`)
// before its first signal, and again after every reconnect (a new unique name, a new name).

extension BusError.Code {
    /// The bus, or a proxy between this process and the bus (`xdg-dbus-proxy`), refused the
    /// well-known name a sandboxed sender owns before it emits (contract §8), or the name would
    /// be longer than the 255 bytes D-Bus allows.
    public static let nameRefused = BusError.Code("nameRefused")
}

/// What one connection (one ``BusIO``) knows of its sender name, and the `RequestName` that
/// claims it. Thread-safe.
final class AppNameClaim: Sendable {
    /// A claim on its way: the first asker sends `RequestName`, later askers wait for its answer.
    final class Pending: Sendable {
        let outcome = BoundedWait<Result<Void, BusError>?>(nil)
    }

    enum State {
        case none
        case pending(unique: String, name: String, Pending)
        case owned(unique: String, name: String)
        case refused(unique: String, name: String, BusError)
    }

    let state = Locked<State>(.none)
    /// Whether the connection tells this claim when it goes down (added with the first claim).
    let watching = Atomic<Bool>(false)

    /// Forgets the name: the connection went down, and the name with it. (A restarted daemon
    /// numbers unique names from `:1.0` again, so the unique name alone cannot tell.)
    func forget() { state.withLock { $0 = .none } }

    /// The name owned for `unique` by now, if any (for `doctor` and tests).
    func owned(for unique: String) -> String? {
        state.withLock { state in
            if case .owned(unique, let name) = state { return name }
            return nil
        }
    }

    /// ``BusConnection/claimAppName(appID:timeout:)`` on the connection `io`.
    func claim(appID: String, on io: BusIO, isConnected: () -> Bool, timeout: Duration) throws(BusError) -> String {
        let address = io.address
        if !watching.exchange(true, ordering: .acquiringAndReleasing) {
            // Reported on the I/O thread when the connection is lost, before any reconnection.
            _ = io.events.add { [weak self] event in
                if event == .disconnected { self?.forget() }
            }
        }
        let unique = io.uniqueName
        guard isConnected(), !unique.isEmpty else {
            throw BusError(
                .disconnected, value: address.rawValue, "the connection to \(quoted(address.rawValue)) is down")
        }
        let name = BusConnection.appSenderName(appID: appID, unique: unique)
        if name.utf8.count > 255 {
            throw BusError(
                .nameRefused, value: name,
                "the sender name \(quoted(name)) is \(name.utf8.count) bytes, over the 255 D-Bus allows: use a shorter app ID"
            )
        }
        enum Step {
            case done
            case fail(BusError)
            case wait(Pending)
            case ask(Pending)
        }
        let step = state.withLock { state -> Step in
            switch state {
            case .owned(unique, _): return .done
            case .refused(unique, _, let error): return .fail(error)
            case .pending(unique, _, let pending): return .wait(pending)
            default:
                let pending = Pending()
                state = .pending(unique: unique, name: name, pending)
                return .ask(pending)
            }
        }
        switch step {
        case .done: return name
        case .fail(let error): throw error
        case .wait(let pending):
            if io.isOnIOThread {
                // The pending request may still be a job behind this one: ask again here, so a
                // request is ahead of our signal on the socket (a second one answers "already
                // the owner"; its answer settles nothing).
                requestName(name, unique: unique, on: io, pending: Pending())
                return name
            }
            return try wait(for: pending, name: name, address: address, timeout: timeout)
        case .ask(let pending):
            if io.isOnIOThread {
                requestName(name, unique: unique, on: io, pending: pending)
                return name
            }
            let accepted = io.execute { [self] in requestName(name, unique: unique, on: io, pending: pending) }
            if !accepted {
                settle(
                    pending, unique: unique, name: name, logger: io.logger,
                    .failure(BusError(.disconnected, value: address.rawValue, "the connection is closed")))
            }
            return try wait(for: pending, name: name, address: address, timeout: timeout)
        }
    }

    /// Waits for a claim's answer (every waiter sees it).
    private func wait(for pending: Pending, name: String, address: BusAddress, timeout: Duration) throws(BusError)
        -> String
    {
        guard let outcome = pending.outcome.answer(until: ExitDrain.deadline(after: timeout)) else {
            // Asked again by the next sender; a late answer still settles this claim.
            throw BusError(
                .timedOut, value: name,
                "the bus at \(quoted(address.rawValue)) did not answer RequestName for \(quoted(name)) within \(timeout)"
            )
        }
        if case .failure(let error) = outcome { throw error }
        return name
    }

    /// Sends `RequestName(name, DO_NOT_QUEUE)`; its answer settles `pending`. Loop-confined.
    private func requestName(_ name: String, unique: String, on io: BusIO, pending: Pending) {
        let doNotQueue: UInt32 = 4
        io.rules.callBus("RequestName", arguments: [.string(name), .uint32(doNotQueue)], naming: name) {
            [self] result in
            switch result {
            case .success(let arguments):
                // 1: primary owner, 4: already the owner; 2 (queued) and 3 (exists) are refusals.
                if case .uint32(let code)? = arguments.first, code == 1 || code == 4 {
                    settle(pending, unique: unique, name: name, logger: io.logger, .success(()))
                } else {
                    let code = arguments.first.map(\.description) ?? "nothing"
                    settle(
                        pending, unique: unique, name: name, logger: io.logger,
                        .failure(
                            BusError(
                                .nameRefused, value: name,
                                "the bus did not give \(quoted(name)) to this connection (RequestName answered \(code))"
                            )))
                }
            case .failure(let error) where error.code == .requestFailed:
                settle(
                    pending, unique: unique, name: name, logger: io.logger,
                    .failure(
                        BusError(
                            .nameRefused, value: name, dbusName: error.dbusName,
                            "the bus or a proxy refused the sender name \(quoted(name)) (\(error.dbusName ?? "no error name")): "
                                + "a sandboxed app may own only names below its app ID")))
            case .failure(let error):
                settle(pending, unique: unique, name: name, logger: io.logger, .failure(error))
            }
        }
    }

    /// Records a claim's outcome: owned and refused are kept for the unique name, anything else
    /// (the bus went away, no answer) is forgotten so that the next sender asks again.
    private func settle(
        _ pending: Pending, unique: String, name: String, logger: Logger, _ outcome: Result<Void, BusError>
    ) {
        state.withLock { state in
            guard case .pending(_, _, let current) = state, current === pending else { return }
            switch outcome {
            case .success: state = .owned(unique: unique, name: name)
            case .failure(let error) where error.code == .nameRefused:
                state = .refused(unique: unique, name: name, error)
            case .failure: state = .none
            }
        }
        if case .failure(let error) = outcome, error.code == .nameRefused {
            logger.warning("\(error.message)")
        }
        pending.outcome.answer(outcome)
    }
}

extension BusConnection {
    /// The sender name of app `appID` for the unique name `unique` (contract §8):
    /// `<APPID>.Wormhole.c<unique>`, with the unique name's `:` left out and each `.` written as `_`
    /// (`:1.42` → `org.example.Lines.Wormhole.c1_42`).
    package static func appSenderName(appID: String, unique: String) -> String {
        let digits = String(unique.drop { $0 == ":" }.map { $0 == "." ? "_" : $0 })
        return "\(appID).Wormhole.c\(digits)"
    }

    /// How long a sender waits for the bus to answer its `RequestName`: 5 seconds.
    package static let appNameTimeout: Duration = .seconds(5)

    /// Makes sure this connection owns `<appID>.Wormhole.c<unique>` before the caller emits: asks
    /// the bus once per connection (and once again after each reconnect: a new connection, a new
    /// unique name), then answers from memory. Returns the name owned.
    ///
    /// Off the I/O thread it waits for the bus's answer, at most `timeout`; concurrent callers
    /// wait for the same answer. On the I/O thread it cannot wait: it sends `RequestName` and
    /// returns, and the signal the caller emits next follows the request on the same socket, so
    /// the bus (which handles one connection's messages in order) has given the name before it
    /// routes the signal; a refusal found that way is logged and reported to the next caller.
    ///
    /// - Throws: ``BusError/Code/nameRefused`` (with the bus's D-Bus error name) when the bus or a
    ///   proxy refused the name, or the name is over 255 bytes, remembered for this connection;
    ///   ``BusError/Code/disconnected`` while the bus is away; ``BusError/Code/timedOut`` when it
    ///   did not answer in time (asked again next time).
    package func claimAppName(appID: String, timeout: Duration = appNameTimeout) throws(BusError) -> String {
        try io.appNameClaim.claim(appID: appID, on: io, isConnected: { isConnected }, timeout: timeout)
    }

    /// The name this connection owns for its current unique name, if it claimed one.
    package var ownedAppName: String? { io.appNameClaim.owned(for: io.uniqueName) }
}

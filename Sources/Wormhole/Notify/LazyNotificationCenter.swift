// SPDX-License-Identifier: Apache-2.0
import Logging
import SystemPackage
import WormholeDBus
import WormholeSystem

/// A notification center made on first use; a failed connection is retried next time. The
/// connection is made outside the lock; when two threads connect at once the first wins.
final class LazyNotificationCenter: Sendable {
    private let busAddress: BusAddress?
    private let sharedStateDirectory: String?
    private let wake: PeerWake
    private let logger: Logger
    /// The runtime the center is made in: the one current when the facade was made.
    private let runtime: WormholeRuntime
    private let box = Locked<DarwinNotificationCenter?>(nil)
    /// The last connection failure, when every socket of the address was missing: their paths.
    private let lastFailure = Locked<(BusError, [String])?>(nil)

    /// Whether something is at `path` (any answer but "no such file" counts: try to connect).
    private static func exists(_ path: String) -> Bool {
        do throws(Errno) {
            _ = try Syscall.lstat(path)
            return true
        } catch {
            return error != .noSuchFileOrDirectory
        }
    }

    init(
        busAddress: BusAddress?, sharedStateDirectory: String?, wake: PeerWake = .doorbell, logger: Logger,
        runtime: WormholeRuntime = .current
    ) {
        self.busAddress = busAddress
        self.runtime = runtime
        self.sharedStateDirectory = sharedStateDirectory
        self.wake = wake
        self.logger = logger
    }

    func existing() -> DarwinNotificationCenter? { box.withLock { $0 } }

    /// The bus address a connection is made to (the session bus's when none was given).
    func address() throws -> BusAddress { try busAddress ?? BusAddress.session() }

    /// The error of the last failed connection while every socket it tried is still missing:
    /// a connection now would fail the same way (a stat per path, no connection set up).
    func knownUnreachable() -> BusError? {
        guard let (error, paths) = lastFailure.withLock({ $0 }), paths.allSatisfy({ !Self.exists($0) }) else {
            return nil
        }
        return error
    }

    func get() throws -> DarwinNotificationCenter {
        if let center = existing() { return center }
        // A failed connection to sockets that are still missing fails again: said without trying
        // (on every send while no bus runs).
        if let error = knownUnreachable() { throw error }
        let made: DarwinNotificationCenter
        do {
            made = try WormholeRuntime.$current.withValue(runtime) {
                try DarwinNotificationCenter(
                    busAddress: busAddress, sharedStateDirectory: sharedStateDirectory, wake: wake, logger: logger)
            }
        } catch let error as BusError where error.code == .connectionFailed {
            if let paths = (try? address())?.onlyUnixSocketPaths, paths.allSatisfy({ !Self.exists($0) }) {
                lastFailure.withLock { $0 = (error, paths) }
            }
            throw error
        }
        lastFailure.withLock { $0 = nil }
        let (center, lost) = box.withLock { box -> (DarwinNotificationCenter, Bool) in
            if let existing = box { return (existing, true) }
            box = made
            return (made, false)
        }
        if lost { made.close() }
        return center
    }
}

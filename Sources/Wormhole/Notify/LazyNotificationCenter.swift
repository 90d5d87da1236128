import Logging
import Synchronization
import WormholeDBus

/// A notification center made on first use; a failed connection is retried next time. The
/// connection is made outside the lock; when two threads connect at once the first wins.
final class LazyNotificationCenter: Sendable {
    private let busAddress: BusAddress?
    private let sharedStateDirectory: String?
    private let logger: Logger
    private let box = Mutex<DarwinNotificationCenter?>(nil)

    init(busAddress: BusAddress?, sharedStateDirectory: String?, logger: Logger) {
        self.busAddress = busAddress
        self.sharedStateDirectory = sharedStateDirectory
        self.logger = logger
    }

    func existing() -> DarwinNotificationCenter? { box.withLock { $0 } }

    /// The bus address a connection is made to (the session bus's when none was given).
    func address() throws -> BusAddress { try busAddress ?? BusAddress.session() }

    func get() throws -> DarwinNotificationCenter {
        if let center = existing() { return center }
        let made = try DarwinNotificationCenter(
            busAddress: busAddress, sharedStateDirectory: sharedStateDirectory, logger: logger)
        let (center, lost) = box.withLock { box -> (DarwinNotificationCenter, Bool) in
            if let existing = box { return (existing, true) }
            box = made
            return (made, false)
        }
        if lost { made.close() }
        return center
    }
}

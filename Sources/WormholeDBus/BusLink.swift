// SPDX-License-Identifier: Apache-2.0
import Logging
import Synchronization
import WormholeSystem

/// What the parts of one connection (``BusRules``, ``BusRoutes``, ``BusOutgoing``,
/// ``BusConfirmations``, ``BusConnector``) share, handed to each in place of the coordinator
/// (``BusIO``): the bus's address and the logger, the loop, the state a sender checks under one
/// lock, the libdbus connection of the moment with its phase, ids, and the errors that name the
/// address. Each part gets this and the few calls of the others it makes; none holds ``BusIO``.
///
/// `@unchecked Sendable`: `connection` and `phase` are loop-confined (owner-confined where
/// libdbus's callbacks read them; see <doc:Threading>); the rest is immutable, atomic or behind
/// `shared`.
final class BusLink: @unchecked Sendable {
    let address: BusAddress
    /// How long authentication and `Hello` may take on each connection attempt.
    let connectTimeout: Duration
    let logger: Logger
    let loop: EventLoop
    /// The state a sender checks under one lock (``BusIO/Shared``).
    let shared: Locked<BusIO.Shared>
    private let nextID = Atomic<UInt64>(1)

    // Loop-confined.
    /// The libdbus connection of the moment: `nil` between a loss and the next connection.
    var connection: LibDBus.Connection?
    /// Where `connection` is in its life: greeting the bus, or ready.
    var phase: Phase

    enum Phase {
        /// Authentication and `Hello` are in flight; `initial` carries the waiting initialiser.
        case greeting(initial: BusConnector.Greeting?)
        case ready
    }

    init(
        address: BusAddress, connectTimeout: Duration, logger: Logger, loop: EventLoop, shared: Locked<BusIO.Shared>,
        connection: LibDBus.Connection, phase: Phase
    ) {
        self.address = address
        self.connectTimeout = connectTimeout
        self.logger = logger
        self.loop = loop
        self.shared = shared
        self.connection = connection
        self.phase = phase
    }

    /// The connection once the bus answered its `Hello`, the only one a part may write to or
    /// call on (a message before `Hello` would be the bus's first and end the connection).
    /// Loop-confined.
    var greeted: LibDBus.Connection? {
        guard case .ready = phase else { return nil }
        return connection
    }

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    func closedError() -> BusError {
        BusError(.disconnected, value: address.rawValue, "the connection to \(quoted(address.rawValue)) is closed")
    }

    func notConnected() -> BusError {
        BusError(.disconnected, value: address.rawValue, "not connected to the bus at \(quoted(address.rawValue))")
    }
}

/// Queues a job on the connection's loop behind the signals queued before it
/// (``BusOutgoing/execute(_:)``); false, and the job never runs, once the connection left the loop.
typealias LoopJobs = @Sendable (_ job: @escaping @Sendable () -> Void) -> Bool

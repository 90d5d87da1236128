// SPDX-License-Identifier: Apache-2.0
import Synchronization
import WormholeDBus
import WormholeSystem

/// The doorbell as tests, the bench and `doctor` see it.
package enum DoorbellStatus {
    /// The process's counters, or nil when it has no doorbell.
    package struct Counters: Sendable, Equatable {
        /// Endpoints rung (datagrams delivered to a queue).
        package var sent: UInt64
        /// Rings received and handed to observers.
        package var received: UInt64
        /// Rings refused: another user's, or malformed.
        package var refused: UInt64
        /// Stale registrations removed by this process's rings.
        package var staleRemoved: UInt64
    }

    package static var counters: Counters? {
        guard let doorbell = WormholeRuntime.shared.doorbell else { return nil }
        return Counters(
            sent: doorbell.ringsSent.load(ordering: .relaxed),
            received: doorbell.ringsReceived.load(ordering: .relaxed),
            refused: doorbell.ringsRefused.load(ordering: .relaxed),
            staleRemoved: doorbell.staleRemoved.load(ordering: .relaxed))
    }

    /// The doorbell directory this process uses (`$XDG_RUNTIME_DIR/wormhole/doorbell`), or nil when
    /// its doorbell is off.
    package static var directory: String? { WormholeRuntime.shared.doorbell?.root }

    /// The process's endpoint path while it is open.
    package static var endpoint: String? { WormholeRuntime.shared.doorbell?.endpoint.path }

    /// How many registration listings (open directories) the process keeps now.
    package static var keptListings: Int? { WormholeRuntime.shared.doorbell?.lookup.keptCount }

    /// The bus's hash as a ring carries it.
    package static func busKey(of address: BusAddress) -> UInt64 { DoorbellHash.busKey(of: address) }
}

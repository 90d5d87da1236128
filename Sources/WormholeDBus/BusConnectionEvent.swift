// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// An event the connection reports about itself.
public enum BusConnectionEvent: Hashable, Sendable {
    /// The bus daemon went away or closed the connection. Signals are not delivered until a reconnect.
    case disconnected
    /// A new connection to the same address is up and every active match rule has been re-added and
    /// acknowledged by the bus. Signals emitted while disconnected were missed.
    case reconnected
}

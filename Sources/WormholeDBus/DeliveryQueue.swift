// SPDX-License-Identifier: Apache-2.0
public import Dispatch
import WormholeSystem

/// Where a subscription's handler runs.
///
/// Every callback API of Wormhole takes one (the notification center's observers, the message
/// listeners, the journal and defaults listeners, and the D-Bus layer's
/// `BusConnection.subscribe(_:on:handler:)`), and every delivery of one subscription goes
/// through it, the catch-ups and resumed deliveries too. Wormhole's subscriptions deliver in
/// rounds that never overlap, whatever the choice: two calls of one observer's or listener's
/// handler never run at once, even on a concurrent queue. The D-Bus layer's own subscriptions
/// (`BusConnection.subscribe`, `onConnectionEvent`) hand each signal to the queue as it comes:
/// on a concurrent queue two of their calls may run at once.
///
/// | choice | cost per delivery | handler may block |
/// | --- | --- | --- |
/// | ``ioThread`` | none: runs where the signal was read | no: it stalls every subscription of the connection |
/// | ``queue(_:)`` | one hop to your queue | yes (a serial queue keeps the order) |
/// | ``serial`` | one hop to a private serial queue | yes; the default |
public enum DeliveryQueue: Sendable {
    /// On the connection's I/O thread, the moment the signal is read: the lowest latency.
    /// The handler must return quickly and must not block or wait for the bus (no
    /// `flush(timeout:)`, no adding of subscriptions): every other subscription of the connection
    /// waits behind it.
    case ioThread
    /// On `queue`, in the order the bus delivered. On a concurrent queue a Wormhole
    /// subscription's deliveries still never overlap (each runs after the one before it
    /// returned), while the D-Bus layer's `BusConnection.subscribe` may run two at once.
    case queue(DispatchQueue)
    /// On a serial queue of the subscription's own (the default): in order, never two at once,
    /// and a slow handler holds up nobody else.
    case serial

    /// Runs jobs where this choice says, in submission order for the serial choices.
    package func makeExecutor(label: String) -> DeliveryExecutor {
        switch self {
        case .ioThread: DeliveryExecutor(queue: nil)
        case .queue(let queue): DeliveryExecutor(queue: queue)
        case .serial: DeliveryExecutor(queue: DispatchQueue(label: label))
        }
    }
}

/// The resolved form of a ``DeliveryQueue``: inline (`queue == nil`) or on one queue.
package struct DeliveryExecutor: Sendable {
    /// `nil` runs jobs inline, on the caller's thread (the I/O thread).
    package let queue: DispatchQueue?

    /// Runs `job` inline or on the queue.
    package func run(_ job: @escaping @Sendable () -> Void) {
        if let queue { queue.async(execute: job) } else { job() }
    }
}

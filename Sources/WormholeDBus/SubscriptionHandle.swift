// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// What every subscription handle of Wormhole is: signal subscriptions, connection-event
/// subscriptions, notification observers, message listeners and check tokens.
///
/// One lifetime rule for all of them: a subscription is active from the moment the call
/// that made it returns until ``cancel()`` is called **or the last reference to the handle
/// is released**, whichever comes first. Keep the handle for as long as you want
/// deliveries (a property of the object that owns the handler is the usual place).
/// ``cancel()`` is idempotent; after it returns the handler is not called again (a call
/// already running on its queue finishes). The streams (`AsyncSequence`s) follow the
/// same rule: the subscription goes when the iteration ends or the stream is dropped.
public protocol SubscriptionHandle: AnyObject, Sendable {
    /// Stops deliveries and releases what the subscription holds on the bus. Calling it
    /// again does nothing.
    func cancel()

    /// Whether ``cancel()`` was called (or the subscription ended because its connection closed).
    var isCancelled: Bool { get }
}

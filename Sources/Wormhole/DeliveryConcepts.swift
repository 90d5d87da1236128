// SPDX-License-Identifier: Apache-2.0
import Dispatch

// The delivery and bus concepts an app names (`DeliveryQueue`, `SubscriptionHandle`,
// `SubscriptionStream`, `BusAddress`, `BusError`) are defined in the D-Bus layer, which uses
// them too. `Wormhole` re-exports those five types, and only those, so an app writes
// `import Wormhole` alone and sees no more of the D-Bus layer than Wormhole's own signatures
// name. `WormholeDBus` is not a product: the rest of it is this package's own
// (docs/public-api.md).
@_exported public import struct WormholeDBus.BusAddress
@_exported public import struct WormholeDBus.BusError
@_exported public import enum WormholeDBus.DeliveryQueue
@_exported public import protocol WormholeDBus.SubscriptionHandle
@_exported public import struct WormholeDBus.SubscriptionStream

extension DeliveryQueue {
    /// Delivery on the main actor, for UI code: pass `on: .mainActor` to a listener or an
    /// observer, and its handler runs on the main dispatch queue, the main actor's executor, so
    /// `MainActor.assumeIsolated` in it may update views and other main-actor state directly.
    ///
    /// ```swift
    /// @MainActor final class CounterModel {
    ///     var label = "no press yet"
    ///     var listener: Subscription?
    ///
    ///     func start(_ wormhole: MessageCenter) throws {
    ///         listener = try wormhole.listen(identifier: "button", as: Button.self, on: .mainActor) { delivery in
    ///             MainActor.assumeIsolated {
    ///                 if case .success(let button) = delivery.result { self.label = "pressed \(button.buttonNumber)" }
    ///             }
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// The same as `.queue(.main)`: handlers run in the order of delivery, never two at once, and
    /// the main queue must be running (an app's main loop, `dispatchMain()`, or an `async` main).
    /// Where you can iterate, an `AsyncSequence` consumed in a `@MainActor` task
    /// (`messages(identifier:as:)`, `notifications(name:)`, `changes(forKey:)`) is the first
    /// choice; this is for code that registers callbacks.
    public static var mainActor: DeliveryQueue { .queue(.main) }
}

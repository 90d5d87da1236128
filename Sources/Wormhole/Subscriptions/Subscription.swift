// SPDX-License-Identifier: Apache-2.0
public import WormholeDBus

/// A registered subscription of any kind: a notification observer
/// (``DarwinNotificationCenter/listen(name:on:options:handler:)``), a message listener
/// (``MessageCenter/listen(identifier:as:on:options:handler:)``), a journal listener
/// (``Journal/listen(from:consumer:as:on:handler:)``), a shared-defaults observer
/// (``GroupDefaults/listen(forKey:on:options:initial:handler:)``), or a wake-source subscription
/// (``MessageCenter/onWakeSourceChange(on:_:)``).
///
/// Active until ``cancel()`` or until the last reference to it is released, whichever comes
/// first (the rule of every `SubscriptionHandle`): keep it for as long as you want deliveries.
/// It keeps the bus connection it listens on open.
public final class Subscription: SubscriptionHandle {
    private let core: any SubscriptionCore
    /// Releases what the subscription holds beyond its core (its routes and rules on the bus, its
    /// doorbell registration, its place in the wake engine); run once, by the cancelling call.
    private let detach: @Sendable () -> Void

    init(core: any SubscriptionCore, detach: @escaping @Sendable () -> Void) {
        self.core = core
        self.detach = detach
    }

    deinit { cancel() }

    /// Stops deliveries (like `notify_cancel`) and releases what the subscription holds on the
    /// bus; no handler call starts after this returns (a call already running finishes, and a
    /// durable journal consumer's cursor is stored through the records handled). The last
    /// observer of a name removes its rules from the bus. Calling it twice does nothing.
    public func cancel() {
        // The pump first: no round starts and no handler call begins after this returns.
        guard core.pump.stop() else { return }
        core.forgetPending()
        detach()
    }

    /// Whether ``cancel()`` was called (or the subscription could not go on).
    public var isCancelled: Bool { core.isCancelled }

    /// Holds deliveries (like `notify_suspend`): what arrives meanwhile is kept, merged as the
    /// kind merges a burst. A notification observer keeps the latest post, with how many it
    /// stands for (``DarwinNotification/coalescedCount``); a message listener keeps each mailbox
    /// once (and up to ``MessageCenter/ListenOptions/transientBufferLimit`` transient messages);
    /// a journal listener keeps its cursor; a defaults observer each changed key once. A
    /// delivery already running finishes.
    public func suspend() { core.suspend() }

    /// Resumes deliveries (like `notify_resume`): what was kept while suspended is delivered
    /// through the subscription's `DeliveryQueue` like every other delivery (with
    /// `DeliveryQueue/ioThread`: on the calling thread, never at the same time as a delivery on
    /// the I/O thread), then deliveries go on. Resuming one that is not suspended does nothing.
    public func resume() { core.resume() }

    /// Whether the subscription is suspended.
    package var isSuspended: Bool { core.isSuspended }

    /// A message listener's start-up check, run later: delivers what is stored now, as
    /// ``MessageDelivery/Reason/stored`` deliveries (for a tool that must announce readiness first).
    /// Other kinds have nothing to do here.
    package func deliverStoredMessages() { (core as? any ListenerControl)?.checkStored() }
}

/// The reader of a subscription that only calls back (a tool that reads with its own cursor): a
/// round calls `call` once, however many wakes it stands for.
final class CallbackReader: SubscriptionCore {
    let pump: DeliveryPump
    private let call: @Sendable () -> Void

    init(executor: DeliveryExecutor, call: @escaping @Sendable () -> Void) {
        pump = DeliveryPump(executor: executor)
        self.call = call
    }

    func drainPending() {
        if !pump.isCancelled { call() }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Glibc
import Wormhole
import WormholeDBus
import WormholeSystem

/// `wh_subscription`: the Swift subscriptions behind one C subscription (a message listener of
/// every identifier holds several), the app's user data and its destroy function.
///
/// `@unchecked Sendable`: `state` is touched only with the delivery queue's mutex held (see
/// ``CDeliveryQueue``); everything else is immutable or `Locked`.
final class CSubscription: @unchecked Sendable {
    let queue: CDeliveryQueue
    let state = CSubscriptionState()
    private weak var context: CContext?
    private let handles = Locked<[any SubscriptionHandle]>([])
    private let data: CUserData
    private let destroyFunction: CDestroyFunction?
    /// False when the subscribing call failed: the app keeps its data, nothing is destroyed.
    private let armed = Locked(true)

    init(context: CContext, data: UnsafeMutableRawPointer?, destroy: CDestroyFunction?) {
        queue = context.queue
        self.context = context
        self.data = CUserData(pointer: data)
        destroyFunction = destroy
    }

    /// The app's user data, for the handler.
    var userData: UnsafeMutableRawPointer? { data.pointer }

    /// Queues one delivery; `run` calls the handler on the dispatching thread.
    func deliver(_ run: @escaping () -> Void) {
        queue.enqueue(run, for: self)
    }

    /// Registers the subscription with `context` and runs `listen`, which makes the Swift
    /// subscriptions; a failure leaves nothing registered, and the destroy function is not run
    /// (the call failed: the app still owns its data).
    static func make(
        _ context: CContext, data: UnsafeMutableRawPointer?, destroy: CDestroyFunction?,
        out: UnsafeMutablePointer<OpaquePointer?>?, listen: (CSubscription) throws -> [any SubscriptionHandle]
    ) throws {
        guard let out else { throw CFailure.argument("subscription is NULL") }
        let subscription = CSubscription(context: context, data: data, destroy: destroy)
        try context.track(subscription)
        do {
            let made = try listen(subscription)
            subscription.handles.withLock { $0 = made }
        } catch {
            subscription.armed.withLock { $0 = false }
            subscription.cancel()
            throw error
        }
        out.pointee = handle(subscription)
    }

    func suspend() {
        for handle in handles.withLock({ $0 }) { (handle as? Subscription)?.suspend() }
        queue.setSuspended(true, self)
    }

    func resume() {
        queue.setSuspended(false, self)
        for handle in handles.withLock({ $0 }) { (handle as? Subscription)?.resume() }
    }

    var isCancelled: Bool { queue.isCancelled(self) }

    /// Stops deliveries: no handler call starts after this returns; waits for one running on
    /// another thread; runs the destroy function once nothing runs.
    func cancel() {
        let (first, _) = queue.cancel(self)
        guard first else { return }
        let swift = handles.withLock { handles in
            defer { handles = [] }
            return handles
        }
        for handle in swift { handle.cancel() }
        context?.forget(self)
        if queue.settle(self) { destroy() }
    }

    /// Runs the app's destroy function (once: the queue's `takeDestroy` decides who calls).
    func destroy() {
        if armed.withLock({ $0 }) { destroyFunction?(data.pointer) }
    }
}

// MARK: The C functions

@_cdecl("wh_subscription_suspend")
public func whSubscriptionSuspend(_ subscription: OpaquePointer?, _ error: UnsafeMutablePointer<OpaquePointer?>?)
    -> Int32
{
    cCall(error) { try object(subscription, CSubscription.self, "subscription").suspend() }
}

@_cdecl("wh_subscription_resume")
public func whSubscriptionResume(_ subscription: OpaquePointer?, _ error: UnsafeMutablePointer<OpaquePointer?>?)
    -> Int32
{
    cCall(error) { try object(subscription, CSubscription.self, "subscription").resume() }
}

@_cdecl("wh_subscription_cancel")
public func whSubscriptionCancel(_ subscription: OpaquePointer?) {
    object(subscription, CSubscription.self)?.cancel()
}

@_cdecl("wh_subscription_is_cancelled")
public func whSubscriptionIsCancelled(_ subscription: OpaquePointer?) -> Int32 {
    guard let subscription = object(subscription, CSubscription.self) else { return 1 }
    return subscription.isCancelled ? 1 : 0
}

@_cdecl("wh_subscription_free")
public func whSubscriptionFree(_ subscription: OpaquePointer?) {
    object(subscription, CSubscription.self)?.cancel()
    release(subscription, CSubscription.self)
}

// SPDX-License-Identifier: Apache-2.0
import Glibc
import Wormhole
import WormholeDBus

/// `wh_reason`, as wormhole.h numbers it.
enum CReason: Int32 {
    case posted = 0
    case catchUp = 1
    case stored = 2
    case initial = 3
    case transient = 4
}

/// `wh_notification`: one delivered post, valid while its handler runs.
final class CNotification {
    let name: UnsafeMutablePointer<CChar>
    let notification: DarwinNotification

    init(_ notification: DarwinNotification) {
        self.notification = notification
        name = strdup(notification.name.rawValue)
    }

    deinit { free(name) }
}

/// `wh_notification_handler`.
public typealias CNotificationHandler = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void

/// `wh_check_token`.
final class CCheckToken {
    let token: NotificationCheckToken
    init(_ token: NotificationCheckToken) { self.token = token }
}

/// A C delivery object's handle for the length of one handler call.
func withDelivery(_ object: AnyObject, _ body: (OpaquePointer) -> Void) {
    withExtendedLifetime(object) { body(OpaquePointer(Unmanaged.passUnretained(object).toOpaque())) }
}

/// Observes a name or a prefix for `wh_observe_name` and `wh_observe_prefix`.
private func observe(
    _ context: OpaquePointer?, _ name: UnsafePointer<CChar>?, prefix: Bool, _ flags: UInt32,
    _ handler: CNotificationHandler?, _ data: UnsafeMutableRawPointer?, _ destroy: CDestroyFunction?,
    _ out: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, context, CContext.self, "context") { context in
        let name = try NotificationName(text(name, prefix ? "prefix" : "name"))
        try checkFlags(flags, known: 0x1)
        guard let handler else { throw CFailure.argument("handler is NULL") }
        let options = ObserverOptions(ignoresOwnPosts: flags & 0x1 != 0)
        try CSubscription.make(context, data: data, destroy: destroy, out: out) { subscription in
            let deliver: @Sendable (DarwinNotification) -> Void = { notification in
                subscription.deliver {
                    withDelivery(CNotification(notification)) { handler($0, subscription.userData) }
                }
            }
            return [
                prefix
                    ? try context.center.listen(prefix: name, on: .ioThread, options: options, handler: deliver)
                    : try context.center.listen(name: name, on: .ioThread, options: options, handler: deliver)
            ]
        }
    }
}

@_cdecl("wh_post")
public func whPost(
    _ context: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
)
    -> Int32
{
    cCall(error, context, CContext.self, "context") { context in
        try context.center.post(NotificationName(text(name, "name")))
    }
}

@_cdecl("wh_post_state")
public func whPostState(
    _ context: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ state: UInt64,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, context, CContext.self, "context") { context in
        try context.center.post(NotificationName(text(name, "name")), state: state)
    }
}

@_cdecl("wh_observe_name")
public func whObserveName(
    _ context: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ flags: UInt32, _ handler: CNotificationHandler?,
    _ data: UnsafeMutableRawPointer?, _ destroy: CDestroyFunction?,
    _ subscription: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    observe(context, name, prefix: false, flags, handler, data, destroy, subscription, error)
}

@_cdecl("wh_observe_prefix")
public func whObservePrefix(
    _ context: OpaquePointer?, _ prefix: UnsafePointer<CChar>?, _ flags: UInt32, _ handler: CNotificationHandler?,
    _ data: UnsafeMutableRawPointer?, _ destroy: CDestroyFunction?,
    _ subscription: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    observe(context, prefix, prefix: true, flags, handler, data, destroy, subscription, error)
}

@_cdecl("wh_last_state")
public func whLastState(
    _ context: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ state: UnsafeMutablePointer<UInt64>?,
    _ known: UnsafeMutablePointer<Int32>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, context, CContext.self, "context") { context in
        let name = try NotificationName(text(name, "name"))
        guard let state, let known else { throw CFailure.argument("state or known is NULL") }
        let value = context.center.sharedState(of: name)
        state.pointee = value ?? 0
        known.pointee = value == nil ? 0 : 1
    }
}

@_cdecl("wh_check_token_new")
public func whCheckTokenNew(
    _ context: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ token: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, context, CContext.self, "context") { context in
        let name = try NotificationName(text(name, "name"))
        guard let token else { throw CFailure.argument("token is NULL") }
        token.pointee = handle(CCheckToken(try context.center.makeCheckToken(for: name)))
    }
}

@_cdecl("wh_check_token_check")
public func whCheckTokenCheck(_ token: OpaquePointer?) -> Int32 {
    guard let token = object(token, CCheckToken.self) else { return -1 }
    return token.token.check() ? 1 : 0
}

@_cdecl("wh_check_token_free")
public func whCheckTokenFree(_ token: OpaquePointer?) {
    object(token, CCheckToken.self)?.token.cancel()
    release(token, CCheckToken.self)
}

@_cdecl("wh_notification_name")
public func whNotificationName(_ notification: OpaquePointer?) -> UnsafePointer<CChar>? {
    object(notification, CNotification.self).map { UnsafePointer($0.name) }
}

@_cdecl("wh_notification_state")
public func whNotificationState(_ notification: OpaquePointer?, _ state: UnsafeMutablePointer<UInt64>?) -> Int32 {
    guard let value = object(notification, CNotification.self)?.notification.state else { return 0 }
    state?.pointee = value
    return 1
}

@_cdecl("wh_notification_reason")
public func whNotificationReason(_ notification: OpaquePointer?) -> Int32 {
    object(notification, CNotification.self)?.notification.reason == .catchUp
        ? CReason.catchUp.rawValue : CReason.posted.rawValue
}

@_cdecl("wh_notification_coalesced_count")
public func whNotificationCoalescedCount(_ notification: OpaquePointer?) -> Int64 {
    Int64(object(notification, CNotification.self)?.notification.coalescedCount ?? 0)
}

@_cdecl("wh_notification_is_own_post")
public func whNotificationIsOwnPost(_ notification: OpaquePointer?) -> Int32 {
    object(notification, CNotification.self)?.notification.isOwnPost == true ? 1 : 0
}

// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus

/// `wh_mailbox`: a message center of one group and directory, opened with its context's
/// settings.
final class CMailbox: Sendable {
    let context: CContext
    let center: MessageCenter

    init(_ context: CContext, group: String, directory: String?) throws {
        self.context = context
        center = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group),
            directory: directory.map { try WormholeDirectoryName($0) } ?? .default,
            containerRoot: context.containerRoot, busAddress: context.busAddress, wake: context.wake,
            logger: context.logger("wormhole"))
        context.addFlusher(self) { [weak center] timeout in center?.flush(timeout: timeout) }
    }

    deinit { context.removeFlusher(self) }
}

/// `wh_message`: one delivered message, valid while its handler runs.
final class CMessage {
    let identifier: UnsafeMutablePointer<CChar>
    /// The JSON text, or nil.
    let json: CJSONText?
    let reason: CReason
    let sentAt: UInt64?
    let error: CErrorObject?

    init(_ delivery: MessageDelivery<JSONDocument>) {
        identifier = strdup(delivery.identifier.rawValue)
        switch delivery.result {
        case .success(let document):
            json = CJSONText(document.data)
            error = nil
        case .failure(let failure):
            json = nil
            error = CErrorObject(CFailure(failure))
        }
        reason =
            switch delivery.reason {
            case .posted: .posted
            case .stored: .stored
            case .catchUp: .catchUp
            case .transient: .transient
            }
        sentAt = delivery.sentAt
    }

    /// The report of `count` transient messages of `identifier` dropped before the app's
    /// thread took them (``CTransientBound``).
    init(dropped count: Int, identifier: String) {
        self.identifier = strdup(identifier)
        json = nil
        reason = .transient
        sentAt = nil
        error = CErrorObject(
            CFailure(
                .transientDropped, name: WormholeError.Code.transientDropped.rawValue,
                "\(count) transient message(s) of '\(identifier)' dropped: more than \(CTransientBound.limit) waited "
                    + "for wh_context_dispatch", value: identifier))
    }

    deinit { free(identifier) }
}

/// `wh_message_handler`.
public typealias CMessageHandler = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void

/// A send's report as the C call's outcome: `WH_ERROR_NOT_SENT` when stored but not notified.
func checkSent(_ error: (any Error)?, _ what: String) throws {
    guard let error else { return }
    var failure = CFailure(error)
    failure.status = .notSent
    failure.message = "\(what) is stored, but its notification was not sent: \(failure.message)"
    throw failure
}

/// A JSON text argument with its length: NULL, invalid UTF-8 and what is not one JSON value
/// are refused, naming the argument.
func jsonDocument(_ pointer: UnsafePointer<CChar>?, _ length: Int, _ argument: String) throws -> JSONDocument {
    let payload = try bytes(pointer, length, argument)
    _ = try text(payload, argument)
    return try JSONDocument(data: Data(payload))
}

/// The message listen options of `flags` (`WH_LISTEN_*`).
private func listenOptions(_ flags: UInt32) throws -> MessageCenter.ListenOptions {
    try checkFlags(flags, known: 0x3)
    return MessageCenter.ListenOptions(
        deliversStoredMessageOnStart: flags & 0x1 != 0, deliversEveryPost: flags & 0x2 != 0)
}

/// Listens for `wh_mailbox_listen` (`identifier` non-nil) and `wh_mailbox_listen_all`.
private func listen(
    _ mailbox: OpaquePointer?, _ identifier: UnsafePointer<CChar>??, _ flags: UInt32, _ handler: CMessageHandler?,
    _ data: UnsafeMutableRawPointer?, _ destroy: CDestroyFunction?, _ out: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, mailbox, CMailbox.self, "mailbox") { mailbox in
        let identifier = try identifier.map { try MessageIdentifier(text($0, "identifier")) }
        let options = try listenOptions(flags)
        guard let handler else { throw CFailure.argument("handler is NULL") }
        try mailbox.context.checkOpen()
        try CSubscription.make(mailbox.context, data: data, destroy: destroy, out: out) { subscription in
            let bound = CTransientBound()
            let call: @Sendable (CMessage) -> Void = { message in
                withDelivery(message) { handler($0, subscription.userData) }
            }
            let deliver: @Sendable (MessageDelivery<JSONDocument>) -> Void = { delivery in
                guard delivery.reason == .transient else {
                    subscription.deliver { call(CMessage(delivery)) }
                    return
                }
                bound.admit(delivery, subscription: subscription, call: call)
            }
            if let identifier {
                return [
                    try mailbox.center.listen(
                        identifier: identifier, as: JSONDocument.self, on: .ioThread, options: options, handler: deliver
                    )
                ]
            }
            return [try mailbox.center.listen(as: JSONDocument.self, on: .ioThread, options: options, handler: deliver)]
        }
    }
}

@_cdecl("wh_mailbox_open")
public func whMailboxOpen(
    _ context: OpaquePointer?, _ group: UnsafePointer<CChar>?, _ directory: UnsafePointer<CChar>?,
    _ mailbox: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    openInGroup(context, group, directory, "directory", mailbox, "mailbox", error) {
        try CMailbox($0, group: $1, directory: $2)
    }
}

@_cdecl("wh_mailbox_free")
public func whMailboxFree(_ mailbox: OpaquePointer?) {
    release(mailbox, CMailbox.self)
}

@_cdecl("wh_mailbox_send")
public func whMailboxSend(
    _ mailbox: OpaquePointer?, _ identifier: UnsafePointer<CChar>?, _ json: UnsafePointer<CChar>?, _ length: Int,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    send(mailbox, identifier, json, length, transient: false, error)
}

@_cdecl("wh_mailbox_send_transient")
public func whMailboxSendTransient(
    _ mailbox: OpaquePointer?, _ identifier: UnsafePointer<CChar>?, _ json: UnsafePointer<CChar>?, _ length: Int,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    send(mailbox, identifier, json, length, transient: true, error)
}

/// `wh_mailbox_send` and `wh_mailbox_send_transient`: the arguments checked in the same order,
/// then a stored message (whose post must be sent) or a transient one.
private func send(
    _ mailbox: OpaquePointer?, _ identifier: UnsafePointer<CChar>?, _ json: UnsafePointer<CChar>?, _ length: Int,
    transient: Bool, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, mailbox, CMailbox.self, "mailbox") { mailbox in
        let identifier = try MessageIdentifier(text(identifier, "identifier"))
        let document = try jsonDocument(json, length, "json")
        if transient {
            try mailbox.center.passTransientMessage(document, identifier: identifier)
        } else {
            let report = try mailbox.center.passMessage(document, identifier: identifier)
            try checkSent(report.notificationError, "the message '\(identifier.rawValue)'")
        }
    }
}

@_cdecl("wh_mailbox_read")
public func whMailboxRead(
    _ mailbox: OpaquePointer?, _ identifier: UnsafePointer<CChar>?,
    _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ length: UnsafeMutablePointer<Int>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, mailbox, CMailbox.self, "mailbox") { mailbox in
        let identifier = try MessageIdentifier(text(identifier, "identifier"))
        guard let json else { throw CFailure.argument("json is NULL") }
        give(found: try mailbox.center.messageData(identifier: identifier), json, length)
    }
}

@_cdecl("wh_mailbox_clear")
public func whMailboxClear(
    _ mailbox: OpaquePointer?, _ identifier: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, mailbox, CMailbox.self, "mailbox") { mailbox in
        if let identifier {
            let identifier = try MessageIdentifier(text(identifier, "identifier"))
            let report = try mailbox.center.clearMessage(identifier: identifier)
            try checkSent(report.notificationError, "the clearing of '\(identifier.rawValue)'")
        } else {
            for report in try mailbox.center.clearAllMessages() {
                try checkSent(report.notificationError, "the clearing of every message")
            }
        }
    }
}

@_cdecl("wh_mailbox_listen")
public func whMailboxListen(
    _ mailbox: OpaquePointer?, _ identifier: UnsafePointer<CChar>?, _ flags: UInt32, _ handler: CMessageHandler?,
    _ data: UnsafeMutableRawPointer?, _ destroy: CDestroyFunction?,
    _ subscription: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    listen(mailbox, .some(identifier), flags, handler, data, destroy, subscription, error)
}

@_cdecl("wh_mailbox_listen_all")
public func whMailboxListenAll(
    _ mailbox: OpaquePointer?, _ flags: UInt32, _ handler: CMessageHandler?, _ data: UnsafeMutableRawPointer?,
    _ destroy: CDestroyFunction?, _ subscription: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    listen(mailbox, nil, flags, handler, data, destroy, subscription, error)
}

@_cdecl("wh_message_identifier")
public func whMessageIdentifier(_ message: OpaquePointer?) -> UnsafePointer<CChar>? {
    object(message, CMessage.self).map { UnsafePointer($0.identifier) }
}

@_cdecl("wh_message_json")
public func whMessageJson(_ message: OpaquePointer?, _ length: UnsafeMutablePointer<Int>?) -> UnsafePointer<CChar>? {
    CJSONText.lend(object(message, CMessage.self)?.json, length)
}

@_cdecl("wh_message_reason")
public func whMessageReason(_ message: OpaquePointer?) -> Int32 {
    object(message, CMessage.self)?.reason.rawValue ?? CReason.posted.rawValue
}

@_cdecl("wh_message_sent_at")
public func whMessageSentAt(_ message: OpaquePointer?, _ nanoseconds: UnsafeMutablePointer<UInt64>?) -> Int32 {
    guard let sentAt = object(message, CMessage.self)?.sentAt else { return 0 }
    nanoseconds?.pointee = sentAt
    return 1
}

@_cdecl("wh_message_error")
public func whMessageError(_ message: OpaquePointer?) -> OpaquePointer? {
    object(message, CMessage.self)?.error.map { OpaquePointer(Unmanaged.passUnretained($0).toOpaque()) }
}

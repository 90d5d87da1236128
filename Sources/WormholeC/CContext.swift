// SPDX-License-Identifier: Apache-2.0
import Glibc
import Logging
import Wormhole
import WormholeDBus
import WormholeSystem

/// `wh_context_options`: what a context is made with (the app's, touched by its calls only).
final class CContextOptions {
    var busAddress: String?
    var appID: String?
    var containerRoot: String?
    var doorbell = true
    var log: (handler: CLogFunction, minimum: Logger.Level, data: UnsafeMutableRawPointer?, destroy: CDestroyFunction?)?
}

/// `wh_context`: a view on the process's one Wormhole runtime, with the delivery queue its
/// subscriptions deliver to and the settings its mailboxes and defaults are opened with.
final class CContext: Sendable {
    let queue: CDeliveryQueue
    let center: DarwinNotificationCenter
    let busAddress: BusAddress?
    let containerRoot: String?
    let wake: PeerWake
    let sink: CLogSink?
    /// The live subscriptions made through the context (cancelled when it is freed).
    private let subscriptions = Locked<[ObjectIdentifier: CSubscription]>([:])
    /// What `wh_context_flush` flushes besides the notification center: the open mailboxes
    /// and defaults, held weakly.
    private let flushers = Locked<[ObjectIdentifier: @Sendable (Duration) -> (any Error)?]>([:])
    private let closed = Locked(false)

    /// The app ID the process's contexts named (the app ID belongs to the process).
    private static let appID = Locked<String?>(nil)

    init(_ options: CContextOptions?) throws {
        CLogging.bootstrap()
        busAddress = try options?.busAddress.map { try BusAddress($0) }
        containerRoot = options?.containerRoot
        wake = options?.doorbell == false ? .busOnly : .doorbell
        if let appID = options?.appID {
            try Self.appID.withLock { current in
                if let current, current != appID {
                    throw CFailure(
                        .invalidAppID, name: "invalidAppID",
                        "this process already uses the app ID '\(current)'; a process has one app ID", value: appID)
                }
                try AppIdentity.setAppID(appID)
                current = appID
            }
        }
        sink = options?.log.map {
            CLogSink(handler: $0.handler, minimum: $0.minimum, data: $0.data, destroy: $0.destroy)
        }
        queue = try CDeliveryQueue()
        do {
            center = try DarwinNotificationCenter(
                busAddress: busAddress, wake: wake, logger: CLogging.logger("wormhole.notify", sink: sink))
        } catch {
            sink?.close()
            throw error
        }
        if let sink { CLogging.sinks.withLock { $0[ObjectIdentifier(self)] = sink } }
    }

    /// A logger for one of the context's objects.
    func logger(_ label: String) -> Logger { CLogging.logger(label, sink: sink) }

    /// Fails when the context was freed (listening needs its queue).
    func checkOpen() throws {
        if closed.withLock({ $0 }) {
            throw CFailure(.closed, name: "closed", "the context was freed; open a new one to listen")
        }
    }

    func track(_ subscription: CSubscription) throws {
        try closed.withLock { closed in
            if closed { throw CFailure(.closed, name: "closed", "the context was freed; open a new one to listen") }
            subscriptions.withLock { $0[ObjectIdentifier(subscription)] = subscription }
        }
    }

    func forget(_ subscription: CSubscription) {
        _ = subscriptions.withLock { $0.removeValue(forKey: ObjectIdentifier(subscription)) }
    }

    /// Registers a mailbox's or defaults' flush (held weakly through the closure's capture).
    func addFlusher(_ owner: AnyObject, _ flush: @escaping @Sendable (Duration) -> (any Error)?) {
        flushers.withLock { $0[ObjectIdentifier(owner)] = flush }
    }

    func removeFlusher(_ owner: AnyObject) {
        _ = flushers.withLock { $0.removeValue(forKey: ObjectIdentifier(owner)) }
    }

    /// Flushes the center and every open mailbox and defaults, within `timeout` in all.
    func flush(timeout: Duration) throws {
        let deadline = ContinuousClock.now + timeout
        if let error = center.flush(timeout: timeout) { throw Self.flushFailure(error, timeout) }
        for flush in flushers.withLock({ Array($0.values) }) {
            if let error = flush(max(.zero, deadline - .now)) { throw Self.flushFailure(error, timeout) }
        }
    }

    private static func flushFailure(_ error: any Error, _ timeout: Duration) -> CFailure {
        var failure = CFailure(error)
        if failure.status == .bus, failure.name == "bus.timedOut" { failure.status = .timedOut }
        if failure.status == .timedOut {
            failure.message = "flush did not finish within \(timeout): \(failure.message)"
        }
        return failure
    }

    /// Cancels every subscription, closes the queue's descriptor and the log sink.
    func close() {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        for subscription in subscriptions.withLock({ Array($0.values) }) { subscription.cancel() }
        queue.close()
        center.close()
        if let sink {
            _ = CLogging.sinks.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
            sink.close()
        }
    }
}

/// `wh_mailbox_open` and `wh_defaults_open`: the context, the group and the optional name
/// (`nameArgument`: directory or suite) checked in that order, then `out` (`outArgument`) set
/// to a new handle of what `open` makes with them.
func openInGroup(
    _ context: OpaquePointer?, _ group: UnsafePointer<CChar>?, _ name: UnsafePointer<CChar>?, _ nameArgument: String,
    _ out: UnsafeMutablePointer<OpaquePointer?>?, _ outArgument: String, _ error: UnsafeMutablePointer<OpaquePointer?>?,
    _ open: (CContext, String, String?) throws -> AnyObject
) -> Int32 {
    cCall(error, context, CContext.self, "context") { context in
        let group = try text(group, "group")
        let name = try optionalText(name, nameArgument)
        guard let out else { throw CFailure.argument("\(outArgument) is NULL") }
        out.pointee = handle(try open(context, group, name))
    }
}

/// `wh_context_options_set_*` of a text: `value` (`argument`) checked by `check`, then stored
/// in `field`.
private func setOption(
    _ options: OpaquePointer?, _ field: ReferenceWritableKeyPath<CContextOptions, String?>,
    _ value: UnsafePointer<CChar>?, _ argument: String, _ error: UnsafeMutablePointer<OpaquePointer?>?,
    check: (String) throws -> Void
) -> Int32 {
    cCall(error, options, CContextOptions.self, "options") { options in
        let value = try text(value, argument)
        try check(value)
        options[keyPath: field] = value
    }
}

// MARK: The C functions

@_cdecl("wh_version")
public func whVersion(_ contract: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> UnsafePointer<CChar>? {
    contract?.pointee = CVersion.contract
    return CVersion.package
}

/// The version strings, as static C strings.
enum CVersion {
    nonisolated(unsafe) static let package = UnsafePointer(strdup(WormholeVersion.package)!)
    nonisolated(unsafe) static let contract = UnsafePointer(strdup(WormholeVersion.contract)!)
}

@_cdecl("wh_context_options_new")
public func whContextOptionsNew(
    _ options: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error) {
        guard let options else { throw CFailure.argument("options is NULL") }
        options.pointee = handle(CContextOptions())
    }
}

@_cdecl("wh_context_options_free")
public func whContextOptionsFree(_ options: OpaquePointer?) {
    release(options, CContextOptions.self)
}

@_cdecl("wh_context_options_set_bus_address")
public func whContextOptionsSetBusAddress(
    _ options: OpaquePointer?, _ address: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    setOption(options, \.busAddress, address, "address", error) { _ = try BusAddress($0) }
}

@_cdecl("wh_context_options_set_app_id")
public func whContextOptionsSetAppId(
    _ options: OpaquePointer?, _ appID: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    setOption(options, \.appID, appID, "app_id", error) {
        _ = try AppIdentity.resolve(flatpakInfo: nil, program: $0, environment: [:])
    }
}

@_cdecl("wh_context_options_set_container_root")
public func whContextOptionsSetContainerRoot(
    _ options: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    setOption(options, \.containerRoot, path, "path", error) { path in
        guard path.hasPrefix("/") else {
            throw CFailure(
                .noContainerRoot, name: "noContainerRoot", "container root '\(path)' is not absolute", value: path)
        }
    }
}

@_cdecl("wh_context_options_set_doorbell")
public func whContextOptionsSetDoorbell(
    _ options: OpaquePointer?, _ enabled: Int32, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error) { try object(options, CContextOptions.self, "options").doorbell = enabled != 0 }
}

@_cdecl("wh_context_options_set_log_handler")
public func whContextOptionsSetLogHandler(
    _ options: OpaquePointer?, _ handler: CLogFunction?, _ minimum: Int32, _ data: UnsafeMutableRawPointer?,
    _ destroy: CDestroyFunction?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, options, CContextOptions.self, "options") { options in
        guard let handler else { throw CFailure.argument("handler is NULL") }
        guard let level = Logger.Level(cLevel: minimum) else {
            throw CFailure.argument("log level \(minimum) is not a wh_log_level (0 to 6)", value: "\(minimum)")
        }
        options.log = (handler, level, data, destroy)
    }
}

@_cdecl("wh_context_new")
public func whContextNew(
    _ options: OpaquePointer?, _ context: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error) {
        guard let context else { throw CFailure.argument("context is NULL") }
        context.pointee = handle(try CContext(object(options, CContextOptions.self)))
    }
}

@_cdecl("wh_context_free")
public func whContextFree(_ context: OpaquePointer?) {
    guard let object = object(context, CContext.self) else { return }
    object.close()
    release(context, CContext.self)
}

@_cdecl("wh_context_fd")
public func whContextFd(_ context: OpaquePointer?) -> Int32 {
    object(context, CContext.self)?.queue.descriptor ?? -1
}

@_cdecl("wh_context_dispatch")
public func whContextDispatch(_ context: OpaquePointer?) -> Int32 {
    guard let context = object(context, CContext.self) else { return -1 }
    return Int32(clamping: context.queue.dispatch())
}

@_cdecl("wh_context_flush")
public func whContextFlush(
    _ context: OpaquePointer?, _ timeout: Int64, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, context, CContext.self, "context") { context in
        guard timeout >= 0 else { throw CFailure.argument("timeout_ms \(timeout) is negative", value: "\(timeout)") }
        try context.flush(timeout: .milliseconds(timeout))
    }
}

// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus

/// `wh_defaults`: a shared defaults suite, opened with its context's settings.
final class CDefaults: Sendable {
    let context: CContext
    let defaults: GroupDefaults

    init(_ context: CContext, group: String, suite: String?) throws {
        self.context = context
        defaults = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(group), suiteName: suite.map { try SuiteName($0) },
            containerRoot: context.containerRoot, busAddress: context.busAddress, wake: context.wake,
            logger: context.logger("wormhole.defaults"))
        context.addFlusher(self) { [weak defaults] timeout in defaults?.flush(timeout: timeout) }
    }

    deinit { context.removeFlusher(self) }
}

/// `wh_change`: one delivered change of a key, valid while its handler runs.
final class CChange {
    let key: UnsafeMutablePointer<CChar>
    let value: CJSONText?
    let change: GroupDefaults.Change

    init(_ change: GroupDefaults.Change) {
        self.change = change
        key = strdup(change.key)
        value = change.value.map { CJSONText($0.jsonBytes) }
    }

    deinit { free(key) }
}

/// `wh_change_handler`.
public typealias CChangeHandler = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void

/// A value argument: JSON text in the suite file's format (contract section 5).
private func value(_ json: UnsafePointer<CChar>?, _ length: Int, key: String, _ argument: String) throws
    -> PropertyListValue
{
    try PropertyListValue(jsonText: text(bytes(json, length, argument), argument), key: key)
}

/// The key argument (checked by the suite's key rules when it is used).
private func key(_ key: UnsafePointer<CChar>?) throws -> String {
    let key = try text(key, "key")
    if key.isEmpty { throw CFailure(.invalidKey, name: "invalidKey", "key is empty", value: key) }
    return key
}

@_cdecl("wh_defaults_open")
public func whDefaultsOpen(
    _ context: OpaquePointer?, _ group: UnsafePointer<CChar>?, _ suite: UnsafePointer<CChar>?,
    _ defaults: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    openInGroup(context, group, suite, "suite", defaults, "defaults", error) {
        try CDefaults($0, group: $1, suite: $2)
    }
}

@_cdecl("wh_defaults_free")
public func whDefaultsFree(_ defaults: OpaquePointer?) {
    release(defaults, CDefaults.self)
}

@_cdecl("wh_defaults_get")
public func whDefaultsGet(
    _ defaults: OpaquePointer?, _ key: UnsafePointer<CChar>?,
    _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ length: UnsafeMutablePointer<Int>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, defaults, CDefaults.self, "defaults") { owner in
        guard let json else { throw CFailure.argument("json is NULL") }
        let stored = try key == nil ? owner.defaults.jsonText() : owner.defaults.storedJSON(forKey: WormholeC.key(key))
        give(found: stored.map { Array($0.utf8) }, json, length)
    }
}

@_cdecl("wh_defaults_set")
public func whDefaultsSet(
    _ defaults: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ json: UnsafePointer<CChar>?, _ length: Int,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, defaults, CDefaults.self, "defaults") { owner in
        let key = try WormholeC.key(key)
        let report = try owner.defaults.set(value(json, length, key: key, "json"), forKey: key)
        try checkSent(report.notificationError, "the value of '\(key)'")
    }
}

@_cdecl("wh_defaults_remove")
public func whDefaultsRemove(
    _ defaults: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, defaults, CDefaults.self, "defaults") { owner in
        let key = try WormholeC.key(key)
        let report = try owner.defaults.removeObject(forKey: key)
        try checkSent(report.notificationError, "the removal of '\(key)'")
    }
}

@_cdecl("wh_defaults_increment")
public func whDefaultsIncrement(
    _ defaults: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ by: Int64, _ value: UnsafeMutablePointer<Int64>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, defaults, CDefaults.self, "defaults") { owner in
        let key = try WormholeC.key(key)
        let result = try owner.defaults.increment(forKey: key, by: Int(by))
        value?.pointee = Int64(result)
    }
}

/// The compare-and-set found another value.
private struct Mismatch: Error {
    var stored: PropertyListValue?
}

@_cdecl("wh_defaults_compare_and_set")
public func whDefaultsCompareAndSet(
    _ defaults: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ expected: UnsafePointer<CChar>?, _ expectedLength: Int,
    _ json: UnsafePointer<CChar>?, _ length: Int, _ current: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ currentLength: UnsafeMutablePointer<Int>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    current?.pointee = nil
    currentLength?.pointee = 0
    return cCall(error, defaults, CDefaults.self, "defaults") { owner in
        let key = try WormholeC.key(key)
        let expectedValue = try expected.map { try value($0, expectedLength, key: key, "expected") }
        let newValue = try json.map { try value($0, length, key: key, "json") }
        do {
            let report = try owner.defaults.update(forKey: key) { stored in
                guard stored == expectedValue else { throw Mismatch(stored: stored) }
                return newValue
            }
            try checkSent(report.notificationError, "the value of '\(key)'")
        } catch let mismatch as Mismatch {
            if let stored = mismatch.stored { give(stored.jsonBytes, current, currentLength) }
            throw CFailure(
                .mismatch, name: "mismatch",
                mismatch.stored == nil
                    ? "key '\(key)' has no value, not the one expected; nothing was written"
                    : "key '\(key)' holds another value than the one expected; nothing was written",
                value: key)
        }
    }
}

@_cdecl("wh_defaults_observe")
public func whDefaultsObserve(
    _ defaults: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ flags: UInt32, _ handler: CChangeHandler?,
    _ data: UnsafeMutableRawPointer?, _ destroy: CDestroyFunction?, _ out: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, defaults, CDefaults.self, "defaults") { owner in
        let key = try key.map { try WormholeC.key($0) }
        try checkFlags(flags, known: 0x3)
        guard let handler else { throw CFailure.argument("handler is NULL") }
        let options = ObserverOptions(ignoresOwnPosts: flags & 0x2 != 0)
        let initial = flags & 0x1 != 0
        try owner.context.checkOpen()
        try CSubscription.make(owner.context, data: data, destroy: destroy, out: out) { subscription in
            let deliver: @Sendable (GroupDefaults.Change) -> Void = { change in
                subscription.deliver { withDelivery(CChange(change)) { handler($0, subscription.userData) } }
            }
            if let key {
                return [
                    try owner.defaults.listen(
                        forKey: key, on: .ioThread, options: options, initial: initial, handler: deliver)
                ]
            }
            return [try owner.defaults.listen(on: .ioThread, options: options, initial: initial, handler: deliver)]
        }
    }
}

@_cdecl("wh_change_key")
public func whChangeKey(_ change: OpaquePointer?) -> UnsafePointer<CChar>? {
    object(change, CChange.self).map { UnsafePointer($0.key) }
}

@_cdecl("wh_change_value")
public func whChangeValue(_ change: OpaquePointer?, _ length: UnsafeMutablePointer<Int>?) -> UnsafePointer<CChar>? {
    CJSONText.lend(object(change, CChange.self)?.value, length)
}

@_cdecl("wh_change_reason")
public func whChangeReason(_ change: OpaquePointer?) -> Int32 {
    switch object(change, CChange.self)?.change.reason {
    case .initial: CReason.initial.rawValue
    case .catchUp: CReason.catchUp.rawValue
    default: CReason.posted.rawValue
    }
}

@_cdecl("wh_change_is_own_write")
public func whChangeIsOwnWrite(_ change: OpaquePointer?) -> Int32 {
    object(change, CChange.self)?.change.isOwnWrite == true ? 1 : 0
}

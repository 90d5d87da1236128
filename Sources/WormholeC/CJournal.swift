// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus
import WormholeSystem

/// `wh_journal`: one journal of a mailbox's wormhole (contract §6), with the settings it was
/// opened with.
final class CJournal: Sendable {
    let mailbox: CMailbox
    let journal: Journal

    init(_ mailbox: CMailbox, identifier: MessageIdentifier, options: Journal.Options) {
        self.mailbox = mailbox
        journal = mailbox.center.journal(identifier, options: options)
        mailbox.context.addFlusher(self) { [weak journal] timeout in journal?.flush(timeout: timeout) }
    }

    deinit { mailbox.context.removeFlusher(self) }
}

/// `wh_record`: one delivered record, or a failure of the reader (a gap, a damaged range, a
/// record that does not decode), valid while its handler runs.
final class CRecord {
    let identifier: UnsafeMutablePointer<CChar>
    let sequence: UInt64
    let json: CJSONText?
    let appendedAt: UInt64
    let isRedelivery: Bool
    let error: CErrorObject?
    let damage: (from: UInt64, to: UInt64)?

    init(_ record: JournalRecord<JSONDocument>) {
        identifier = strdup(record.identifier.rawValue)
        sequence = record.sequence
        json = CJSONText(record.message.data)
        appendedAt = record.appendedAt
        isRedelivery = record.isRedelivery
        error = nil
        damage = nil
    }

    init(identifier: MessageIdentifier, failure: any Error) {
        self.identifier = strdup(identifier.rawValue)
        sequence = 0
        json = nil
        appendedAt = 0
        isRedelivery = false
        error = CErrorObject(CFailure(failure))
        damage = (failure as? WormholeError)?.journalDamage.map { ($0.from, $0.to) }
    }

    deinit { free(identifier) }
}

/// A journal listener's reader: wakes from the journal's appenders queue one drain, and the
/// drain reads the next batch on the thread that dispatches, calls the handler per record there,
/// and stores a durable consumer's cursor through the last record whose handler returned. So a
/// record is acknowledged only after the app's handler ran (at-least-once, as the Swift
/// listener), and the library's loop thread never reads the journal for the app.
///
/// `@unchecked Sendable`: `subscription` is set once, before the first wake, and is never
/// changed; everything else is `Locked`.
final class CJournalReader: SubscriptionHandle, @unchecked Sendable {
    private struct State {
        var consumer: JournalPackageConsumer?
        var wakeups: Subscription?
        /// A drain is queued and has not started.
        var queued = false
        var cancelled = false
    }

    private let state = Locked(State())
    private let identifier: MessageIdentifier
    private let handler: CRecordHandler
    private weak var subscription: CSubscription?

    init(identifier: MessageIdentifier, handler: @escaping CRecordHandler, subscription: CSubscription) {
        self.identifier = identifier
        self.handler = handler
        self.subscription = subscription
    }

    /// Starts reading: the wake-ups first, then the cursor, so nothing appended after the
    /// cursor's start is missed; then one drain for what is there already.
    func start(_ journal: Journal, from: JournalPosition, consumer: String?) throws {
        let wakeups = try journal.onAppend { [weak self] in self?.wake() }
        do {
            let reader = try journal.makeConsumer(from: from, consumer: consumer)
            state.withLock {
                $0.wakeups = wakeups
                $0.consumer = reader
            }
        } catch {
            wakeups.cancel()
            throw error
        }
        wake()
    }

    /// Queues one drain unless one is queued already.
    func wake() {
        let queue = state.withLock { state -> Bool in
            guard !state.cancelled, !state.queued else { return false }
            state.queued = true
            return true
        }
        guard queue, let subscription else { return }
        subscription.deliver { [self] in drain() }
    }

    /// One batch, on the dispatching thread.
    private func drain() {
        let consumer = state.withLock { state -> JournalPackageConsumer? in
            state.queued = false
            return state.cancelled ? nil : state.consumer
        }
        guard let consumer, let subscription else { return }
        let batch: [JournalRecord<JSONDocument>]
        do {
            batch = try consumer.nextBatch()
        } catch {
            // A gap or a damaged range: reported once, then the reader is past it (read on).
            // Anything else (an unreadable directory) is reported and read again at the next wake.
            withDelivery(CRecord(identifier: identifier, failure: error)) { handler($0, subscription.userData) }
            if let error = error as? WormholeError, error.code == .journalGap || error.code == .journalDamaged {
                wake()
            }
            return
        }
        guard !batch.isEmpty else { return }
        var handled: UInt64?
        for record in batch {
            if subscription.isCancelled { break }
            withDelivery(CRecord(record)) { handler($0, subscription.userData) }
            handled = record.sequence
        }
        if let handled {
            do {
                try consumer.acknowledge(through: handled)
            } catch {
                withDelivery(CRecord(identifier: identifier, failure: error)) { handler($0, subscription.userData) }
            }
        }
        // The batch is bounded: what follows it is read at the next dispatch (the fd stays readable).
        wake()
    }

    func cancel() {
        let wakeups = state.withLock { state -> Subscription? in
            state.cancelled = true
            state.consumer = nil
            defer { state.wakeups = nil }
            return state.wakeups
        }
        wakeups?.cancel()
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }
}

/// `wh_record_handler`.
public typealias CRecordHandler = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void

/// `WH_JOURNAL_FROM_END` (0), `WH_JOURNAL_FROM_BEGINNING` (all bits), or a sequence number.
private func position(_ from: UInt64) -> JournalPosition {
    switch from {
    case 0: .end
    case .max: .beginning
    default: .sequence(from)
    }
}

/// What `wh_journal_status` returns, as JSON.
private struct CJournalStatusText: Encodable {
    struct Damage: Encodable {
        var from: UInt64
        var to: UInt64
        var reason: String
        var file: String
        var detail: String
    }
    var first: UInt64
    var last: UInt64
    var readable: UInt64
    var bytes: Int
    var segments: [String]
    var consumers: [String: UInt64]
    var badConsumers: [String: String]
    var damaged: [Damage]

    init(_ status: JournalStatus) {
        first = status.first
        last = status.last
        readable = status.readable
        bytes = status.bytes
        segments = status.segments
        consumers = status.consumers
        badConsumers = status.badConsumers
        damaged = status.damaged.map {
            Damage(from: $0.from, to: $0.to, reason: $0.reason.rawValue, file: $0.file, detail: $0.detail)
        }
    }
}

// MARK: The C functions

@_cdecl("wh_journal_open")
public func whJournalOpen(
    _ mailbox: OpaquePointer?, _ identifier: UnsafePointer<CChar>?, _ flags: UInt32,
    _ journal: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, mailbox, CMailbox.self, "mailbox") { mailbox in
        let identifier = try MessageIdentifier(text(identifier, "identifier"))
        try checkFlags(flags, known: 0x1)
        guard let journal else { throw CFailure.argument("journal is NULL") }
        let options = Journal.Options(durability: flags & 0x1 != 0 ? .fdatasync : .none)
        journal.pointee = handle(CJournal(mailbox, identifier: identifier, options: options))
    }
}

@_cdecl("wh_journal_free")
public func whJournalFree(_ journal: OpaquePointer?) {
    release(journal, CJournal.self)
}

@_cdecl("wh_journal_append")
public func whJournalAppend(
    _ journal: OpaquePointer?, _ json: UnsafePointer<CChar>?, _ length: Int, _ sequence: UnsafeMutablePointer<UInt64>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, journal, CJournal.self, "journal") { journal in
        let document = try jsonDocument(json, length, "json")
        let appended = try journal.journal.append(document)
        sequence?.pointee = appended
    }
}

@_cdecl("wh_journal_append_many")
public func whJournalAppendMany(
    _ journal: OpaquePointer?, _ jsons: UnsafePointer<UnsafePointer<CChar>?>?, _ lengths: UnsafePointer<Int>?,
    _ count: Int, _ first: UnsafeMutablePointer<UInt64>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, journal, CJournal.self, "journal") { journal in
        guard count > 0 else { throw CFailure.argument("count is \(count); append at least one record") }
        guard let jsons, let lengths else { throw CFailure.argument("jsons or lengths is NULL") }
        let documents = try (0..<count).map { try jsonDocument(jsons[$0], lengths[$0], "jsons[\($0)]") }
        let range = try journal.journal.append(contentsOf: documents)
        first?.pointee = range.lowerBound
    }
}

@_cdecl("wh_journal_flush")
public func whJournalFlush(_ journal: OpaquePointer?, _ timeout: Int64, _ error: UnsafeMutablePointer<OpaquePointer?>?)
    -> Int32
{
    cCall(error, journal, CJournal.self, "journal") { journal in
        if let failure = journal.journal.flush(timeout: .milliseconds(max(0, timeout))) { throw failure }
    }
}

@_cdecl("wh_journal_listen")
public func whJournalListen(
    _ journal: OpaquePointer?, _ from: UInt64, _ consumer: UnsafePointer<CChar>?, _ handler: CRecordHandler?,
    _ data: UnsafeMutableRawPointer?, _ destroy: CDestroyFunction?,
    _ subscription: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, journal, CJournal.self, "journal") { journal in
        let consumer = try optionalText(consumer, "consumer")
        guard let handler else { throw CFailure.argument("handler is NULL") }
        let context = journal.mailbox.context
        try context.checkOpen()
        try CSubscription.make(context, data: data, destroy: destroy, out: subscription) { subscription in
            let reader = CJournalReader(
                identifier: journal.journal.identifier, handler: handler, subscription: subscription)
            try reader.start(journal.journal, from: position(from), consumer: consumer)
            return [reader]
        }
    }
}

@_cdecl("wh_journal_status")
public func whJournalStatus(
    _ journal: OpaquePointer?, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ length: UnsafeMutablePointer<Int>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, journal, CJournal.self, "journal") { journal in
        guard let json else { throw CFailure.argument("json is NULL") }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        give(try encoder.encode(CJournalStatusText(try journal.journal.status())), json, length)
    }
}

@_cdecl("wh_journal_check")
public func whJournalCheck(
    _ journal: OpaquePointer?, _ damaged: UnsafeMutablePointer<Int>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    cCall(error, journal, CJournal.self, "journal") { journal in
        let ranges = try journal.journal.check()
        damaged?.pointee = ranges.count
        guard let first = ranges.first else { return }
        let list = ranges.map { "\($0.from)..\($0.to) (\($0.reason.rawValue))" }.joined(separator: ", ")
        throw CFailure(
            .journalDamaged, name: WormholeError.Code.journalDamaged.rawValue,
            "journal '\(journal.journal.identifier.rawValue)' has \(ranges.count) damaged range(s): \(list)",
            value: first.file)
    }
}

@_cdecl("wh_record_identifier")
public func whRecordIdentifier(_ record: OpaquePointer?) -> UnsafePointer<CChar>? {
    object(record, CRecord.self).map { UnsafePointer($0.identifier) }
}

@_cdecl("wh_record_sequence")
public func whRecordSequence(_ record: OpaquePointer?) -> UInt64 {
    object(record, CRecord.self)?.sequence ?? 0
}

@_cdecl("wh_record_json")
public func whRecordJson(_ record: OpaquePointer?, _ length: UnsafeMutablePointer<Int>?) -> UnsafePointer<CChar>? {
    CJSONText.lend(object(record, CRecord.self)?.json, length)
}

@_cdecl("wh_record_appended_at")
public func whRecordAppendedAt(_ record: OpaquePointer?) -> UInt64 {
    object(record, CRecord.self)?.appendedAt ?? 0
}

@_cdecl("wh_record_is_redelivery")
public func whRecordIsRedelivery(_ record: OpaquePointer?) -> Int32 {
    object(record, CRecord.self)?.isRedelivery == true ? 1 : 0
}

@_cdecl("wh_record_error")
public func whRecordError(_ record: OpaquePointer?) -> OpaquePointer? {
    object(record, CRecord.self)?.error.map { OpaquePointer(Unmanaged.passUnretained($0).toOpaque()) }
}

@_cdecl("wh_record_damage")
public func whRecordDamage(
    _ record: OpaquePointer?, _ from: UnsafeMutablePointer<UInt64>?, _ to: UnsafeMutablePointer<UInt64>?
) -> Int32 {
    guard let damage = object(record, CRecord.self)?.damage else { return 0 }
    from?.pointee = damage.from
    to?.pointee = damage.to
    return 1
}

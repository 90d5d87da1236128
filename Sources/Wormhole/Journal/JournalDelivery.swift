import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import WormholeDBus
import WormholeSystem

/// Decodes raw records for one message type.
enum JournalDecoding {
    static func record<Message: Decodable & Sendable>(
        _ raw: RawJournalRecord, isRedelivery: Bool, identifier: MessageIdentifier, as type: Message.Type
    ) -> Result<JournalRecord<Message>, WormholeError> {
        do {
            let message: Message
            if Message.self == JSONDocument.self {
                message = try JSONDocument(data: raw.payload) as! Message
            } else {
                message = try MessageCenter.decode(raw.payload, as: Message.self, identifier: identifier)
            }
            return .success(
                JournalRecord(
                    identifier: identifier, sequence: raw.sequence, message: message, appendedAt: raw.time,
                    isRedelivery: isRedelivery))
        } catch {
            let base = (error as? WormholeError)?.message ?? "\(error)"
            return .failure(
                WormholeError(
                    .decodingFailed, value: String(raw.sequence),
                    "journal '\(identifier)' record \(raw.sequence): \(base)"))
        }
    }
}

/// A journal's records as an `AsyncSequence` (see ``Journal/records(from:consumer:as:)``).
///
/// The reader is active when the call that made the stream returns and goes away when the
/// iteration ends, its task is cancelled, or the stream is released. The bus side only rings a
/// doorbell; the iterator's `next()` reads the journal from its cursor. Each element is one
/// record, decoded; iteration throws ``WormholeError``s (gap reports, damage, records that do not
/// decode), and iterating again goes on after what it threw. Asking for the next record
/// acknowledges the ones returned before (a durable consumer's cursor is stored once per batch).
public typealias JournalRecordStream<Message: Decodable & Sendable> = SubscriptionStream<
    JournalRecord<Message>, WormholeError
>

/// A journal stream's reader: batches from the cursor, each record decoded when the iterator
/// asks for it.
final class JournalStreamReader<Message: Decodable & Sendable>: StreamReader {
    private let core: JournalConsumerCore
    private let identifier: MessageIdentifier
    private let batch = Locked<(items: [(record: RawJournalRecord, isRedelivery: Bool)], index: Int)>(([], 0))

    init(core: JournalConsumerCore, identifier: MessageIdentifier) {
        self.core = core
        self.identifier = identifier
    }

    func nextReady() throws(WormholeError) -> JournalRecord<Message>? {
        while true {
            let item = batch.withLock { batch -> (record: RawJournalRecord, isRedelivery: Bool)? in
                guard batch.index < batch.items.count else { return nil }
                defer { batch.index += 1 }
                return batch.items[batch.index]
            }
            if let item {
                return try JournalDecoding.record(
                    item.record, isRedelivery: item.isRedelivery, identifier: identifier, as: Message.self
                ).get()
            }
            let next = try core.nextBatch()
            if next.isEmpty { return nil }
            batch.withLock { $0 = (next, 0) }
        }
    }
}

/// A journal listener's reader for the ``DeliveryPump``: every round reads from the cursor to the
/// end, so coalesced wakes lose nothing.
///
/// A durable consumer's reader also stores its cursor when the process exits normally (returning
/// from `main`, `exit()`): through the last record whose handler returned, once a handler call
/// running on another thread has returned (within the exit drain's bound). Without that, a
/// process that exits between a handler's return and the end of its batch would get the batch
/// again, flagged, at its next start, though every record of it was handled.
final class JournalDrainer<Message: Decodable & Sendable>: SubscriptionCore {
    /// Which handler call is running, for the exit hook.
    private struct Handling {
        /// The thread running a handler call, `nil` when none runs.
        var thread: pthread_t?
        /// The record that call delivers.
        var current: UInt64 = 0
        /// The last record whose handler call returned in this process (0: none).
        var handledThrough: UInt64 = 0
        /// Signalled when the running call returns: the exit hook waits on it.
        var waiter: DispatchSemaphore?
    }

    private let core: JournalConsumerCore
    private let identifier: MessageIdentifier
    let pump: DeliveryPump
    private let handler: @Sendable (Result<JournalRecord<Message>, WormholeError>) -> Void
    /// Kept only for a durable consumer (the exit hook's input).
    private let handling: Locked<Handling>?
    private let exitHook = Locked<UInt64?>(nil)

    init(
        core: JournalConsumerCore, identifier: MessageIdentifier, executor: DeliveryExecutor,
        handler: @escaping @Sendable (Result<JournalRecord<Message>, WormholeError>) -> Void
    ) {
        self.core = core
        self.identifier = identifier
        pump = DeliveryPump(executor: executor)
        self.handler = handler
        handling = core.cursor == nil ? nil : Locked(Handling())
        if handling != nil {
            let id = ProcessRuntime.shared.exitDrain.addHook { [weak self] deadline in
                self?.storeAtExit(deadline: deadline)
            }
            exitHook.withLock { $0 = id }
        }
    }

    func forgetPending() {
        if let id = exitHook.withLock({ hook in
            defer { hook = nil }
            return hook
        }) {
            ProcessRuntime.shared.exitDrain.removeHook(id)
        }
    }

    func drainPending() { drainOnce() }

    /// Reads and delivers until the journal has nothing more.
    private func drainOnce() {
        while !isCancelled {
            let batch: [(record: RawJournalRecord, isRedelivery: Bool)]
            do throws(WormholeError) {
                batch = try core.nextBatch()
            } catch {
                handler(.failure(error))
                // A gap or damaged range was reported and skipped: go on with the next readable record.
                if error.code == .journalGap || error.code == .journalDamaged { continue }
                return
            }
            if batch.isEmpty { return }
            for item in batch {
                if isCancelled {
                    try? core.acknowledge(through: item.record.sequence - 1)
                    return
                }
                let record = JournalDecoding.record(
                    item.record, isRedelivery: item.isRedelivery, identifier: identifier, as: Message.self)
                guard let handling else {
                    handler(record)
                    continue
                }
                let sequence = item.record.sequence
                handling.withLock {
                    $0.thread = pthread_self()
                    $0.current = sequence
                }
                handler(record)
                handling.withLock {
                    $0.thread = nil
                    $0.handledThrough = sequence
                    $0.waiter?.signal()
                    $0.waiter = nil
                }
            }
        }
        try? core.acknowledgeHandedOut()
    }

    /// The exit hook: no handler call starts any more; a call running on another thread is waited
    /// for until `deadline`; the cursor is stored through the records handled (a call still
    /// running, or the one that is exiting, leaves its record flagged for the next start).
    private func storeAtExit(deadline: DispatchTime) {
        guard let handling else { return }
        // The pump only: the hook is not removed from inside the drain that runs it.
        _ = pump.stop()
        let me = pthread_self()
        let waiter = handling.withLock { state -> DispatchSemaphore? in
            guard let thread = state.thread, pthread_equal(thread, me) == 0 else { return nil }
            let waiter = DispatchSemaphore(value: 0)
            state.waiter = waiter
            return waiter
        }
        if let waiter { _ = waiter.wait(timeout: deadline) }
        let (through, running) = handling.withLock { ($0.handledThrough, $0.thread == nil ? 0 : $0.current) }
        try? core.acknowledge(through: through, delivering: running)
    }
}

/// A consumer for tools that run their own loop (the `wormholectl` command): batches of raw
/// documents, and an explicit acknowledgement.
package final class JournalPackageConsumer: Sendable {
    private let core: JournalConsumerCore
    private let identifier: MessageIdentifier

    init(core: JournalConsumerCore, identifier: MessageIdentifier) {
        self.core = core
        self.identifier = identifier
    }

    /// The next records available now (empty when none); throws gap reports and damage.
    package func nextBatch() throws -> [JournalRecord<JSONDocument>] {
        try core.nextBatch().map {
            try JournalDecoding.record(
                $0.record, isRedelivery: $0.isRedelivery, identifier: identifier, as: JSONDocument.self
            ).get()
        }
    }

    /// Records up to `sequence` were handled: stores a durable consumer's cursor.
    package func acknowledge(through sequence: UInt64) throws {
        try core.acknowledge(through: sequence)
    }
}

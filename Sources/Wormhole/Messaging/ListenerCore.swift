import Foundation
import Synchronization
import WormholeDBus

/// The state of one listener or message stream: which mailboxes are pending (coalesced per
/// identifier), what each held when last delivered, and the reading and decoding of a mailbox.
///
/// The bus side (``notified(_:)``, on the I/O thread) only records which identifiers are
/// pending. The reading happens where the deliveries go: on the listener's executor, or in a
/// stream's `next()`.
final class ListenerCore<Message: Decodable & Sendable>: ListenerControl {
    typealias Reason = MessageDelivery<Message>.Reason

    /// One pending mailbox.
    struct Item: Sendable {
        var identifier: MessageIdentifier
        var reason: Reason
        var sentAt: UInt64?
    }

    /// Where deliveries go.
    enum Sink: Sendable {
        /// A callback listener: drain on the executor and call the handler.
        case handler(DeliveryExecutor, @Sendable (MessageDelivery<Message>) -> Void)
        /// A stream: ring the doorbell; the iterator's `next()` takes and reads.
        case doorbell(AsyncStream<Void>.Continuation)
    }

    private struct State {
        var cancelled = false
        /// A drain is queued or running (callback listeners).
        var scheduled = false
        /// A catch-up was asked for: the reader lists the mailboxes (disk work, not on the bus side).
        var catchUp = false
        var pending: [MessageIdentifier: (reason: Reason, sentAt: UInt64?)] = [:]
        var order: [MessageIdentifier] = []
        /// What each mailbox held when last delivered (or when the listener started), as a
        /// fingerprint: the catch-up compares against it without keeping every message in memory.
        var lastDelivered: [MessageIdentifier: Fingerprint] = [:]

        var hasWork: Bool { catchUp || !order.isEmpty }
    }

    let transiting: any WormholeTransiting
    /// The UTF-8 length of `<group>/<directory>/`, stripped from a posted name.
    let prefixLength: Int
    /// The one identifier listened to, or `nil` for every identifier of the wormhole.
    let only: MessageIdentifier?
    private let sink: Sink
    private let state = Mutex(State())

    init(transiting: any WormholeTransiting, prefix: NotificationName, only: MessageIdentifier?, sink: Sink) {
        self.transiting = transiting
        prefixLength = prefix.rawValue.utf8.count
        self.only = only
        self.sink = sink
    }

    func cancel() -> Bool {
        state.withLock { state in
            defer {
                state.cancelled = true
                state.pending = [:]
                state.order = []
                state.catchUp = false
            }
            return state.cancelled
        }
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    // MARK: The bus side

    /// Called for each notification of the listener's observer (on the I/O thread). The
    /// observer's route already chose the notification (the exact name, or a name below the
    /// wormhole's prefix): what is left is to take the identifier from the name. A name with
    /// a further `/` (a journal's `<group>/<directory>/I/journal`) is not an identifier and is
    /// ignored.
    func notified(_ note: DarwinNotification) {
        switch note.reason {
        case .posted:
            let identifier: MessageIdentifier
            if let only {
                identifier = only
            } else {
                guard let suffix = String(note.name.rawValue.utf8.dropFirst(prefixLength)),
                    let parsed = try? MessageIdentifier(suffix)
                else { return }
                identifier = parsed
            }
            record([identifier], reason: .posted, sentAt: note.state)
        case .catchUp:
            let wake = state.withLock { state -> Bool in
                if state.cancelled { return false }
                state.catchUp = true
                return mustWake(&state)
            }
            if wake { ring() }
        }
    }

    /// Remembers what is stored now as known, so that a catch-up after a reconnect delivers only
    /// what changed since the listener started, not messages that were already there.
    func recordBaseline() {
        let identifiers = only.map { [$0] } ?? ((try? transiting.storedIdentifiers()) ?? [])
        var known: [MessageIdentifier: Fingerprint] = [:]
        for identifier in identifiers {
            if let data = try? transiting.messageData(identifier: identifier) { known[identifier] = Fingerprint(data) }
        }
        state.withLock { state in
            // A delivery that already ran knows better.
            for (identifier, data) in known where state.lastDelivered[identifier] == nil {
                state.lastDelivered[identifier] = data
            }
        }
    }

    /// Delivers what is stored now (the start-up check).
    func checkStored() {
        let identifiers = only.map { [$0] } ?? ((try? transiting.storedIdentifiers()) ?? [])
        record(identifiers, reason: .stored)
    }

    private func record(_ identifiers: [MessageIdentifier], reason: Reason, sentAt: UInt64? = nil) {
        let wake = state.withLock { state -> Bool in
            if state.cancelled { return false }
            Self.merge(identifiers, reason: reason, sentAt: sentAt, into: &state)
            return mustWake(&state)
        }
        if wake { ring() }
    }

    private static func merge(_ identifiers: [MessageIdentifier], reason: Reason, sentAt: UInt64?, into state: inout State) {
        for identifier in identifiers {
            if let existing = state.pending[identifier] {
                // A post outranks a catch-up or start-up check: it must be delivered.
                if reason == .posted {
                    state.pending[identifier] = (reason, sentAt)
                } else if existing.reason != .posted {
                    state.pending[identifier] = (reason, nil)
                }
            } else {
                state.pending[identifier] = (reason, reason == .posted ? sentAt : nil)
                state.order.append(identifier)
            }
        }
    }

    /// Whether the reader must be woken (under the lock). A stream's doorbell coalesces by itself.
    private func mustWake(_ state: inout State) -> Bool {
        guard state.hasWork else { return false }
        switch sink {
        case .doorbell: return true
        case .handler:
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
    }

    private func ring() {
        switch sink {
        case .doorbell(let continuation): continuation.yield(())
        case .handler(let executor, _):
            if executor.queue == nil { drain() } else { executor.run { self.drain() } }
        }
    }

    // MARK: The reading side

    /// The pending mailboxes, in the order they were first posted (possibly none, when a
    /// catch-up was asked for meanwhile: call again), or `nil` when nothing is pending. A
    /// pending catch-up lists the mailboxes here. With `stopping`, `nil` also ends the current
    /// drain, atomically with the check, so a notification recorded meanwhile schedules a new one.
    func take(stopping: Bool) -> [Item]? {
        let wantsCatchUp = state.withLock { state -> Bool in
            defer { state.catchUp = false }
            return state.catchUp && !state.cancelled
        }
        if wantsCatchUp {
            var identifiers = Set(state.withLock { Array($0.lastDelivered.keys) })
            if let only {
                identifiers = [only]
            } else if let stored = try? transiting.storedIdentifiers() {
                identifiers.formUnion(stored)
            }
            let sorted = identifiers.sorted { $0.rawValue < $1.rawValue }
            state.withLock { state in
                if !state.cancelled { Self.merge(sorted, reason: .catchUp, sentAt: nil, into: &state) }
            }
        }
        return state.withLock { state -> [Item]? in
            if state.cancelled || !state.hasWork {
                if stopping { state.scheduled = false }
                return nil
            }
            // A catch-up asked for after the listing above: the caller comes back for it.
            if state.order.isEmpty { return [] }
            let batch = state.order.compactMap { identifier -> Item? in
                state.pending[identifier].map { Item(identifier: identifier, reason: $0.reason, sentAt: $0.sentAt) }
            }
            state.pending = [:]
            state.order = []
            return batch
        }
    }

    /// Reads and delivers until nothing is pending (callback listeners, on their executor).
    /// Notifications that arrive meanwhile are merged into the pending set, so a burst costs one
    /// read per identifier per round.
    private func drain() {
        guard case .handler(_, let handler) = sink else { return }
        while let batch = take(stopping: true) {
            for item in batch {
                guard let delivery = read(item), !isCancelled else { continue }
                handler(delivery)
            }
        }
    }

    /// Reads and decodes one mailbox: the delivery, or `nil` when there is nothing to deliver
    /// (a catch-up of an unchanged mailbox, a start-up check of an empty one).
    func read(_ item: Item) -> MessageDelivery<Message>? {
        let identifier = item.identifier
        let data: Data?
        do {
            data = try transiting.messageData(identifier: identifier)
        } catch {
            let wormholeError =
                error as? WormholeError
                ?? WormholeError(.io, value: identifier.rawValue, "cannot read message '\(identifier)': \(error)")
            return MessageDelivery(identifier: identifier, result: .failure(wormholeError), reason: item.reason, sentAt: item.sentAt)
        }
        let fingerprint = data.map(Fingerprint.init)
        let previous = state.withLock { state -> Fingerprint? in
            let previous = state.lastDelivered[identifier]
            state.lastDelivered[identifier] = fingerprint
            return previous
        }
        switch item.reason {
        case .catchUp where previous == fingerprint: return nil
        case .stored where data == nil: return nil
        default: break
        }
        guard let data else {
            let error = WormholeError(.noMessage, value: identifier.rawValue, "no message is stored for '\(identifier)'")
            return MessageDelivery(identifier: identifier, result: .failure(error), reason: item.reason, sentAt: item.sentAt)
        }
        let result: Result<Message, WormholeError>
        do {
            result = .success(try MessageCenter.decode(data, as: Message.self, identifier: identifier))
        } catch {
            result = .failure(error)
        }
        return MessageDelivery(identifier: identifier, result: result, reason: item.reason, sentAt: item.sentAt)
    }
}

/// A message's length and 64-bit FNV-1a hash: enough to tell whether a mailbox changed.
struct Fingerprint: Hashable, Sendable {
    let count: Int
    let hash: UInt64

    init(_ data: Data) {
        count = data.count
        hash = data.withUnsafeBytes(Self.hash)
    }

    /// FNV-1a over 8-byte words (then the last bytes one by one): each step is a bijection, so
    /// two documents that differ in one word never collide. A word at a time through the raw
    /// bytes, not a byte at a time through `Data`'s iterator, which took more of a 1 MB
    /// delivery than the JSON decoder (`wormhole bench --suite message`). Kept in memory only.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let prime: UInt64 = 0x0000_0100_0000_01b3
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let words = bytes.count / 8
        for index in 0..<words {
            hash = (hash ^ bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)) &* prime
        }
        for index in (words * 8)..<bytes.count {
            hash = (hash ^ UInt64(bytes[index])) &* prime
        }
        return hash
    }
}

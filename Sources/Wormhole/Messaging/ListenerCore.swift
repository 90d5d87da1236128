// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FoundationEssentials
import WormholeDBus
import WormholeSystem

/// The state of one listener or message stream: which mailboxes are pending (coalesced per
/// identifier), the transient messages received (each kept, in order, up to a bound), what each
/// mailbox held when last delivered, and the reading and decoding of a mailbox.
///
/// The bus side (``notified(_:)`` and ``received(_:)``, on the I/O thread) only records which
/// identifiers are pending and queues transient payloads. The reading happens where the
/// deliveries go: on the listener's executor, or in a stream's `next()`.
///
/// A mailbox is delivered again only when its file changed since the listener's last delivery
/// of it (its ``Fingerprint``), unless ``MessageCenter/ListenOptions/deliversEveryPost``: the
/// reads of a coalesced burst that find the file already delivered are skipped.
final class ListenerCore<Message: Decodable & Sendable>: ListenerControl {
    typealias Reason = ListenerReason
    typealias Item = ListenerItem

    /// Where deliveries go.
    enum Sink: Sendable {
        /// A callback listener: the ``DeliveryPump`` drains on the executor and calls the handler.
        case handler(DeliveryExecutor, @Sendable (MessageDelivery<Message>) -> Void)
        /// A stream: ring the doorbell; the iterator's `next()` takes and reads.
        case doorbell(AsyncStream<Void>.Continuation)
    }

    let transiting: any WormholeTransiting
    /// The UTF-8 length of `<group>/<directory>/`, stripped from a posted name.
    let prefixLength: Int
    /// The one identifier listened to, or `nil` for every identifier of the wormhole.
    let only: MessageIdentifier?
    /// Deliver a mailbox on every post, even when the file is the one last delivered.
    let deliversEveryPost: Bool
    /// The most transient messages kept for a reader that is behind; the oldest go first.
    let transientLimit: Int
    /// Whether the wormhole directory is also watched while on the bus (posts are then
    /// timed, to tell which renames they account for).
    let catchesWritesWithoutSignal: Bool
    /// How long a rename seen on the bus waits for its post before the mailbox is compared.
    static var orphanGrace: UInt64 { 500_000_000 }
    /// A post that arrived this shortly before a rename was seen is taken to be that rename's.
    static var sameIteration: UInt64 { 50_000_000 }
    private let sink: Sink
    /// Rounds of reading and delivering for a callback listener (a stream's reading is its
    /// iterator's, and its pump is never woken).
    let pump: DeliveryPump
    private let state = Locked(ListenerState())

    init(
        transiting: any WormholeTransiting, prefix: NotificationName, only: MessageIdentifier?,
        options: MessageCenter.ListenOptions = MessageCenter.ListenOptions(), sink: Sink
    ) {
        self.transiting = transiting
        prefixLength = prefix.rawValue.utf8.count
        self.only = only
        deliversEveryPost = options.deliversEveryPost
        transientLimit = max(1, options.transientBufferLimit)
        catchesWritesWithoutSignal = options.catchesWritesWithoutSignal && options.wakesThroughDirectoryWithoutBus
        self.sink = sink
        if case .handler(let executor, _) = sink {
            pump = DeliveryPump(executor: executor)
        } else {
            pump = DeliveryPump(executor: DeliveryQueue.ioThread.makeExecutor(label: "wormhole.stream"))
        }
    }

    func forgetPending() {
        state.withLock { state in
            state.pending = [:]
            state.order = []
            state.transientCount = 0
            state.dropped = []
            state.catchUp = false
        }
    }

    // MARK: The bus side

    /// Called for each notification of the listener's observer (on the I/O thread). The
    /// observer's route already chose the notification (the exact name, or a name below the
    /// wormhole's prefix): what is left is to take the identifier from the name. A name with
    /// a further `/` (a journal's `<group>/<directory>/I/journal`) is not an identifier and is
    /// ignored.
    func notified(_ note: DarwinNotification) {
        switch note.reason {
        case .posted:
            guard let identifier = identifier(in: note.name) else { return }
            if catchesWritesWithoutSignal { postArrived(identifier) }
            record([identifier], reason: .posted, sentAt: note.state)
        case .catchUp: catchUp()
        }
    }

    /// A post of `identifier` arrived: it accounts for a rename seen just before (or just after).
    private func postArrived(_ identifier: MessageIdentifier) {
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            state.postedAt[identifier] = now
            state.orphans[identifier] = nil
        }
    }

    /// Compares every mailbox with what was last delivered and delivers the changed ones
    /// (``MessageDelivery/Reason/catchUp``): after a reconnect, or when the directory watch
    /// starts or may have missed events.
    func catchUp() {
        let wake = state.withLock { state -> Bool in
            if pump.isCancelled { return false }
            state.catchUp = true
            return state.hasWork
        }
        if wake { ring() }
    }

    /// Called by the directory watch (on its thread) with the entries of the wormhole directory
    /// that changed: the mailboxes whose `ID.json` was replaced or removed that are the
    /// listener's are read as if posted.
    func filesChanged(_ names: [String]) {
        let identifiers = names.compactMap(MessageIdentifier.init(fileName:))
        if identifiers.isEmpty { return }
        if let only {
            if identifiers.contains(only) { record([only], reason: .posted) }
        } else {
            record(identifiers, reason: .posted)
        }
    }

    /// Called by the directory watch kept beside the bus (on the loop's thread) with the
    /// mailboxes whose `ID.json` was replaced or removed. Normally their posts arrive at once and
    /// deliver them; a rename whose post has not come within ``orphanGrace`` (its sender died
    /// between the write and the signal) is compared with what was last delivered and, if it
    /// changed, delivered as a catch-up.
    func filesChangedOnBus(_ names: [String]) {
        let identifiers = names.compactMap(MessageIdentifier.init(fileName:))
        let mine = only.map { only in identifiers.contains(only) ? [only] : [] } ?? identifiers
        guard !mine.isEmpty else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        let schedule = state.withLock { state -> Bool in
            if pump.isCancelled { return false }
            for identifier in mine {
                if let posted = state.postedAt[identifier], now &- posted < Self.sameIteration { continue }
                state.orphans[identifier] = now
            }
            if state.orphans.isEmpty || state.orphanCheckScheduled { return false }
            state.orphanCheckScheduled = true
            return true
        }
        if schedule { scheduleOrphanCheck() }
    }

    /// On the loop: its own timed sleep, no thread or descriptor (the absence of a post is the
    /// one thing no descriptor reports).
    private func scheduleOrphanCheck() {
        do throws(SystemFailure) {
            // One millisecond more: the loop counts whole milliseconds, the stamps nanoseconds.
            try LoopDeadline.schedule(after: Self.orphanGrace / 1_000_000 + 1) { [weak self] in self?.checkOrphans() }
        } catch {
            state.withLock { $0.orphanCheckScheduled = false }
        }
    }

    /// The renames still without a post after the grace: compared and, when changed, delivered.
    private func checkOrphans() {
        let now = DispatchTime.now().uptimeNanoseconds
        let (again, wake) = state.withLock { state -> (Bool, Bool) in
            state.orphanCheckScheduled = false
            if pump.isCancelled { return (false, false) }
            let due = state.orphans.filter { now &- $0.value >= Self.orphanGrace }.map(\.key)
            for identifier in due { state.orphans[identifier] = nil }
            if !due.isEmpty { Self.merge(due, reason: .catchUp, sentAt: nil, into: &state) }
            let again = !state.orphans.isEmpty
            if again { state.orphanCheckScheduled = true }
            return (again, !due.isEmpty && state.hasWork)
        }
        if again { scheduleOrphanCheck() }
        if wake { ring() }
    }

    /// The identifier a name of this listener's route stands for, or `nil` for a name below the
    /// prefix that is not an identifier.
    private func identifier(in name: NotificationName) -> MessageIdentifier? {
        if let only { return only }
        guard let suffix = String(name.rawValue.utf8.dropFirst(prefixLength)) else { return nil }
        return try? MessageIdentifier(suffix)
    }

    /// Called for each `Message` signal of the listener's route (on the I/O thread): queues the
    /// transient message, or the report of a malformed one. It is never coalesced with anything;
    /// when `transientLimit` are already waiting, the oldest is dropped and reported.
    func received(_ signal: TransientSignal) {
        let item: Item
        switch signal {
        case .message(let name, let payload):
            guard let identifier = identifier(in: name) else { return }
            item = Item(identifier: identifier, reason: .transient, payload: .success(payload))
        case .malformed(let name, let reason):
            guard let identifier = identifier(in: name) else { return }
            item = Item(
                identifier: identifier, reason: .transient,
                payload: .failure(WormholeError(.transientDropped, value: identifier.rawValue, reason)))
        }
        // A handler on the I/O thread with nothing queued before this message: deliver it here,
        // without queueing (the common case of a listener that keeps up).
        if case .handler(_, let handler) = sink, let payload = item.payload {
            let inline = deliverInline {
                if state.withLock({ pump.isCancelled || $0.hasWork }) {
                    _ = enqueue(item)
                    return true
                }
                return false
            } deliver: {
                handler(MessageDelivery(transient: item, payload: payload))
            }
            if inline { return }
        }
        if enqueue(item) { ring() }
    }

    /// Queues a transient message (dropping the oldest beyond `transientLimit`); whether the
    /// reader must be woken.
    private func enqueue(_ item: Item) -> Bool {
        state.withLock { state -> Bool in
            if pump.isCancelled { return false }
            if state.transientCount >= transientLimit, let oldest = state.order.firstIndex(where: \.isTransient) {
                if case .transient(let dropped) = state.order.remove(at: oldest) {
                    if let index = state.dropped.firstIndex(where: { $0.identifier == dropped.identifier }) {
                        state.dropped[index].count += 1
                    } else {
                        state.dropped.append((dropped.identifier, 1))
                    }
                }
                state.transientCount -= 1
            }
            state.order.append(.transient(item))
            state.transientCount += 1
            return state.hasWork
        }
    }

    /// Remembers what is stored now as known, so that a catch-up after a reconnect delivers only
    /// what changed since the listener started, not messages that were already there.
    /// `stored`: the identifiers stored now, when the caller listed them once for many listeners
    /// (an identifier not among them has nothing to remember, and its file is not opened).
    func recordBaseline(stored: Set<MessageIdentifier>? = nil) {
        var identifiers = only.map { [$0] } ?? ((try? transiting.storedIdentifiers()) ?? [])
        if let stored, only != nil { identifiers = identifiers.filter(stored.contains) }
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
            if pump.isCancelled { return false }
            Self.merge(identifiers, reason: reason, sentAt: sentAt, into: &state)
            return state.hasWork
        }
        if wake { ring() }
    }

    private static func merge(
        _ identifiers: [MessageIdentifier], reason: Reason, sentAt: UInt64?, into state: inout ListenerState
    ) {
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
                state.order.append(.mailbox(identifier))
            }
        }
    }

    private func ring() {
        switch sink {
        case .doorbell(let continuation): continuation.yield(())
        case .handler: wake()
        }
    }

    // MARK: The reading side

    /// The pending mailboxes, in the order they were first posted (possibly none, when a
    /// catch-up was asked for meanwhile: call again), or `nil` when nothing is pending. A
    /// pending catch-up lists the mailboxes here.
    func take() -> [Item]? {
        let wantsCatchUp = state.withLock { state -> Bool in
            defer { state.catchUp = false }
            return state.catchUp && !pump.isCancelled
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
                if !pump.isCancelled { Self.merge(sorted, reason: .catchUp, sentAt: nil, into: &state) }
            }
        }
        return state.withLock { state -> [Item]? in
            if pump.isCancelled || !state.hasWork { return nil }
            // A catch-up asked for after the listing above: the caller comes back for it.
            if state.order.isEmpty && state.dropped.isEmpty { return [] }
            var batch = state.dropped.map { dropped in
                Item(
                    identifier: dropped.identifier, reason: .transient,
                    payload: .failure(
                        WormholeError(
                            .transientDropped, value: dropped.identifier.rawValue,
                            "\(dropped.count) transient message(s) for '\(dropped.identifier)' dropped: the listener fell "
                                + "more than \(transientLimit) transient messages behind (ListenOptions.transientBufferLimit)"
                        )))
            }
            batch.reserveCapacity(batch.count + state.order.count)
            for entry in state.order {
                switch entry {
                case .mailbox(let identifier):
                    if let pending = state.pending[identifier] {
                        batch.append(Item(identifier: identifier, reason: pending.reason, sentAt: pending.sentAt))
                    }
                case .transient(let item): batch.append(item)
                }
            }
            state.pending = [:]
            state.order = []
            state.transientCount = 0
            state.dropped = []
            return batch
        }
    }

    /// The pump's round: reads and delivers until nothing is pending (callback listeners, on
    /// their executor). Notifications that arrive meanwhile are merged into the pending set, so
    /// a burst costs one read per identifier per round.
    func drainPending() {
        guard case .handler(_, let handler) = sink else { return }
        drain(taking: take) { item in
            if let delivery = read(item), !isCancelled { handler(delivery) }
        }
    }

    /// Reads and decodes one mailbox, or decodes one transient message: the delivery, or `nil`
    /// when there is nothing to deliver (a catch-up of an unchanged mailbox, a start-up check of
    /// an empty one, a post that finds the file last delivered).
    func read(_ item: Item) -> MessageDelivery<Message>? {
        if let payload = item.payload { return MessageDelivery(transient: item, payload: payload) }
        let identifier = item.identifier
        let data: Data?
        do {
            data = try transiting.messageData(identifier: identifier)
        } catch {
            let wormholeError =
                error as? WormholeError
                ?? WormholeError(.io, value: identifier.rawValue, "cannot read message '\(identifier)': \(error)")
            return MessageDelivery(
                identifier: identifier, result: .failure(wormholeError), reason: .init(item.reason),
                sentAt: item.sentAt)
        }
        let fingerprint = data.map(Fingerprint.init)
        let deliversEveryPost = self.deliversEveryPost
        let skip = state.withLock { state -> Bool in
            let known = state.lastDelivered[identifier]
            state.lastDelivered[identifier] = fingerprint
            let skip: Bool
            switch item.reason {
            case .catchUp: skip = known == fingerprint
            case .stored: skip = data == nil
            // The file this listener last delivered: a duplicate of that delivery (a burst of
            // posts coalesced into fewer wakes than reads, or the same document sent again).
            case .posted: skip = !deliversEveryPost && fingerprint != nil && state.delivered[identifier] == fingerprint
            case .transient: skip = false
            }
            if !skip { state.delivered[identifier] = fingerprint }
            return skip
        }
        if skip { return nil }
        guard let data else {
            let error = WormholeError(
                .noMessage, value: identifier.rawValue, "no message is stored for '\(identifier)'")
            return MessageDelivery(
                identifier: identifier, result: .failure(error), reason: .init(item.reason),
                sentAt: item.sentAt)
        }
        let result: Result<Message, WormholeError>
        do {
            result = .success(try MessageCenter.decode(data, as: Message.self, identifier: identifier))
        } catch {
            result = .failure(error)
        }
        return MessageDelivery(
            identifier: identifier, result: result, reason: .init(item.reason), sentAt: item.sentAt)
    }
}

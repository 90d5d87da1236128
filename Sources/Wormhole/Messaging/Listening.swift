public import Dispatch
import Foundation
import Synchronization
public import WormholeDBus

/// One delivery to a message listener: which mailbox, why, and what it holds.
public struct MessageDelivery<Message: Sendable>: Sendable {
    /// Why the listener is being called.
    public enum Reason: Sendable, Hashable {
        /// A sender stored a message (or cleared, or woke the mailbox) and posted.
        case posted
        /// The message that was already stored when the listener started
        /// (``Wormhole/ListenOptions/deliversStoredMessageOnStart``).
        case stored
        /// The bus connection came back after an outage and the stored message differs from
        /// the last one delivered: it changed while the listener was cut off.
        case catchUp
    }

    /// The mailbox.
    public var identifier: MessageIdentifier
    /// The decoded message, or why there is none: ``WormholeError/Code/noMessage`` when the
    /// mailbox is empty (cleared), ``WormholeError/Code/decodingFailed`` for a document that does
    /// not decode, ``WormholeError/Code/unsafePath`` or ``WormholeError/Code/io`` when it cannot be read.
    public var result: Result<Message, WormholeError>
    /// Why the listener is being called.
    public var reason: Reason
    /// The state of the latest notification this delivery answers (``Reason/posted`` only).
    /// Wormhole senders put the write's time there, in nanoseconds since 1970 (CLOCK_REALTIME),
    /// so `now - state` is the message's latency; `dbus-send` triggers carry none.
    public var state: UInt64?
}

extension Wormhole {
    /// How a listener behaves.
    public struct ListenOptions: Sendable, Hashable {
        /// Deliver the message already stored as soon as the listener is active ("check the
        /// mailbox when you wake up"); nothing is delivered for an empty mailbox.
        public var deliversStoredMessageOnStart: Bool
        /// For streams: how many undelivered deliveries are kept; past that the oldest is dropped.
        public var bufferLimit: Int

        /// Creates options.
        public init(deliversStoredMessageOnStart: Bool = false, bufferLimit: Int = 64) {
            self.deliversStoredMessageOnStart = deliversStoredMessageOnStart
            self.bufferLimit = bufferLimit
        }
    }

    /// Calls `handler` with the decoded message each time a sender posts `identifier`, until
    /// the listener is cancelled. Active when this returns.
    ///
    /// Bursts may be coalesced into fewer deliveries, but after the last post the last delivery
    /// carries the latest stored message. The file is read and decoded on `queue`, where the
    /// handler runs; `nil` runs both on the bus connection's I/O thread (lowest latency; the
    /// handler must return quickly). Several listeners per identifier are fine.
    public func listen<Message: Decodable & Sendable>(
        identifier: String, as type: Message.Type = Message.self, queue: DispatchQueue?,
        options: ListenOptions = ListenOptions(),
        handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> MessageListener {
        let identifier = try MessageIdentifier(identifier)
        let core = ListenerCore<Message>(
            transiting: transiting, prefix: notificationPrefix.rawValue, only: identifier, queue: queue, emit: handler)
        return try start(core, options: options)
    }

    /// Calls `handler` for every identifier of this wormhole (prefix observation of
    /// `<group>/<directory>/`), each delivery naming its identifier.
    public func listenToAllMessages<Message: Decodable & Sendable>(
        as type: Message.Type = Message.self, queue: DispatchQueue?, options: ListenOptions = ListenOptions(),
        handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> MessageListener {
        let core = ListenerCore<Message>(
            transiting: transiting, prefix: notificationPrefix.rawValue, only: nil, queue: queue, emit: handler)
        return try start(core, options: options)
    }

    /// The deliveries for `identifier` as an `AsyncSequence`; the listener is active when this
    /// returns and goes away when the iteration ends or its task is cancelled.
    public func messages<Message: Decodable & Sendable>(
        identifier: String, as type: Message.Type = Message.self, options: ListenOptions = ListenOptions()
    ) throws -> MessageStream<Message> {
        let identifier = try MessageIdentifier(identifier)
        return try stream(only: identifier, options: options)
    }

    /// The deliveries for every identifier of this wormhole as an `AsyncSequence`.
    public func allMessages<Message: Decodable & Sendable>(
        as type: Message.Type = Message.self, options: ListenOptions = ListenOptions()
    ) throws -> MessageStream<Message> {
        try stream(only: nil, options: options)
    }

    private func stream<Message: Decodable & Sendable>(
        only identifier: MessageIdentifier?, options: ListenOptions
    ) throws -> MessageStream<Message> {
        let (stream, continuation) = AsyncStream<MessageDelivery<Message>>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, options.bufferLimit)))
        let core = ListenerCore<Message>(
            transiting: transiting, prefix: notificationPrefix.rawValue, only: identifier,
            queue: DispatchQueue(label: "wormhole.listener"), emit: { continuation.yield($0) })
        let listener = try start(core, options: options)
        continuation.onTermination = { _ in listener.cancel() }
        return MessageStream(stream)
    }

    private func start<Message>(_ core: ListenerCore<Message>, options: ListenOptions) throws -> MessageListener {
        let center = try notificationCenter()
        let handler: @Sendable (DarwinNotification) -> Void = { note in core.notified(note) }
        let observer =
            if let only = core.only {
                try center.addObserver(for: notificationName(for: only), queue: nil, handler: handler)
            } else {
                try center.addObserver(forPrefix: notificationPrefix, queue: nil, handler: handler)
            }
        if options.deliversStoredMessageOnStart { core.checkStored() } else { core.recordBaseline() }
        return MessageListener(core: core, observer: observer, center: center)
    }
}

/// A registered message listener. It stays active until ``cancel()``; dropping the value does
/// not cancel it. It keeps the bus connection it listens on open, even after its ``Wormhole``
/// is released.
public final class MessageListener: Sendable {
    private let core: any ListenerCancelling
    private let observer: NotificationObserver
    private let center: DarwinNotificationCenter

    init(core: any ListenerCancelling, observer: NotificationObserver, center: DarwinNotificationCenter) {
        self.core = core
        self.observer = observer
        self.center = center
    }

    /// Stops the listener; its handler is not called after this returns (a call already
    /// running finishes). Calling it twice does nothing.
    public func cancel() {
        core.cancel()
        observer.cancel()
    }
}

protocol ListenerCancelling: Sendable {
    func cancel()
}

/// Reads and delivers for one listener: coalesces notifications per identifier, reads each
/// file at most once per wake-up, and remembers what it delivered for the catch-up after a
/// reconnect.
final class ListenerCore<Message: Decodable & Sendable>: ListenerCancelling {
    private struct State {
        var scheduled = false
        var cancelled = false
        var pending: [MessageIdentifier: MessageDelivery<Message>.Reason] = [:]
        var states: [MessageIdentifier: UInt64] = [:]
        var order: [MessageIdentifier] = []
        /// What each mailbox held when last delivered (or when the listener started), as a
        /// fingerprint: the catch-up compares against it without keeping every message in memory.
        var lastDelivered: [MessageIdentifier: Fingerprint] = [:]
    }

    let transiting: any WormholeTransiting
    let prefix: String
    let only: MessageIdentifier?
    private let queue: DispatchQueue?
    private let emit: @Sendable (MessageDelivery<Message>) -> Void
    private let state = Mutex(State())

    init(
        transiting: any WormholeTransiting, prefix: String, only: MessageIdentifier?, queue: DispatchQueue?,
        emit: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) {
        self.transiting = transiting
        self.prefix = prefix
        self.only = only
        self.queue = queue
        self.emit = emit
    }

    func cancel() { state.withLock { $0.cancelled = true } }

    /// Called on the bus I/O thread for each notification.
    func notified(_ note: DarwinNotification) {
        switch note.kind {
        case .posted:
            guard note.name.hasPrefix(prefix),
                let identifier = try? MessageIdentifier(String(note.name.dropFirst(prefix.count)))
            else { return }
            if let only, only != identifier { return }
            enqueue([identifier], reason: .posted, state: note.state)
        case .catchUp:
            var identifiers = Set(state.withLock { Array($0.lastDelivered.keys) })
            if let only {
                identifiers = [only]
            } else if let stored = try? transiting.storedIdentifiers() {
                identifiers.formUnion(stored)
            }
            enqueue(identifiers.sorted { $0.rawValue < $1.rawValue }, reason: .catchUp)
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
        enqueue(identifiers, reason: .stored)
    }

    private func enqueue(
        _ identifiers: [MessageIdentifier], reason: MessageDelivery<Message>.Reason, state notificationState: UInt64? = nil
    ) {
        let mustSchedule = state.withLock { state -> Bool in
            if state.cancelled { return false }
            for identifier in identifiers {
                if let notificationState { state.states[identifier] = notificationState }
                if let existing = state.pending[identifier] {
                    // A post outranks a catch-up or start-up check: it must be delivered.
                    if reason == .posted || existing != .posted { state.pending[identifier] = reason }
                } else {
                    state.pending[identifier] = reason
                    state.order.append(identifier)
                }
            }
            if state.scheduled || state.pending.isEmpty { return false }
            state.scheduled = true
            return true
        }
        guard mustSchedule else { return }
        if let queue {
            queue.async { self.drain() }
        } else {
            drain()
        }
    }

    /// Reads and delivers until nothing is pending. Notifications that arrive meanwhile are
    /// merged into the pending set, so a burst costs one read per identifier per round.
    private func drain() {
        while true {
            typealias Item = (MessageIdentifier, MessageDelivery<Message>.Reason, UInt64?)
            let batch = state.withLock { state -> [Item]? in
                if state.cancelled || state.order.isEmpty {
                    state.scheduled = false
                    state.pending = [:]
                    state.states = [:]
                    state.order = []
                    return nil
                }
                let batch = state.order.compactMap { id -> Item? in
                    state.pending[id].map { (id, $0, $0 == .posted ? state.states[id] : nil) }
                }
                state.pending = [:]
                state.states = [:]
                state.order = []
                return batch
            }
            guard let batch else { return }
            for (identifier, reason, notificationState) in batch {
                deliver(identifier, reason: reason, state: notificationState)
            }
        }
    }

    private func deliver(
        _ identifier: MessageIdentifier, reason: MessageDelivery<Message>.Reason, state notificationState: UInt64?
    ) {
        let data: Data?
        do {
            data = try transiting.messageData(identifier: identifier)
        } catch {
            let wormholeError =
                error as? WormholeError
                ?? WormholeError(.io, value: identifier.rawValue, "cannot read message '\(identifier)': \(error)")
            send(MessageDelivery(
                    identifier: identifier, result: .failure(wormholeError), reason: reason, state: notificationState))
            return
        }
        let fingerprint = data.map(Fingerprint.init)
        let previous = state.withLock { state -> Fingerprint? in
            let previous = state.lastDelivered[identifier]
            state.lastDelivered[identifier] = fingerprint
            return previous
        }
        switch reason {
        case .catchUp where previous == fingerprint: return
        case .stored where data == nil: return
        default: break
        }
        guard let data else {
            let error = WormholeError(.noMessage, value: identifier.rawValue, "no message is stored for '\(identifier)'")
            send(MessageDelivery(identifier: identifier, result: .failure(error), reason: reason, state: notificationState))
            return
        }
        let result: Result<Message, WormholeError>
        do {
            result = .success(try Wormhole.decode(data, as: Message.self, identifier: identifier))
        } catch {
            result = .failure(error)
        }
        send(MessageDelivery(identifier: identifier, result: result, reason: reason, state: notificationState))
    }

    private func send(_ delivery: MessageDelivery<Message>) {
        if state.withLock({ $0.cancelled }) { return }
        emit(delivery)
    }
}

/// Message deliveries as an `AsyncSequence` (see ``Wormhole/messages(identifier:as:options:)``);
/// the listener goes when the iteration ends.
public typealias MessageStream<Message: Sendable> = SubscriptionStream<MessageDelivery<Message>>

/// A message's length and 64-bit FNV-1a hash: enough to tell whether a mailbox changed.
struct Fingerprint: Hashable, Sendable {
    let count: Int
    let hash: UInt64

    init(_ data: Data) {
        count = data.count
        hash = NotifyContract.fnv1a64(data)
    }
}

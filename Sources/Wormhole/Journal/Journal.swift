import FoundationEssentials
import Glibc
import Logging
public import WormholeDBus
import WormholeSystem

/// A lossless, ordered log of messages for one identifier of a wormhole (contract §6): where a
/// mailbox keeps the last message, a journal keeps every one, numbered from 1 without gaps.
///
/// ```swift
/// let wormhole = try MessageCenter(applicationGroupIdentifier: "group.com.example.app")
/// let journal = wormhole.journal("events")
/// try journal.append(["kind": "tap"])                 // sequence 1, 2, 3… across processes
/// for try await record in try await journal.records(from: .beginning, consumer: "indexer", as: [String: String].self) {
///     print(record.sequence, record.message, record.isRedelivery)
/// }
/// ```
///
/// Records live in `<root>/<group>/<directory>/<identifier>.journal/` (format: docs/journal-format.md).
/// Any number of threads and processes may append; they serialise on a lock file, and each record
/// carries a checksum, so a writer killed mid-write leaves a torn tail that the next appender
/// removes. Readers take no lock and never hold up writers. After appending, the writer posts
/// `<group>/<directory>/<identifier>/journal` with the last sequence number as state; readers drain
/// from their cursor on every wake, so a coalesced or lost signal never strands a record.
///
/// Mailboxes and journals are independent: `passMessage(_:identifier:)` stays the mailbox.
public final class Journal: Sendable {
    /// The largest record payload, in bytes (1 MiB): a larger message is refused before anything
    /// is written.
    public static let maximumRecordSize = 1 << 20

    /// How appended records reach the disk.
    public enum Durability: Sendable, Hashable {
        /// Written to the page cache: an append that returned survives its process being killed,
        /// not a power loss. The default.
        case none
        /// `fdatasync` before an append returns, with group commit: appenders that wait for the
        /// same sync (in this or other processes) share one, so the cost is paid per group.
        case fdatasync
    }

    /// When whole segments are removed, oldest first (the last segment is never removed). Every
    /// limit is optional; a segment goes as soon as one limit says so. Retention is applied by
    /// the appender that starts a new segment, and by ``Journal/trim(_:)``.
    public struct Retention: Sendable, Hashable {
        /// Remove the oldest segments while the journal's segments together are larger than this.
        public var maximumBytes: Int?
        /// Remove a segment when it was last written longer ago than this many seconds.
        public var maximumAge: Double?
        /// Remove a segment when all its records are older than the newest `maximumRecords`.
        public var maximumRecords: UInt64?

        /// Creates a retention policy; with no limit, nothing is ever removed (the default).
        public init(maximumBytes: Int? = nil, maximumAge: Double? = nil, maximumRecords: UInt64? = nil) {
            self.maximumBytes = maximumBytes
            self.maximumAge = maximumAge
            self.maximumRecords = maximumRecords
        }

        /// Keep everything.
        public static let unlimited = Retention()

        var isUnlimited: Bool { maximumBytes == nil && maximumAge == nil && maximumRecords == nil }
    }

    /// A journal's settings (they belong to the process that opens it; several processes may
    /// use different ones).
    public struct Options: Sendable, Hashable {
        /// Page cache (the default) or `fdatasync` with group commit.
        public var durability: Durability
        /// A new segment is started when the current one reached this many bytes (default 8 MiB).
        public var segmentSize: Int
        /// Which segments the appender removes when it starts a new one.
        public var retention: Retention

        /// Creates options.
        public init(durability: Durability = .none, segmentSize: Int = 8 << 20, retention: Retention = .unlimited) {
            self.durability = durability
            self.segmentSize = max(segmentSize, 4096)
            self.retention = retention
        }
    }

    /// The journal's identifier.
    public let identifier: MessageIdentifier
    /// The journal directory, `<root>/<group>/<directory>/<identifier>.journal`.
    public var path: String { location.path }
    /// The name appenders post after appending, `<group>/<directory>/<identifier>/journal`.
    package var notificationName: NotificationName { location.notificationName }
    /// The settings in use.
    package let options: Journal.Options

    let location: JournalLocation
    let center: MessageCenter
    /// Shared by every append (its settings are never changed after `init`).
    private let encoder: JSONEncoder
    let writer: JournalWriter
    private let poster: JournalPoster

    init(center: MessageCenter, identifier: MessageIdentifier, options: Journal.Options) {
        self.identifier = identifier
        self.center = center
        self.options = options
        location = JournalLocation(
            container: center.container, directory: center.directory, identifier: identifier, logger: center.logger)
        writer = JournalWriter(location: location, options: options)
        encoder = MessageCenter.makeEncoder()
        poster = JournalPoster(name: location.notificationName, center: center)
    }

    // MARK: Appending

    /// Appends `message`, encoded as JSON, as the next record; returns its sequence number.
    ///
    /// The record is in the journal when this returns (on disk too with ``Durability/fdatasync``);
    /// then readers are woken (a bus that is down does not fail the append: readers catch up when
    /// they reconnect).
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/recordTooLarge`` for a message over
    ///   ``maximumRecordSize`` bytes, ``WormholeError/Code/encodingFailed``, or an I/O error (a
    ///   full disk); nothing is appended then.
    @discardableResult
    public func append(_ message: some Encodable) throws -> UInt64 {
        let sequence = try writer.append(try encode(message))
        poster.posted(sequence)
        return sequence
    }

    /// Appends a JSON document exactly as given (checked to be one JSON value when it was made).
    @discardableResult
    public func append(_ document: JSONDocument) throws -> UInt64 {
        let sequence = try writer.append(document.data)
        poster.posted(sequence)
        return sequence
    }

    /// Appends `messages` as consecutive records under one lock acquisition and one write (and
    /// one sync with ``Durability/fdatasync``), waking readers once; all or none are appended.
    /// Returns their sequence numbers; an empty array throws ``WormholeError/Code/invalidValue``.
    @discardableResult
    public func append<Message: Encodable>(contentsOf messages: [Message]) throws -> ClosedRange<UInt64> {
        try appendPayloads(try messages.map(encode))
    }

    /// `message` as one JSON document: the journal's one encoder (making one per append costs
    /// more than a small message's encoding).
    private func encode(_ message: some Encodable) throws -> Data {
        if message is Data { throw MessageCenter.refuseData(identifier.rawValue) }
        return try MessageCenter.encode(
            message, identifier: identifier, with: encoder, subject: "journal \(quoted(identifier.rawValue))")
    }

    /// Appends JSON documents as consecutive records, as `append(contentsOf:)` does for `Encodable` messages.
    @discardableResult
    public func append(contentsOf documents: [JSONDocument]) throws -> ClosedRange<UInt64> {
        try appendPayloads(documents.map(\.data))
    }

    private func appendPayloads(_ payloads: [Data]) throws -> ClosedRange<UInt64> {
        guard !payloads.isEmpty else {
            throw WormholeError(
                .invalidValue, value: identifier.rawValue, "nothing to append to journal '\(identifier)'")
        }
        let range = try writer.append(payloads)
        poster.posted(range.upperBound)
        return range
    }

    /// Waits until the notifications of earlier appends are on the bus, at most `timeout`;
    /// returns the last notification error since the previous call (`nil`: every reader was
    /// told).
    ///
    /// Not needed before exiting: the notification of an append is posted and on the bus before
    /// the process exits normally (returning from `main`, `exit()`), within the drain's bound.
    /// See ``DarwinNotificationCenter/flush(timeout:)``.
    @discardableResult
    public func flush(timeout: Duration = DarwinNotificationCenter.defaultFlushTimeout) -> (any Error)? {
        poster.flush(timeout: timeout)
    }

    // MARK: Reading

    /// The records as an `AsyncSequence`, in sequence order, from `start` (or, for a durable
    /// consumer that has a stored cursor, after the last record it handled).
    ///
    /// The reader is woken by the journal's notification and reads every record after its
    /// cursor on each wake (and after a bus reconnect), so nothing is stranded by coalesced or
    /// lost signals. It iterates until the task is cancelled or the loop ends.
    ///
    /// - Parameters:
    ///   - start: where a reader without a stored cursor starts (default ``JournalPosition/end``:
    ///     records appended after this returns).
    ///   - consumer: a durable consumer's name (identifier rules). Its cursor is stored in the
    ///     journal directory when the loop asks for records after a batch: at-least-once across
    ///     crashes; records of the batch in flight at a crash are delivered again with
    ///     ``JournalRecord/isRedelivery`` set. `nil`: an in-process cursor.
    ///   - type: the type each record's message is decoded as (`JSONDocument` for the raw JSON).
    /// - Throws (from the iteration): ``WormholeError/Code/journalGap`` once when records were
    ///   removed by retention before they were read (the error's `value` is the first available
    ///   sequence number; iterating again goes on there), ``WormholeError/Code/journalDamaged``
    ///   once per range that cannot be read (a missing, truncated or foreign segment, a bad
    ///   checksum; ``WormholeError/journalDamage`` says which; iterating again goes on with the
    ///   next readable record), ``WormholeError/Code/decodingFailed`` for a record that does not
    ///   decode (iterating again goes on after it).
    public func records<Message: Decodable & Sendable>(
        from start: JournalPosition = .end, consumer: String? = nil, as type: Message.Type = Message.self
    ) async throws -> JournalRecordStream<Message> {
        let (doorbell, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // The wake-ups first, then the cursor: nothing appended after the cursor's start is missed.
        let subscriber = makeSubscriber { continuation.yield(()) }
        // On the bus without blocking the task; the stream ends when the connection closes.
        try await center.wakeups.startStream(subscriber) {
            try await subscriber.attach(to: center.notificationCenter()) { continuation.finish() }
        }
        let core: JournalConsumerCore
        do {
            core = try JournalConsumerCore(
                location: location, start: start, consumer: consumer, synchronized: options.durability == .fdatasync)
        } catch {
            subscriber.detach()
            throw error
        }
        continuation.onTermination = { _ in subscriber.detach() }
        return JournalRecordStream(
            doorbell: doorbell, reader: JournalStreamReader<Message>(core: core, identifier: identifier))
    }

    /// Calls `handler` for every record in order, from `start` (or after a durable consumer's
    /// stored cursor), until the listener is cancelled or released. Active when this returns.
    ///
    /// A failure (a gap report, a damaged range, a record that does not decode) is a `.failure`
    /// delivery naming what happened (for gaps and damage, ``WormholeError/journalDamage`` has
    /// the range and the reason); delivery goes on with the next readable record.
    /// For a durable consumer the cursor is stored after each batch of calls (and, when the
    /// listener is cancelled from the handler, through the record being handled), and when the
    /// process exits normally (returning from `main`, `exit()`): no call starts any more, a call
    /// running on another thread is waited for (within the exit drain's 3 s), and the cursor is
    /// stored through the last record whose handler returned, so the next start delivers only
    /// what comes after it. After a crash or `SIGKILL`, the batch in flight comes again, flagged.
    ///
    /// Records are read (and a durable cursor written) where `delivery` says, where the handler
    /// then runs; with `DeliveryQueue.ioThread`, records already in the journal when this is
    /// called (a start before the end, a stored cursor) are delivered on the calling thread
    /// before it returns. Two calls of the handler never overlap.
    public func listen<Message: Decodable & Sendable>(
        from start: JournalPosition = .end, consumer: String? = nil, as type: Message.Type = Message.self,
        on delivery: DeliveryQueue = .serial,
        handler: @escaping @Sendable (Result<JournalRecord<Message>, WormholeError>) -> Void
    ) throws -> Subscription {
        let core = try JournalConsumerCore(
            location: location, start: start, consumer: consumer, synchronized: options.durability == .fdatasync)
        let drainer = JournalDrainer<Message>(
            core: core, identifier: identifier, executor: delivery.makeExecutor(label: "wormhole.journal"),
            handler: handler)
        let subscriber = makeSubscriber { drainer.wake() }
        try center.wakeups.start([subscriber])
        let listener = Subscription(core: drainer) { subscriber.detach() }
        // Records already there (a start before the end, a stored cursor) are delivered now.
        drainer.wake()
        return listener
    }

    /// Calls `wake` (on the loop's thread) whenever records may have been appended: on its
    /// appenders' posts, and while there is no bus on changes of the journal's directory (the
    /// wormhole's ``MessageCenter/wakeSource`` says which), and once after each return of the bus.
    /// For tools that read with their own cursor (the `wormholectl` command). Active when this returns.
    package func onAppend(_ wake: @escaping @Sendable () -> Void) throws -> Subscription {
        let reader = CallbackReader(
            executor: DeliveryQueue.ioThread.makeExecutor(label: "wormhole.journal"), call: wake)
        let subscriber = makeSubscriber { reader.wake() }
        try center.wakeups.start([subscriber])
        return Subscription(core: reader) { subscriber.detach() }
    }

    /// The journal's wake-ups for the wormhole's ``WakeEngine``: the appenders' posts of
    /// ``notificationName``; without a bus, the journal directory (a record is a write to a
    /// segment, a new segment a rename into it).
    private func makeSubscriber(_ wake: @escaping @Sendable () -> Void) -> WakeSubscriber {
        let location = location
        let target = WatchTarget(key: location.path, events: UInt32(IN_MODIFY | IN_MOVED_TO | IN_CREATE)) {
            create throws(WormholeError) in
            guard let directory = try location.open(create: create) else {
                if !create { return nil }
                throw WormholeError(.io, value: location.path, "cannot create the journal directory '\(location.path)'")
            }
            return directory
        }
        return WakeSubscriber(
            target: location.notificationName, isPrefix: false, watchTarget: target,
            wakes: .init(
                posted: { _ in wake() },
                files: { names in if names.contains(where: { JournalFormat.segmentSequence($0) != nil }) { wake() } },
                catchUp: wake))
    }

    /// A cursor to read with, for tools that run their own loop (the `wormholectl` command).
    package func makeConsumer(from start: JournalPosition, consumer: String?) throws -> JournalPackageConsumer {
        JournalPackageConsumer(
            core: try JournalConsumerCore(
                location: location, start: start, consumer: consumer, synchronized: options.durability == .fdatasync),
            identifier: identifier)
    }

    // MARK: Maintenance

    /// What the journal holds now, with its damaged ranges and unreadable consumer cursors
    /// (reads every frame; takes no lock).
    public func status() throws -> JournalStatus {
        try JournalStatus.read(location)
    }

    /// The ranges of the journal that cannot be read, in order (reads every frame; takes no
    /// lock): empty when the journal is whole. `wormholectl journal check` prints them.
    package func check() throws -> [JournalDamage] {
        try JournalStatus.read(location).damaged
    }

    /// Removes whole segments by `retention` now (never the last one); returns the removed files' names.
    @discardableResult
    public func trim(_ retention: Retention) throws -> [String] {
        try writer.trim(retention)
    }
}

/// One record as a reader delivers it.
public struct JournalRecord<Message: Sendable>: Sendable {
    /// The journal's identifier.
    public var identifier: MessageIdentifier
    /// The record's sequence number: 1 for the first record ever appended, then +1 per record.
    public var sequence: UInt64
    /// The message, decoded.
    public var message: Message
    /// When it was appended: nanoseconds since 1970, the appender's `CLOCK_REALTIME`.
    public var appendedAt: UInt64
    /// Whether this record may have been delivered to this durable consumer before (it was in
    /// the batch in flight when the consumer last stopped without storing its cursor).
    public var isRedelivery: Bool
}

extension MessageCenter {
    /// The journal for `identifier` of this wormhole.
    public func journal(_ identifier: MessageIdentifier, options: Journal.Options = Journal.Options()) -> Journal {
        Journal(center: self, identifier: identifier, options: options)
    }
}

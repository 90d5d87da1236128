// SPDX-License-Identifier: Apache-2.0
public import WormholeDBus

extension MessageCenter {
    /// How a listener behaves.
    public struct ListenOptions: Sendable, Hashable {
        /// Deliver the message already stored as soon as the listener is active ("check the
        /// mailbox when you wake up"); nothing is delivered for an empty mailbox.
        public var deliversStoredMessageOnStart: Bool

        /// Deliver a mailbox on every post that wakes the listener, even when the file is the
        /// one it delivered last. By default (`false`) a mailbox is delivered again only when
        /// its file changed since the listener's last delivery of it: a burst of posts that
        /// leaves several reads of the same file delivers it once, and a sender storing the
        /// same document twice in a row is delivered once. After the last post the last
        /// delivery still carries the latest stored message.
        public var deliversEveryPost: Bool

        /// The most transient messages (``MessageDelivery/Reason/transient``) kept for a
        /// handler or stream that is slower than the senders (default 1,024). Past it the
        /// oldest waiting message is dropped, and the next deliveries start with one
        /// ``WormholeError/Code/transientDropped`` failure per identifier saying how many.
        public var transientBufferLimit: Int

        /// When the bus cannot be reached (no session bus in a container, an SSH session or CI; a
        /// daemon that is down or does not answer), listen through inotify on the wormhole
        /// directory instead of throwing, and move to the bus as soon as it can be reached (see
        /// ``WakeSource``); likewise while a lost connection is away. Default
        /// `true`. Only for the built-in transitings (a custom one has no directory to watch).
        /// With `false`, starting a listener without a bus throws `BusError` and a lost bus is
        /// caught up on its return.
        public var wakesThroughDirectoryWithoutBus: Bool

        /// Keep watching the wormhole directory while on the bus too (on the process's one
        /// inotify instance), so that a message whose sender died between storing it and
        /// sending its signal (a share extension killed right after its write) still reaches
        /// this listener: a mailbox replaced without its post arriving within half a second is
        /// compared with what was last delivered and, if it changed, delivered as
        /// ``MessageDelivery/Reason/catchUp`` (`sentAt` `nil`). Posts that do arrive are
        /// delivered as usual, never twice; a post later than half a second (a loaded machine)
        /// finds the message already delivered, as a catch-up. Needs
        /// ``wakesThroughDirectoryWithoutBus`` (the wormhole directory is made if missing).
        /// Default `true`. It costs the process's one inotify instance for as long as it
        /// listens (shared by every directory it watches and by the wait for a lost bus;
        /// limited per user by `fs.inotify.max_user_instances`, 128 by default); when none can
        /// be had, listening goes on with the bus alone (logged). Turn it off where every
        /// sender is known to survive its send, to save that instance and one wake-up per
        /// message.
        public var catchesWritesWithoutSignal: Bool

        /// Creates options.
        public init(
            deliversStoredMessageOnStart: Bool = false, deliversEveryPost: Bool = false,
            transientBufferLimit: Int = 1024,
            wakesThroughDirectoryWithoutBus: Bool = true, catchesWritesWithoutSignal: Bool = true
        ) {
            self.deliversStoredMessageOnStart = deliversStoredMessageOnStart
            self.deliversEveryPost = deliversEveryPost
            self.transientBufferLimit = transientBufferLimit
            self.wakesThroughDirectoryWithoutBus = wakesThroughDirectoryWithoutBus
            self.catchesWritesWithoutSignal = catchesWritesWithoutSignal
        }
    }

    /// Calls `handler` with the decoded message each time a sender posts `identifier`, until
    /// the listener is cancelled or released. Active when this returns.
    ///
    /// Bursts may be coalesced into fewer deliveries, but after the last post the last delivery
    /// carries the latest stored message; a file already delivered is not delivered again
    /// (see ``ListenOptions/deliversEveryPost``). Transient messages
    /// (`passTransientMessage(_:identifier:)`) come through the same handler,
    /// each on its own, in order, with ``MessageDelivery/Reason/transient``. The file is read and decoded where `delivery` says,
    /// where the handler then runs: with `DeliveryQueue/ioThread` both happen on the bus
    /// connection's I/O thread (no hop; the handler must return quickly), and the start-up
    /// delivery of ``ListenOptions/deliversStoredMessageOnStart`` runs on the calling thread
    /// before this returns. Two calls of one listener's handler never overlap. Several
    /// listeners per identifier are fine.
    public func listen<Message: Decodable & Sendable>(
        identifier: MessageIdentifier, as type: Message.Type = Message.self, on delivery: DeliveryQueue = .serial,
        options: ListenOptions = ListenOptions(), handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> Subscription {
        try start(only: identifier, on: delivery, options: options, handler: handler)
    }

    /// Listens to many identifiers at once, calling `handler` for each delivery (each names its
    /// identifier): one listener per identifier, returned in the order given, all active when
    /// this returns. The match rules of every identifier are sent to the bus before any answer is
    /// awaited, so 10,000 identifiers take about one round trip, not 10,000. The handler's calls
    /// never overlap, whichever identifier they are for. If any identifier cannot be listened to,
    /// none is (the error names the rule the bus refused).
    public func listen<Message: Decodable & Sendable>(
        identifiers: [MessageIdentifier], as type: Message.Type = Message.self, on delivery: DeliveryQueue = .serial,
        options: ListenOptions = ListenOptions(), handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> [Subscription] {
        // One executor for all: the handler's calls never overlap.
        let executor = delivery.makeExecutor(label: "wormhole.listener")
        let cores = identifiers.map { identifier in
            ListenerCore<Message>(
                transiting: transiting, prefix: notificationPrefix, only: identifier, options: options,
                sink: .handler(executor, handler))
        }
        let listeners = cores.map { core in makeSubscriber(core, only: core.only, options: options) }
        try wakeups.start(listeners)
        // One listing of the directory, not one open per identifier (10,000 of them at start-up).
        let stored = cores.count > 1 ? (try? transiting.storedIdentifiers()).map(Set.init) : nil
        for core in cores {
            if options.deliversStoredMessageOnStart { core.checkStored() } else { core.recordBaseline(stored: stored) }
        }
        return zip(cores, listeners).map { core, listener in Subscription(core: core) { listener.detach() } }
    }

    /// Calls `handler` for every identifier of this wormhole (one prefix rule on the bus for
    /// `<group>/<directory>/`), each delivery naming its identifier. Names below the prefix that
    /// are not an identifier (such as a journal's `<group>/<directory>/I/journal`) are ignored.
    public func listen<Message: Decodable & Sendable>(
        as type: Message.Type = Message.self, on delivery: DeliveryQueue = .serial,
        options: ListenOptions = ListenOptions(), handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> Subscription {
        try start(only: nil, on: delivery, options: options, handler: handler)
    }

    /// The deliveries for `identifier` as an `AsyncSequence`; the listener is active when this
    /// returns and goes away when the iteration ends, its task is cancelled, or the stream is
    /// released. The file is read in the iterator's `next()`.
    public func messages<Message: Decodable & Sendable>(
        identifier: MessageIdentifier, as type: Message.Type = Message.self, options: ListenOptions = ListenOptions()
    ) async throws -> MessageStream<Message> {
        try await stream(only: identifier, options: options)
    }

    /// The deliveries for every identifier of this wormhole as an `AsyncSequence`.
    public func messages<Message: Decodable & Sendable>(
        as type: Message.Type = Message.self, options: ListenOptions = ListenOptions()
    ) async throws -> MessageStream<Message> {
        try await stream(only: nil, options: options)
    }

    private func stream<Message: Decodable & Sendable>(
        only identifier: MessageIdentifier?, options: ListenOptions
    ) async throws -> MessageStream<Message> {
        let (doorbell, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let core = ListenerCore<Message>(
            transiting: transiting, prefix: notificationPrefix, only: identifier, options: options,
            sink: .doorbell(continuation))
        let listener = makeSubscriber(core, only: identifier, options: options)
        _ = try await listener.startStream(in: wakeups, on: notificationCenter, core: core, ending: continuation)
        if options.deliversStoredMessageOnStart { core.checkStored() } else { core.recordBaseline() }
        return MessageStream(doorbell: doorbell, reader: MessageStreamReader(core: core))
    }

    /// A listener of `identifier` (nil: every identifier): its reader (``ListenerCore``, on
    /// `delivery`), active when this returns.
    private func start<Message: Decodable & Sendable>(
        only identifier: MessageIdentifier?, on delivery: DeliveryQueue, options: ListenOptions,
        handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> Subscription {
        let core = ListenerCore<Message>(
            transiting: transiting, prefix: notificationPrefix, only: identifier, options: options,
            sink: .handler(delivery.makeExecutor(label: "wormhole.listener"), handler))
        let listener = makeSubscriber(core, only: core.only, options: options)
        try wakeups.start([listener])
        let handle = Subscription(core: core) { listener.detach() }
        if options.deliversStoredMessageOnStart { core.checkStored() } else { core.recordBaseline() }
        return handle
    }

    /// A listener's wake-ups for the ``WakeEngine``: its posts and transient messages on the bus;
    /// the wormhole directory without a bus, and beside the bus for the messages whose sender
    /// died before its signal (``ListenOptions/catchesWritesWithoutSignal``).
    private func makeSubscriber<Message>(
        _ core: ListenerCore<Message>, only: MessageIdentifier?, options: ListenOptions
    ) -> WakeSubscriber {
        var wakes = WakeSubscriber.Wakes(
            posted: { core.notified($0) }, transient: { core.received($0) }, files: { core.filesChanged($0) },
            catchUp: { core.catchUp() })
        if core.catchesWritesWithoutSignal { wakes.filesBesideBus = { core.filesChangedOnBus($0) } }
        return WakeSubscriber(
            target: only.map(notificationName(for:)) ?? notificationPrefix, isPrefix: only == nil,
            watchTarget: files.map(WatchTarget.mailboxes), fallsBack: options.wakesThroughDirectoryWithoutBus,
            wakes: wakes)
    }
}

/// What a listener's ``WakeSubscriber`` and its handle need of its core, whatever the message type.
protocol ListenerControl: SubscriptionCore {
    /// Delivers what is stored now, as ``MessageDelivery/Reason/stored`` deliveries.
    func checkStored()
    /// A post on the bus (on the I/O thread).
    func notified(_ note: DarwinNotification)
    /// A transient message on the bus (on the I/O thread).
    func received(_ signal: TransientSignal)
    /// Entries of the wormhole directory the directory watch saw change.
    func filesChanged(_ names: [String])
    /// Entries of the wormhole directory the watch kept beside the bus saw change.
    func filesChangedOnBus(_ names: [String])
    /// Whether the wormhole directory is watched beside the bus too.
    var catchesWritesWithoutSignal: Bool { get }
    /// Compare every mailbox with what was last delivered.
    func catchUp()
}

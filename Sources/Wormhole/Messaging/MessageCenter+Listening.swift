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

        /// Creates options.
        public init(deliversStoredMessageOnStart: Bool = false, deliversEveryPost: Bool = false, transientBufferLimit: Int = 1024) {
            self.deliversStoredMessageOnStart = deliversStoredMessageOnStart
            self.deliversEveryPost = deliversEveryPost
            self.transientBufferLimit = transientBufferLimit
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
    ) throws -> MessageListener {
        let core = ListenerCore<Message>(
            transiting: transiting, prefix: notificationPrefix, only: identifier, options: options,
            sink: .handler(delivery.makeExecutor(label: "wormhole.listener"), handler))
        return try start(core, options: options)
    }

    /// Listens to an identifier given as a string (checked before anything else happens).
    public func listen<Message: Decodable & Sendable>(
        identifier: String, as type: Message.Type = Message.self, on delivery: DeliveryQueue = .serial,
        options: ListenOptions = ListenOptions(), handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> MessageListener {
        try listen(identifier: MessageIdentifier(identifier), as: type, on: delivery, options: options, handler: handler)
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
    ) throws -> [MessageListener] {
        // One executor for all: the handler's calls never overlap.
        let executor = delivery.makeExecutor(label: "wormhole.listener")
        let cores = identifiers.map { identifier in
            ListenerCore<Message>(
                transiting: transiting, prefix: notificationPrefix, only: identifier, options: options,
                sink: .handler(executor, handler))
        }
        let center = try notificationCenter()
        let observers = try center.addObservers(
            cores.map { core in (notificationName(for: core.only!), { core.notified($0) }) }, on: .ioThread)
        let listeners = zip(cores, observers).map { MessageListener(core: $0, observer: $1) }
        // The transient messages' rules, batched the same way (a second round trip, not 10,000).
        do {
            let routes = try center.addMessageRoutes(
                cores.map { core in (notificationName(for: core.only!), { core.received($0) }) })
            for (listener, route) in zip(listeners, routes) {
                listener.attachTransientRoute { center.removeMessageRoute(route) }
            }
        } catch {
            for listener in listeners { listener.cancel() }
            throw error
        }
        for core in cores {
            if options.deliversStoredMessageOnStart { core.checkStored() } else { core.recordBaseline() }
        }
        return listeners
    }

    /// Listens to many identifiers given as strings (all checked before anything else happens).
    public func listen<Message: Decodable & Sendable>(
        identifiers: [String], as type: Message.Type = Message.self, on delivery: DeliveryQueue = .serial,
        options: ListenOptions = ListenOptions(), handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> [MessageListener] {
        try listen(
            identifiers: identifiers.map(MessageIdentifier.init), as: type, on: delivery, options: options, handler: handler)
    }

    /// Calls `handler` for every identifier of this wormhole (one prefix rule on the bus for
    /// `<group>/<directory>/`), each delivery naming its identifier. Names below the prefix that
    /// are not an identifier (such as a journal's `<group>/<directory>/I/journal`) are ignored.
    public func listenToAllMessages<Message: Decodable & Sendable>(
        as type: Message.Type = Message.self, on delivery: DeliveryQueue = .serial,
        options: ListenOptions = ListenOptions(), handler: @escaping @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> MessageListener {
        let core = ListenerCore<Message>(
            transiting: transiting, prefix: notificationPrefix, only: nil, options: options,
            sink: .handler(delivery.makeExecutor(label: "wormhole.listener"), handler))
        return try start(core, options: options)
    }

    /// The deliveries for `identifier` as an `AsyncSequence`; the listener is active when this
    /// returns and goes away when the iteration ends, its task is cancelled, or the stream is
    /// released. The file is read in the iterator's `next()`.
    public func messages<Message: Decodable & Sendable>(
        identifier: MessageIdentifier, as type: Message.Type = Message.self, options: ListenOptions = ListenOptions()
    ) async throws -> MessageStream<Message> {
        try await stream(only: identifier, options: options)
    }

    /// The deliveries for an identifier given as a string, as an `AsyncSequence`.
    public func messages<Message: Decodable & Sendable>(
        identifier: String, as type: Message.Type = Message.self, options: ListenOptions = ListenOptions()
    ) async throws -> MessageStream<Message> {
        try await stream(only: MessageIdentifier(identifier), options: options)
    }

    /// The deliveries for every identifier of this wormhole as an `AsyncSequence`.
    public func allMessages<Message: Decodable & Sendable>(
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
        let center = try notificationCenter()
        let target = identifier.map(notificationName(for:)) ?? notificationPrefix
        let observer = try await center.addObserver(
            target, isPrefix: identifier == nil, on: .ioThread, handler: { core.notified($0) },
            finish: { continuation.finish() })
        let listener = MessageListener(core: core, observer: observer)
        do {
            let route = try await center.addMessageRoute(target, isPrefix: identifier == nil) { core.received($0) }
            listener.attachTransientRoute { center.removeMessageRoute(route) }
        } catch {
            listener.cancel()
            throw error
        }
        continuation.onTermination = { _ in listener.cancel() }
        if options.deliversStoredMessageOnStart { core.checkStored() } else { core.recordBaseline() }
        return MessageStream(doorbell: doorbell, core: core)
    }

    private func start<Message>(_ core: ListenerCore<Message>, options: ListenOptions) throws -> MessageListener {
        let center = try notificationCenter()
        let handler: @Sendable (DarwinNotification) -> Void = { core.notified($0) }
        let observer =
            if let only = core.only {
                try center.addObserver(for: notificationName(for: only), on: .ioThread, handler: handler)
            } else {
                try center.addObserver(forPrefix: notificationPrefix, on: .ioThread, handler: handler)
            }
        let listener = MessageListener(core: core, observer: observer)
        do {
            let target = core.only.map(notificationName(for:)) ?? notificationPrefix
            let route = try center.addMessageRoute(target, isPrefix: core.only == nil) { core.received($0) }
            listener.attachTransientRoute { center.removeMessageRoute(route) }
        } catch {
            listener.cancel()
            throw error
        }
        if options.deliversStoredMessageOnStart { core.checkStored() } else { core.recordBaseline() }
        return listener
    }
}

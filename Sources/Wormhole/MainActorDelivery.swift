import Dispatch
import WormholeDBus

/// Delivery on the main actor, for UI code: pass `on: .mainActor` to a listener or an observer,
/// and its handler is `@MainActor`, so it may update views and other main-actor state directly.
///
/// ```swift
/// @MainActor final class CounterModel {
///     var label = "no press yet"
///     var listener: MessageListener?
///
///     func start(_ wormhole: MessageCenter) throws {
///         listener = try wormhole.listen(identifier: "button", as: Button.self, on: .mainActor) { delivery in
///             if case .success(let button) = delivery.result { self.label = "pressed \(button.buttonNumber)" }
///         }
///     }
/// }
/// ```
///
/// Handlers run on the main dispatch queue, which is the main actor's executor, in the order
/// of delivery, never two at once (as with `DeliveryQueue.queue(.main)`): the main queue must
/// be running (an app's main loop, `dispatchMain()`, or an `async` main). Where you can
/// iterate, an `AsyncSequence` consumed in a `@MainActor` task (`messages(identifier:as:)`,
/// `notifications(name:)`, `changes(forKey:)`) is the first choice; this is for code that
/// registers callbacks.
public enum MainActorDelivery: Sendable {
    /// On the main actor; the handler is `@MainActor`.
    case mainActor

    /// Where the wrapped handler runs: the main queue, the main actor's executor.
    var queue: DeliveryQueue { .queue(.main) }

    /// A `@Sendable` handler for the callback APIs that calls `handler` on the main actor. It is
    /// only ever run on the main queue (``queue``), so the isolation it assumes holds.
    func wrap<Value: Sendable>(
        _ handler: @escaping @MainActor @Sendable (Value) -> Void
    ) -> @Sendable (Value) -> Void {
        { value in MainActor.assumeIsolated { handler(value) } }
    }
}

extension MessageCenter {
    /// Calls `handler` on the main actor with each delivery for `identifier` (`on: .mainActor`),
    /// for UI code; otherwise as `listen(identifier:as:on:options:handler:)` with a `DeliveryQueue`.
    public func listen<Message: Decodable & Sendable>(
        identifier: MessageIdentifier, as type: Message.Type = Message.self, on delivery: MainActorDelivery,
        options: ListenOptions = ListenOptions(), handler: @escaping @MainActor @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> MessageListener {
        try listen(identifier: identifier, as: type, on: delivery.queue, options: options, handler: delivery.wrap(handler))
    }

    /// Listens to many identifiers at once, with a `@MainActor` handler (`on: .mainActor`).
    public func listen<Message: Decodable & Sendable>(
        identifiers: [MessageIdentifier], as type: Message.Type = Message.self, on delivery: MainActorDelivery,
        options: ListenOptions = ListenOptions(), handler: @escaping @MainActor @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> [MessageListener] {
        try listen(identifiers: identifiers, as: type, on: delivery.queue, options: options, handler: delivery.wrap(handler))
    }

    /// Listens to every identifier of this wormhole, with a `@MainActor` handler (`on: .mainActor`).
    public func listen<Message: Decodable & Sendable>(
        as type: Message.Type = Message.self, on delivery: MainActorDelivery, options: ListenOptions = ListenOptions(),
        handler: @escaping @MainActor @Sendable (MessageDelivery<Message>) -> Void
    ) throws -> MessageListener {
        try listen(as: type, on: delivery.queue, options: options, handler: delivery.wrap(handler))
    }
}

extension DarwinNotificationCenter {
    /// Observes `name` with a `@MainActor` handler (`on: .mainActor`), for UI code.
    public func listen(
        name: NotificationName, on delivery: MainActorDelivery, options: ObserverOptions = ObserverOptions(),
        handler: @escaping @MainActor @Sendable (DarwinNotification) -> Void
    ) throws -> NotificationListener {
        try listen(name: name, on: delivery.queue, options: options, handler: delivery.wrap(handler))
    }

    /// Observes every name below `prefix` with a `@MainActor` handler (`on: .mainActor`).
    public func listen(
        prefix: NotificationName, on delivery: MainActorDelivery, options: ObserverOptions = ObserverOptions(),
        handler: @escaping @MainActor @Sendable (DarwinNotification) -> Void
    ) throws -> NotificationListener {
        try listen(prefix: prefix, on: delivery.queue, options: options, handler: delivery.wrap(handler))
    }
}

extension GroupDefaults {
    /// Observes `key` with a `@MainActor` handler (`on: .mainActor`), for UI code.
    public func listen(
        forKey key: String, on delivery: MainActorDelivery, options: ObserverOptions = ObserverOptions(),
        initial: Bool = false, handler: @escaping @MainActor @Sendable (Change) -> Void
    ) throws -> DefaultsListener {
        try listen(forKey: key, on: delivery.queue, options: options, initial: initial, handler: delivery.wrap(handler))
    }

    /// Observes every key of the suite with a `@MainActor` handler (`on: .mainActor`).
    public func listen(
        on delivery: MainActorDelivery, options: ObserverOptions = ObserverOptions(), initial: Bool = false,
        handler: @escaping @MainActor @Sendable (Change) -> Void
    ) throws -> DefaultsListener {
        try listen(on: delivery.queue, options: options, initial: initial, handler: delivery.wrap(handler))
    }
}

extension Journal {
    /// Calls `handler` for each record, on the main actor (`on: .mainActor`), for UI code.
    public func listen<Message: Decodable & Sendable>(
        from start: JournalPosition = .end, consumer: String? = nil, as type: Message.Type = Message.self,
        on delivery: MainActorDelivery,
        handler: @escaping @MainActor @Sendable (Result<JournalRecord<Message>, WormholeError>) -> Void
    ) throws -> JournalListener {
        try listen(from: start, consumer: consumer, as: type, on: delivery.queue, handler: delivery.wrap(handler))
    }
}

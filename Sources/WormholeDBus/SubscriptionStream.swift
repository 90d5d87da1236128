import WormholeSystem

/// Signals that match one rule, as an `AsyncSequence`; it owns the rule (see
/// ``BusConnection/signals(matching:bufferLimit:)``).
public typealias SignalStream = SubscriptionStream<Signal>

/// An `AsyncSequence` that owns a subscription: signals, notifications or messages.
///
/// The subscription is active when the call that made the stream returns, and goes away when
/// the iteration ends, when the iterating task is cancelled, or when the stream is dropped.
/// The buffer is bounded; a slow consumer loses the oldest undelivered elements, never
/// stalls the producer.
public struct SubscriptionStream<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = Never

    private let stream: AsyncStream<Element>

    /// Wraps a stream whose `onTermination` releases the subscription.
    package init(_ stream: AsyncStream<Element>) { self.stream = stream }

    /// Iterates the elements; the subscription goes when the iteration ends.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Element>.AsyncIterator

        /// The next element, or `nil` when the stream ended (subscription closed, task cancelled).
        public mutating func next() async -> Element? { await base.next() }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await base.next(isolation: actor)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator()) }
}

/// An iterator belongs to the task that iterates; it is not shared between tasks.
@available(*, unavailable)
extension SubscriptionStream.AsyncIterator: Sendable {}

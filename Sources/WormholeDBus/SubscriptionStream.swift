// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// Signals that match one rule, as an `AsyncSequence`; it owns the rule (see
/// ``BusConnection/signals(matching:bufferLimit:)``).
public typealias SignalStream = SubscriptionStream<Signal, Never>

/// What a stream that reads where it is iterated takes its elements from: the stream waits for
/// its doorbell, then asks for what is ready.
package protocol StreamReader<Element, Failure>: AnyObject, Sendable {
    associatedtype Element: Sendable
    associatedtype Failure: Error
    /// The next element ready now (read now: a slow consumer reads the latest), or `nil` when
    /// none is, and the stream waits for its doorbell.
    func nextReady() throws(Failure) -> Element?
}

/// The one stream type of every subscription, as an `AsyncSequence`: signals, notifications,
/// messages, journal records, defaults changes.
///
/// The subscription is active when the call that made the stream returns, and goes away when
/// the iteration ends, when the iterating task is cancelled, or when the stream is dropped.
/// What waits for the consumer is bounded, and a slow consumer never stalls the producer: a
/// stream of posts or changes keeps the newest, one of messages or records reads them from their
/// files in `next()`. `Failure` is `Never` but for a journal's records, whose iteration throws
/// what it met (gaps, damage, records that do not decode); iterating again goes on after it.
public struct SubscriptionStream<Element: Sendable, Failure: Error>: AsyncSequence, Sendable {
    fileprivate enum Source: Sendable {
        /// Elements pushed as they come, buffered (the newest kept).
        case pushed(AsyncStream<Element>)
        /// Elements read in `next()` once the doorbell rang.
        case read(doorbell: AsyncStream<Void>, reader: any StreamReader<Element, Failure>)
    }

    fileprivate let source: Source

    /// Wraps a stream whose `onTermination` releases the subscription.
    package init(_ stream: AsyncStream<Element>) where Failure == Never { source = .pushed(stream) }

    /// A stream that reads from `reader` each time `doorbell` rings (whose `onTermination`
    /// releases the subscription).
    package init(doorbell: AsyncStream<Void>, reader: any StreamReader<Element, Failure>) {
        source = .read(doorbell: doorbell, reader: reader)
    }

    /// Iterates the elements; the subscription goes when the iteration ends.
    public struct AsyncIterator: AsyncIteratorProtocol {
        private enum Base {
            case pushed(AsyncStream<Element>.AsyncIterator)
            case read(doorbell: AsyncStream<Void>.AsyncIterator, reader: any StreamReader<Element, Failure>)
        }

        private var base: Base

        fileprivate init(_ source: Source) {
            switch source {
            case .pushed(let stream): base = .pushed(stream.makeAsyncIterator())
            case .read(let doorbell, let reader): base = .read(doorbell: doorbell.makeAsyncIterator(), reader: reader)
            }
        }

        /// The next element, or `nil` when the stream ended (subscription closed, task cancelled).
        public mutating func next() async throws(Failure) -> Element? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Failure) -> Element? {
            switch base {
            case .pushed(var iterator):
                defer { base = .pushed(iterator) }
                return await iterator.next(isolation: actor)
            case .read(var doorbell, let reader):
                defer { base = .read(doorbell: doorbell, reader: reader) }
                while true {
                    // A cancelled task reads nothing more; the doorbell then ends the stream (its
                    // `next()` in a cancelled task terminates it, which releases the subscription).
                    if !Task.isCancelled, let element = try reader.nextReady() { return element }
                    guard await doorbell.next(isolation: actor) != nil else { return nil }
                }
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source) }
}

/// An iterator belongs to the task that iterates; it is not shared between tasks.
@available(*, unavailable)
extension SubscriptionStream.AsyncIterator: Sendable {}

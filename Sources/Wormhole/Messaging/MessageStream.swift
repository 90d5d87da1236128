/// Message deliveries as an `AsyncSequence` (see `MessageCenter.messages(identifier:as:options:)`).
///
/// The listener is active when the call that made the stream returns and goes away when the
/// iteration ends, when the iterating task is cancelled, or when the stream is released. The
/// bus side only records which mailboxes are pending (coalesced per identifier, so the buffer
/// never holds more than one entry per mailbox); the iterator's `next()` reads and decodes the
/// file, so a slow consumer always reads the latest stored message. Transient messages are kept
/// each on its own, up to ``MessageCenter/ListenOptions/transientBufferLimit`` (then the oldest
/// is dropped and reported).
public struct MessageStream<Message: Decodable & Sendable>: AsyncSequence, Sendable {
    private let doorbell: AsyncStream<Void>
    private let core: ListenerCore<Message>

    init(doorbell: AsyncStream<Void>, core: ListenerCore<Message>) {
        self.doorbell = doorbell
        self.core = core
    }

    /// Iterates the deliveries; the listener goes when the iteration ends.
    public struct AsyncIterator: AsyncIteratorProtocol {
        private var doorbell: AsyncStream<Void>.AsyncIterator
        private let core: ListenerCore<Message>
        private var batch: [ListenerItem] = []
        private var index = 0

        init(doorbell: AsyncStream<Void>.AsyncIterator, core: ListenerCore<Message>) {
            self.doorbell = doorbell
            self.core = core
        }

        /// The next delivery, read from the mailbox now, or `nil` when the stream ended
        /// (listener gone, connection closed, task cancelled).
        public mutating func next() async -> MessageDelivery<Message>? {
            while true {
                // A cancelled task reads nothing more; the doorbell then ends the stream.
                if !Task.isCancelled, let delivery = takeReady() { return delivery }
                guard await doorbell.next() != nil else { return nil }
            }
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> MessageDelivery<Message>? {
            while true {
                // A cancelled task reads nothing more; the doorbell then ends the stream.
                if !Task.isCancelled, let delivery = takeReady() { return delivery }
                guard await doorbell.next(isolation: actor) != nil else { return nil }
            }
        }

        /// The next delivery that is ready without waiting, reading mailboxes as needed.
        private mutating func takeReady() -> MessageDelivery<Message>? {
            while true {
                if index < batch.count {
                    let item = batch[index]
                    index += 1
                    if let delivery = core.read(item) { return delivery }
                    continue
                }
                guard let next = core.take() else { return nil }
                batch = next
                index = 0
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(doorbell: doorbell.makeAsyncIterator(), core: core)
    }
}

/// An iterator belongs to the task that iterates; it is not shared between tasks.
@available(*, unavailable)
extension MessageStream.AsyncIterator: Sendable {}

// SPDX-License-Identifier: Apache-2.0
public import WormholeDBus
import WormholeSystem

/// Message deliveries as an `AsyncSequence` (see `MessageCenter.messages(identifier:as:options:)`).
///
/// The listener is active when the call that made the stream returns and goes away when the
/// iteration ends, when the iterating task is cancelled, or when the stream is released. The
/// bus side only records which mailboxes are pending (coalesced per identifier, so the buffer
/// never holds more than one entry per mailbox); the iterator's `next()` reads and decodes the
/// file, so a slow consumer always reads the latest stored message. Transient messages are kept
/// each on its own, up to ``MessageCenter/ListenOptions/transientBufferLimit`` (then the oldest
/// is dropped and reported).
public typealias MessageStream<Message: Decodable & Sendable> = SubscriptionStream<MessageDelivery<Message>, Never>

/// A message stream's reader: the pending mailboxes and transient messages of its listener's
/// core, each mailbox read and decoded when the iterator asks for it.
final class MessageStreamReader<Message: Decodable & Sendable>: StreamReader {
    private let core: ListenerCore<Message>
    /// The batch taken from the core, and how far the iterator got.
    private let batch = Locked<(items: [ListenerItem], index: Int)>(([], 0))

    init(core: ListenerCore<Message>) { self.core = core }

    func nextReady() -> MessageDelivery<Message>? {
        while true {
            let item = batch.withLock { batch -> ListenerItem? in
                guard batch.index < batch.items.count else { return nil }
                defer { batch.index += 1 }
                return batch.items[batch.index]
            }
            if let item {
                if let delivery = core.read(item) { return delivery }
                continue
            }
            guard let next = core.take() else { return nil }
            batch.withLock { $0 = (next, 0) }
        }
    }
}

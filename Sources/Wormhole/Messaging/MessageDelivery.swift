// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// One delivery to a message listener: which mailbox, why, and what it holds.
public struct MessageDelivery<Message: Sendable>: Sendable {
    /// Why the listener is being called.
    public enum Reason: Sendable, Hashable {
        /// A sender stored a message (or cleared, or woke the mailbox) and posted.
        case posted
        /// The message that was already stored when the listener started
        /// (``MessageCenter/ListenOptions/deliversStoredMessageOnStart``).
        case stored
        /// The bus connection came back after an outage and the stored message differs from
        /// the last one delivered: it changed while the listener was cut off.
        case catchUp
        /// A transient message (`passTransientMessage(_:identifier:)`):
        /// carried in the notification, never stored; the mailbox was not read. A failure with
        /// ``WormholeError/Code/transientDropped`` reports a transient message that was dropped.
        case transient
    }

    /// The mailbox.
    public var identifier: MessageIdentifier
    /// The decoded message, or why there is none: ``WormholeError/Code/noMessage`` when the
    /// mailbox is empty (cleared), ``WormholeError/Code/decodingFailed`` for a document that does
    /// not decode, ``WormholeError/Code/unsafePath`` or ``WormholeError/Code/io`` when it cannot be read.
    public var result: Result<Message, WormholeError>
    /// Why the listener is being called.
    public var reason: Reason
    /// When the sender wrote the message this delivery answers, in nanoseconds since 1970
    /// (`CLOCK_REALTIME`; the ``MessageCenter/SendReport/sentAt`` of its send), so
    /// `now - sentAt` is the message's latency. `nil` for ``Reason/stored``,
    /// ``Reason/catchUp`` and ``Reason/transient`` deliveries and for `dbus-send` triggers,
    /// which carry no time.
    public var sentAt: UInt64?

    /// Creates a delivery (for tests and adapters).
    package init(
        identifier: MessageIdentifier, result: Result<Message, WormholeError>, reason: Reason, sentAt: UInt64? = nil
    ) {
        self.identifier = identifier
        self.result = result
        self.reason = reason
        self.sentAt = sentAt
    }
}

extension MessageDelivery.Reason {
    /// The public reason of what a listener had pending.
    init(_ reason: ListenerReason) {
        switch reason {
        case .posted: self = .posted
        case .stored: self = .stored
        case .catchUp: self = .catchUp
        case .transient: self = .transient
        }
    }
}

extension MessageDelivery where Message: Decodable {
    /// The delivery of a transient message: decoded from its payload, with no file read and no
    /// change to what the listener knows of the mailbox.
    init(transient item: ListenerItem, payload: Result<Data, WormholeError>) {
        let result: Result<Message, WormholeError>
        switch payload {
        case .failure(let error): result = .failure(error)
        case .success(let data):
            if Message.self == JSONDocument.self {
                // Checked to be one JSON text when it was received.
                result = .success(JSONDocument(validated: data) as! Message)
            } else {
                do {
                    result = .success(try MessageCenter.decode(data, as: Message.self, identifier: item.identifier))
                } catch {
                    result = .failure(error)
                }
            }
        }
        self.init(identifier: item.identifier, result: result, reason: .transient, sentAt: nil)
    }
}

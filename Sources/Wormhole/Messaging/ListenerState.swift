// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import WormholeDBus

/// Why a mailbox or message is pending: ``MessageDelivery/Reason`` without its generic
/// parameter, so the bookkeeping of ``ListenerCore`` uses no generic types (in unspecialised
/// generic code every use of a type nested in a generic one costs a metadata lookup).
enum ListenerReason: Sendable, Hashable {
    case posted, stored, catchUp, transient
}

/// One pending mailbox, or one transient message (its payload, or why it was dropped).
struct ListenerItem: Sendable {
    var identifier: MessageIdentifier
    var reason: ListenerReason
    var sentAt: UInt64?
    /// A transient message's JSON (checked on receipt), or why it is not delivered; `nil`
    /// for a mailbox, which is read from its file.
    var payload: Result<Data, WormholeError>? = nil
}

/// One place in the delivery order: a mailbox (once, however many posts) or a transient message.
enum ListenerEntry {
    case mailbox(MessageIdentifier)
    case transient(ListenerItem)

    var isTransient: Bool {
        if case .transient = self { return true }
        return false
    }
}

/// What a listener's reader keeps (whether it is suspended or cancelled is its pump's).
struct ListenerState {
    /// A catch-up was asked for: the reader lists the mailboxes (disk work, not on the bus side).
    var catchUp = false
    var pending: [MessageIdentifier: (reason: ListenerReason, sentAt: UInt64?)] = [:]
    var order: [ListenerEntry] = []
    /// How many entries of `order` are transient messages (bounded by `transientLimit`).
    var transientCount = 0
    /// Transient messages dropped because the buffer was full, per identifier, in the order
    /// first dropped: reported as failed deliveries ahead of the next batch.
    var dropped: [(identifier: MessageIdentifier, count: Int)] = []
    /// What each mailbox held when last delivered (or when the listener started), as a
    /// fingerprint: the catch-up compares against it without keeping every message in memory.
    var lastDelivered: [MessageIdentifier: Fingerprint] = [:]
    /// What each mailbox held when last actually delivered (not the start-up baseline): a
    /// post that finds the same file is a duplicate of that delivery.
    var delivered: [MessageIdentifier: Fingerprint] = [:]
    /// Mailboxes the directory watch saw replaced while on the bus, with no post seen for them
    /// yet: when the post does not come within ``ListenerCore/orphanGrace`` (a sender that died
    /// between its write and its signal), they are compared with what was last delivered.
    var orphans: [MessageIdentifier: UInt64] = [:]
    /// When each mailbox's last post arrived (monotonic ns), to tell a rename its post already
    /// accounted for (the two are read in the same loop iteration, in either order).
    var postedAt: [MessageIdentifier: UInt64] = [:]
    /// An orphan check is scheduled.
    var orphanCheckScheduled = false

    var hasWork: Bool { catchUp || !order.isEmpty || !dropped.isEmpty }
}

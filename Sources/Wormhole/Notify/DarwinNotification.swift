// SPDX-License-Identifier: Apache-2.0
/// One notification as an observer receives it.
public struct DarwinNotification: Sendable, Hashable, CustomStringConvertible {
    /// Why the observer is being called.
    public enum Reason: Sendable, Hashable {
        /// Somebody posted the name.
        case posted
        /// The connection to the bus was lost and is back: posts made in between were missed.
        /// Delivered once per observer after each reconnect, like `notify_resume` after a
        /// suspension; re-read whatever the notification guards.
        case catchUp
    }

    /// The posted name (for ``Reason/catchUp``, the observed name or prefix).
    public var name: NotificationName
    /// The state the post carried, or `nil` when it carried none (a hand-typed `dbus-send`).
    /// Any integer type is accepted (`t` from Wormhole; `i`, `x`, `u`, `q`, `n` or `y` from other
    /// senders); a negative or non-integer state is `nil` (logged at debug level).
    public var state: UInt64?
    /// Why the observer is being called.
    public var reason: Reason
    /// How many posts this delivery stands for: more than 1 when posts arrived while the
    /// observer was suspended and were coalesced into this one delivery (the latest).
    public var coalescedCount: Int
    /// Whether this process posted it (through any ``DarwinNotificationCenter``).
    public var isOwnPost: Bool

    /// Creates a notification, as an observer would receive it (for tests and adapters).
    package init(
        name: NotificationName, state: UInt64? = nil, reason: Reason = .posted, coalescedCount: Int = 1,
        isOwnPost: Bool = false
    ) {
        self.name = name
        self.state = state
        self.reason = reason
        self.coalescedCount = coalescedCount
        self.isOwnPost = isOwnPost
    }

    public var description: String {
        "\(reason == .catchUp ? "catch-up for" : "posted") \(name) state \(state.map(String.init) ?? "none")"
            + (coalescedCount > 1 ? " (\(coalescedCount) coalesced)" : "")
    }
}

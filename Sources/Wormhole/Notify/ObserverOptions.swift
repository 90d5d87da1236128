// SPDX-License-Identifier: Apache-2.0
/// How an observer behaves.
public struct ObserverOptions: Sendable, Hashable {
    /// Skip notifications this process posted itself. Darwin always delivers them; so do we by default.
    public var ignoresOwnPosts: Bool
    /// For streams: how many undelivered notifications are kept; past that the oldest is dropped
    /// (notifications carry no payload, so the newest one is what matters).
    public var bufferLimit: Int

    /// Creates options.
    public init(ignoresOwnPosts: Bool = false, bufferLimit: Int = 256) {
        self.ignoresOwnPosts = ignoresOwnPosts
        self.bufferLimit = bufferLimit
    }
}

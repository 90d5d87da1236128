// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

extension MessageCenter {
    // MARK: Transient messages (contract §7)

    /// The largest transient message: 65,536 bytes (64 KiB) of compact JSON.
    public static let transientMessageLimit = NotifyContract.transientMessageLimit

    /// Sends `message` to the listeners of `identifier` that are running now, in the
    /// notification itself; nothing is stored (like WatchConnectivity's `sendMessage`, for
    /// high-rate or ephemeral data that should not touch the disk).
    ///
    /// The message travels as one compact JSON document in a `Message` signal with the
    /// identifier's notification name (contract §7). Listeners receive it through the same
    /// `listen(identifier:as:on:options:handler:)` or `messages(identifier:as:options:)`,
    /// as a ``MessageDelivery/Reason/transient`` delivery; every transient message is delivered
    /// on its own (none are coalesced), in the order sent. A listener that is not running
    /// never sees it, and the stored message (if any) is left as it is.
    ///
    /// - Throws: ``WormholeError/Code/transientTooLarge`` when the JSON is over
    ///   `transientMessageLimit` (nothing is sent); ``WormholeError/Code/encodingFailed`` when
    ///   it does not encode; a `BusError` when the bus cannot be reached: unlike
    ///   `passMessage(_:identifier:)`, nothing is kept to deliver later. `BusError` with
    ///   `queueFull` when the message was refused: a receiver that stopped reading holds up
    ///   the transient connection and its bounded queue is full (the call waits at most one
    ///   second for room); nothing was sent, and `refusedTransientMessages` counts it.
    ///
    /// Transient messages travel on the process's second connection to the bus, so a stopped
    /// receiver cannot hold up the process's other notifications (the reliability guide in docs/reliability.md).
    public func passTransientMessage(_ message: some Encodable, identifier: MessageIdentifier) throws {
        if message is Data { throw Self.refuseData(identifier.rawValue) }
        // JSONEncoder's output is one compact JSON document.
        try sendTransient(try Self.encode(message, identifier: identifier), identifier: identifier)
    }

    /// How many transient messages this process refused (`passTransientMessage(_:identifier:)`
    /// threw `queueFull`): nothing of them was sent.
    package var refusedTransientMessages: UInt64 { centers.existing()?.transient.refusedMessages ?? 0 }

    /// Sends a JSON document as a transient message: its `JSONDocument.compactText` (white
    /// space outside strings removed), which must be at most `transientMessageLimit` bytes.
    public func passTransientMessage(_ document: JSONDocument, identifier: MessageIdentifier) throws {
        var compact: [UInt8] = []
        compact.reserveCapacity(document.data.count)
        document.appendCompact(to: &compact)
        try sendTransient(compact, identifier: identifier)
    }

    /// Checks the size, then emits `Message(name, payload)`. The bytes are one JSON text
    /// (encoded, or checked by ``JSONDocument``), so valid UTF-8 without NUL.
    private func sendTransient(_ bytes: some Collection<UInt8>, identifier: MessageIdentifier) throws {
        let size = bytes.count
        if size > Self.transientMessageLimit {
            throw WormholeError(
                .transientTooLarge, value: identifier.rawValue,
                "transient message for '\(identifier)' is \(size) bytes of compact JSON; the limit is "
                    + "\(Self.transientMessageLimit) bytes (64 KiB): send it with passMessage, which stores it")
        }
        let payload = String(decoding: bytes, as: UTF8.self)
        try notificationCenter().emitMessage(notificationName(for: identifier), payload: payload)
    }
}

// SPDX-License-Identifier: Apache-2.0
/// The message a ping or pong carries: a sequence number and padding up to the row's size.
struct BenchPayload: Codable, Sendable {
    var seq: UInt64
    var pad: String

    /// Padding that makes the encoded payload about `size` bytes.
    static func pad(size: Int) -> String { String(repeating: "x", count: max(0, size - 22)) }
}

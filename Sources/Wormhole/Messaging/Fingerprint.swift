import FoundationEssentials

/// A message's length and a 64-bit FNV-1a hash over its 8-byte words: enough to tell whether a
/// mailbox changed.
struct Fingerprint: Hashable, Sendable {
    let count: Int
    let hash: UInt64

    init(_ data: Data) {
        count = data.count
        hash = data.withUnsafeBytes(Self.hash)
    }

    /// FNV-1a over 8-byte words (then the last bytes one by one): each step is a bijection, so
    /// two documents that differ in one word never collide. A word at a time through the raw
    /// bytes, not a byte at a time through `Data`'s iterator, which took more of a 1 MB
    /// delivery than the JSON decoder (`wormholectl bench --suite message`). Kept in memory only.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let prime: UInt64 = 0x0000_0100_0000_01b3
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let words = bytes.count / 8
        for index in 0..<words {
            hash = (hash ^ bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)) &* prime
        }
        for index in (words * 8)..<bytes.count {
            hash = (hash ^ UInt64(bytes[index])) &* prime
        }
        return hash
    }
}

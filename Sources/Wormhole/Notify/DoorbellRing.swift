// SPDX-License-Identifier: Apache-2.0
import WormholeDBus
import WormholeSystem

/// One ring as it travels (contract §9): magic `WDB2`, then (little-endian) bus hash u64,
/// serial u32, previous serial u32, flags u8 (bit 0: the previous serial is known), state u64,
/// sender length u8, name length u16, sender bytes, name bytes.
struct DoorbellRing: Sendable, Equatable {
    static let magic: [UInt8] = Array("WDB2".utf8)
    static let headerLength = 4 + 8 + 4 + 4 + 1 + 8 + 1 + 2

    /// The bus's hash (``DoorbellHash/busKey(of:)``).
    var busKey: UInt64
    /// The post's serial (its signal's header serial, high bit set).
    var serial: UInt32
    /// The serial of the sender's previous post of `name` on its connection: 0 when it made
    /// none, nil when it does not know.
    var previous: UInt32?
    /// The name's state after the post.
    var state: UInt64
    /// The poster's unique bus name.
    var sender: String
    /// The notification name posted.
    var name: String

    /// The datagram of this
    func encoded() -> [UInt8] {
        var bytes = Self.magic
        bytes.reserveCapacity(Self.headerLength + sender.utf8.count + name.utf8.count)
        func put<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }
        put(busKey)
        put(serial)
        put(previous ?? 0)
        put(UInt8(previous == nil ? 0 : 1))
        put(state)
        put(UInt8(sender.utf8.count))
        put(UInt16(name.utf8.count))
        bytes.append(contentsOf: sender.utf8)
        bytes.append(contentsOf: name.utf8)
        return bytes
    }
}

extension DoorbellRing {
    /// The ring in `bytes`, or nil for anything else: another magic (another version of the
    /// datagram), another length, a serial without the high bit, unknown flags, an empty name or
    /// invalid UTF-8.
    init?(decoding bytes: [UInt8]) {
        guard bytes.count >= Self.headerLength, bytes[0..<4].elementsEqual(Self.magic) else { return nil }
        func get<T: FixedWidthInteger>(_ offset: Int, as: T.Type) -> T {
            var value: T = 0
            for index in 0..<MemoryLayout<T>.size { value |= T(bytes[offset + index]) << (8 * index) }
            return value
        }
        let flags = bytes[20]
        let senderLength = Int(bytes[29])
        let nameLength = Int(get(30, as: UInt16.self))
        guard bytes.count == Self.headerLength + senderLength + nameLength, nameLength > 0, flags & ~1 == 0 else {
            return nil
        }
        let serial = get(12, as: UInt32.self)
        let previous = get(16, as: UInt32.self)
        guard serial & DoorbellSocket.serialMark != 0, previous == 0 || previous & DoorbellSocket.serialMark != 0 else {
            return nil
        }
        guard
            let sender = String(validating: bytes[Self.headerLength..<Self.headerLength + senderLength], as: UTF8.self),
            let name = String(validating: bytes[(Self.headerLength + senderLength)...], as: UTF8.self)
        else { return nil }
        self.init(
            busKey: get(4, as: UInt64.self), serial: serial, previous: flags & 1 == 0 ? nil : previous,
            state: get(21, as: UInt64.self), sender: sender, name: name)
    }
}

/// The doorbell's hashes (contract §9): the bus's (FNV-1a-64 of its address's sharing key), and
/// each registration directory's `n<H>` (FNV-1a-64 over the bus's hash, 8 bytes little-endian,
/// one kind byte, `n` for a name or `p` for a prefix ending in `/`, and the name's UTF-8 bytes).
enum DoorbellHash {
    /// The bus's hash: FNV-1a-64 of its sharing key.
    static func busKey(of address: BusAddress) -> UInt64 { NotifyContract.fnv1a64(address.sharingKey.utf8) }

    private static let fnvPrime: UInt64 = 0x0000_0100_0000_01b3

    private static func start(_ busKey: UInt64, kind: UInt8) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for shift in stride(from: 0, to: 64, by: 8) {
            hash ^= (busKey >> UInt64(shift)) & 0xFF
            hash = hash &* fnvPrime
        }
        hash ^= UInt64(kind)
        return hash &* fnvPrime
    }

    /// The directory hash of an observed name (`isPrefix` false) or prefix.
    static func directoryHash(busKey: UInt64, target: String, isPrefix: Bool) -> UInt64 {
        var hash = start(busKey, kind: isPrefix ? UInt8(ascii: "p") : UInt8(ascii: "n"))
        for byte in target.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* fnvPrime
        }
        return hash
    }

    /// The directories a post of `name` rings: the name's, then each prefix's (every leading
    /// part that ends in `/`, the whole name included when it ends so), in one pass.
    static func directoryHashes(busKey: UInt64, name: String, into hashes: inout [UInt64]) {
        hashes.append(directoryHash(busKey: busKey, target: name, isPrefix: false))
        var hash = start(busKey, kind: UInt8(ascii: "p"))
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* fnvPrime
            if byte == UInt8(ascii: "/") { hashes.append(hash) }
        }
    }
}

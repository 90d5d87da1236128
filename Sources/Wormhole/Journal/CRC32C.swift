// SPDX-License-Identifier: Apache-2.0
/// CRC-32C (Castagnoli): polynomial 0x1EDC6F41, reflected (0x82F63B78), initial value and final
/// XOR 0xFFFFFFFF, as in iSCSI (RFC 3720 §B.4), ext4 and SCTP. Test vector: the nine bytes
/// `123456789` give 0xE3069283.
///
/// Computed with a slicing-by-8 table built once (8 × 256 entries), about 1 byte per cycle.
enum CRC32C {
    /// The eight 256-entry tables of the slicing-by-8 method; table 0 is the classic byte table.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[byte] = crc
        }
        for byte in 0..<256 {
            var crc = tables[byte]
            for slice in 1..<8 {
                crc = (crc >> 8) ^ tables[Int(crc & 0xFF)]
                tables[slice * 256 + byte] = crc
            }
        }
        return tables
    }()

    /// The CRC-32C of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        ~update(0xFFFF_FFFF, bytes)
    }

    /// The CRC-32C of `bytes`.
    static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var array = Array(bytes)
        return array.withUnsafeMutableBytes { checksum(UnsafeRawBufferPointer($0)) }
    }

    /// Runs the register `crc` (not inverted) over `bytes`.
    private static func update(_ start: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = start
        var index = 0
        let count = bytes.count
        tables.withUnsafeBufferPointer { table in
            while count - index >= 8 {
                let low = crc ^ bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self).littleEndian
                let high = bytes.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self).littleEndian
                crc =
                    table[7 * 256 + Int(low & 0xFF)] ^ table[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ table[5 * 256 + Int((low >> 16) & 0xFF)] ^ table[4 * 256 + Int(low >> 24)]
                    ^ table[3 * 256 + Int(high & 0xFF)] ^ table[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ table[1 * 256 + Int((high >> 16) & 0xFF)] ^ table[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = (crc >> 8) ^ table[Int((crc ^ UInt32(bytes[index])) & 0xFF)]
                index += 1
            }
        }
        return crc
    }
}

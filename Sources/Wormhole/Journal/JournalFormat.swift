// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The journal's byte format (docs/journal-format.md is the reference for other programs).
///
/// A journal is a directory of segments, `<first sequence, 20 decimal digits>.seg`. A segment
/// is a 16-byte header followed by frames:
///
/// | bytes | header field |
/// | --- | --- |
/// | 0..<4 | magic `WHJL` |
/// | 4 | format version, 1 |
/// | 5..<8 | zero |
/// | 8..<16 | sequence number of the segment's first record, little-endian |
///
/// | bytes | frame field |
/// | --- | --- |
/// | 0..<4 | payload length L, little-endian (`0xFFFFFFFF`: a seal, L = 0) |
/// | 4..<12 | sequence number, little-endian |
/// | 12..<20 | append time, nanoseconds since 1970, little-endian |
/// | 20..<20+L | payload: one JSON document, UTF-8 |
/// | 20+L..<24+L | CRC-32C of bytes 0..<20+L, little-endian |
///
/// A seal ends a segment: its sequence is the first sequence of the next segment.
enum JournalFormat {
    static let magic: [UInt8] = Array("WHJL".utf8)
    static let version: UInt8 = 1
    static let headerSize = 16
    static let frameHeadSize = 20
    static let frameOverhead = 24
    static let sealLength: UInt32 = 0xFFFF_FFFF
    static let segmentSuffix = ".seg"
    static let appendLockName = "append.lock"
    static let syncLockName = "sync.lock"
    static let cursorSuffix = ".cursor"
    static let consumerLockSuffix = ".consumer.lock"
    /// The largest sequence number a record can carry, 2^64 − 2: the number after it (the next
    /// record's, a seal's, a cursor's next) must still fit. Only a crafted file comes near it.
    static let maximumSequence = UInt64.max - 1

    /// The file name of the segment whose first record is `sequence`.
    static func segmentName(_ sequence: UInt64) -> String {
        let digits = String(sequence)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + segmentSuffix
    }

    /// The first sequence of a segment named `name`, or nil when it is not a segment's name
    /// (sequence numbers start at 1: `00000000000000000000.seg` is not one).
    static func segmentSequence(_ name: String) -> UInt64? {
        guard name.utf8.count == 24, name.hasSuffix(segmentSuffix) else { return nil }
        let digits = name.utf8.prefix(20)
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let first = UInt64(String(decoding: digits, as: UTF8.self)), first >= 1
        else { return nil }
        return first
    }

    /// The header of a segment starting at `first`.
    static func header(first: UInt64) -> [UInt8] {
        var bytes = magic + [version, 0, 0, 0]
        appendLittleEndian(first, to: &bytes)
        return bytes
    }

    /// Appends the frame of one record (or a seal, when `payload` is nil) to `bytes`.
    static func appendFrame(sequence: UInt64, time: UInt64, payload: Data?, to bytes: inout [UInt8]) {
        let start = bytes.count
        appendLittleEndian(payload.map { UInt32($0.count) } ?? sealLength, to: &bytes)
        appendLittleEndian(sequence, to: &bytes)
        appendLittleEndian(time, to: &bytes)
        if let payload { bytes.append(contentsOf: payload) }
        let crc = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        appendLittleEndian(crc, to: &bytes)
    }

    /// The position synchronised so far, as `sync.lock` holds it: the segment's first sequence
    /// number and the offset (8 bytes each, little-endian), then the CRC-32C of those 16 bytes
    /// (4 bytes, little-endian). Under the lock the first 16 bytes are read alone (the format of
    /// before the check); a waiter reads the position without the lock only when the check matches,
    /// so a read that overlapped a store (part old, part new) is never taken for a position.
    static let syncPositionSize = 20

    static func syncPosition(segment: UInt64, offset: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(syncPositionSize)
        appendLittleEndian(segment, to: &bytes)
        appendLittleEndian(offset, to: &bytes)
        let check = bytes.withUnsafeBytes { CRC32C.checksum($0) }
        appendLittleEndian(check, to: &bytes)
        return bytes
    }

    /// The position in `bytes` (what `sync.lock` holds): `nil` when there are fewer than 16 bytes,
    /// or, with `checked`, fewer than 20 or a check that does not match.
    static func parseSyncPosition(_ bytes: [UInt8], checked: Bool) -> (segment: UInt64, offset: UInt64)? {
        guard bytes.count >= (checked ? syncPositionSize : 16) else { return nil }
        return bytes.withUnsafeBytes { raw -> (segment: UInt64, offset: UInt64)? in
            let position = UnsafeRawBufferPointer(rebasing: raw[0..<16])
            if checked && CRC32C.checksum(position) != load(UInt32.self, raw, at: 16) { return nil }
            return (load(UInt64.self, raw, at: 0), load(UInt64.self, raw, at: 8))
        }
    }

    static func appendLittleEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        var little = value.littleEndian
        withUnsafeBytes(of: &little) { bytes.append(contentsOf: $0) }
    }

    static func load<T: FixedWidthInteger>(_ type: T.Type, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> T {
        T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    /// What the bytes at the start of `bytes` hold.
    enum Parsed {
        /// A whole, valid record frame of `size` bytes.
        case record(sequence: UInt64, time: UInt64, payload: Range<Int>, size: Int)
        /// A whole, valid seal: the next segment starts at `next`.
        case seal(next: UInt64)
        /// Not enough bytes for the frame (`needed` in all, when the length is known).
        case incomplete(needed: Int?)
        /// A frame whose checksum does not match, or whose length is impossible.
        case invalid(reason: String, claimedSize: Int?)
    }

    /// Parses the frame at the start of `bytes` (records up to `maximumPayload` bytes).
    static func parse(_ bytes: UnsafeRawBufferPointer, maximumPayload: Int) -> Parsed {
        guard bytes.count >= frameHeadSize else { return .incomplete(needed: nil) }
        let length = load(UInt32.self, bytes, at: 0)
        let sequence = load(UInt64.self, bytes, at: 4)
        let time = load(UInt64.self, bytes, at: 12)
        let payloadLength: Int
        if length == sealLength {
            payloadLength = 0
        } else if Int(length) > maximumPayload {
            return .invalid(
                reason: "frame length \(length) is over the maximum record size of \(maximumPayload) bytes",
                claimedSize: nil)
        } else {
            payloadLength = Int(length)
        }
        let size = frameOverhead + payloadLength
        guard bytes.count >= size else { return .incomplete(needed: size) }
        let stored = load(UInt32.self, bytes, at: frameHeadSize + payloadLength)
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<(frameHeadSize + payloadLength)]))
        guard stored == computed else {
            return .invalid(
                reason: "checksum mismatch (stored \(hex(stored)), computed \(hex(computed)))", claimedSize: size)
        }
        if length == sealLength { return .seal(next: sequence) }
        return .record(
            sequence: sequence, time: time, payload: frameHeadSize..<(frameHeadSize + payloadLength), size: size)
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }

    /// Checks a segment header; returns its first sequence.
    static func checkHeader(_ bytes: [UInt8], path: String) throws(WormholeError) -> UInt64 {
        guard bytes.count >= headerSize, Array(bytes[0..<4]) == magic else {
            throw WormholeError(
                .journalCorrupt, value: path,
                "'\(path)' is not a journal segment (its first bytes are not the magic 'WHJL'); "
                    + "move it out of the journal directory")
        }
        let version = bytes[4]
        if version != Self.version {
            throw WormholeError(
                .journalVersion, value: path,
                "'\(path)' is journal format version \(version); this build reads version \(Self.version) "
                    + "(use a newer Wormhole)")
        }
        return bytes.withUnsafeBytes { load(UInt64.self, $0, at: 8) }
    }
}

extension WormholeError.Code {
    /// A journal file is damaged in a way that cannot be repaired without losing records, or a
    /// file in a journal directory does not belong there. The error names the file and offset.
    public static let journalCorrupt = WormholeError.Code("journalCorrupt")
    /// A journal segment has a newer format version than this build reads.
    public static let journalVersion = WormholeError.Code("journalVersion")
    /// A consumer fell behind the journal's retention: records it had not read were removed.
    /// The error names the first missing and the first available sequence numbers.
    public static let journalGap = WormholeError.Code("journalGap")
    /// A record is larger than ``Journal/maximumRecordSize``; nothing was written.
    public static let recordTooLarge = WormholeError.Code("recordTooLarge")
    /// A consumer name breaks the identifier rules.
    public static let invalidConsumer = WormholeError.Code("invalidConsumer")
    /// A durable consumer is in use by another reader (in this or another process).
    public static let consumerBusy = WormholeError.Code("consumerBusy")
    /// A consumer's cursor file does not parse, or names a sequence number the journal never had.
    public static let invalidCursor = WormholeError.Code("invalidCursor")
    /// A start position names a sequence number after the journal's next one.
    public static let invalidPosition = WormholeError.Code("invalidPosition")
}

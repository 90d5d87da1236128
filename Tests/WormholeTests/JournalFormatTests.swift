// SPDX-License-Identifier: Apache-2.0
// The journal's byte format: CRC-32C against published vectors, frames and segment headers
// against the test vector of docs/journal-format.md, segment names.

import Foundation
import Testing

@testable import Wormhole

@Suite("Journal format")
struct JournalFormatTests {
    /// CRC-32C check value, and the vectors of RFC 3720 (iSCSI) appendix B.4.
    @Test(arguments: [
        (Array("123456789".utf8), UInt32(0xE306_9283)),
        ([UInt8](repeating: 0, count: 32), UInt32(0x8A91_36AA)),
        ([UInt8](repeating: 0xFF, count: 32), UInt32(0x62A8_AB43)),
        ((0..<32).map { UInt8($0) }, UInt32(0x46DD_794E)),
        ((0..<32).reversed().map { UInt8($0) }, UInt32(0x113F_DB5C)),
        (
            JournalFormatTests.bytes(
                "01c000000000000000000000000000001400000000000400000000140000001828000000000000000200000000000000"),
            UInt32(0xD996_3A56)
        ),
        ([], UInt32(0)),
    ])
    func crc32cVectors(input: [UInt8], expected: UInt32) {
        #expect(CRC32C.checksum(input) == expected)
    }

    /// `sync.lock`'s position: 16 bytes and their CRC-32C. Read without the lock, a read that
    /// overlapped a store (bytes of the old position and of the new) fails the check; under the
    /// lock the first 16 bytes are taken alone, as written before the check existed.
    @Test func syncPositionIsCheckedWhenReadWithoutTheLock() throws {
        let old = JournalFormat.syncPosition(segment: 1, offset: 0x1FF)
        let new = JournalFormat.syncPosition(segment: 1, offset: 0x200)
        #expect(old.count == JournalFormat.syncPositionSize)
        #expect(old[0..<16] == [1, 0, 0, 0, 0, 0, 0, 0, 0xFF, 1, 0, 0, 0, 0, 0, 0])
        let parsed = try #require(JournalFormat.parseSyncPosition(new, checked: true))
        #expect(parsed.segment == 1 && parsed.offset == 0x200)
        // Every way a read can mix the two stores byte by byte at one boundary, either order.
        for cut in 1..<JournalFormat.syncPositionSize {
            for (first, second) in [(old, new), (new, old)] {
                let torn = Array(first[0..<cut] + second[cut...])
                guard torn != first && torn != second else { continue }
                #expect(JournalFormat.parseSyncPosition(torn, checked: true) == nil, "cut at \(cut)")
            }
        }
        // Written by a version without the check: only the locked read takes it.
        let unchecked = Array(new[0..<16])
        #expect(JournalFormat.parseSyncPosition(unchecked, checked: true) == nil)
        #expect(JournalFormat.parseSyncPosition(unchecked, checked: false)?.offset == 0x200)
        #expect(JournalFormat.parseSyncPosition(Array(new[0..<15]), checked: false) == nil)
    }

    /// Every length from 0 to 40 through both paths of the slicing loop, against the bitwise definition.
    @Test func crc32cMatchesTheBitwiseDefinitionAtEveryLength() {
        func bitwise(_ bytes: [UInt8]) -> UInt32 {
            var crc: UInt32 = 0xFFFF_FFFF
            for byte in bytes {
                crc ^= UInt32(byte)
                for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            }
            return ~crc
        }
        for length in 0...40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(CRC32C.checksum(bytes) == bitwise(bytes), "length \(length)")
        }
    }

    /// The segment of docs/journal-format.md ("Test vector"), byte for byte.
    @Test func segmentTestVectorOfTheDocumentation() throws {
        var bytes = JournalFormat.header(first: 1)
        JournalFormat.appendFrame(
            sequence: 1, time: 1_700_000_000_000_000_000, payload: Data(#"{"n":1}"#.utf8), to: &bytes)
        JournalFormat.appendFrame(
            sequence: 2, time: 1_700_000_000_000_000_001, payload: Data(#""two""#.utf8), to: &bytes)
        JournalFormat.appendFrame(sequence: 3, time: 1_700_000_000_000_000_002, payload: nil, to: &bytes)
        let documented = try Self.documentedVector()
        #expect(bytes == documented, "docs/journal-format.md's vector differs from what the writer produces")
    }

    @Test func parsingFindsRecordsSealsAndDamage() {
        var bytes: [UInt8] = []
        JournalFormat.appendFrame(sequence: 7, time: 42, payload: Data("[]".utf8), to: &bytes)
        let whole = bytes.withUnsafeBytes { JournalFormat.parse($0, maximumPayload: 1 << 20) }
        guard case .record(let sequence, let time, let payload, let size) = whole else {
            Issue.record("not a record: \(whole)")
            return
        }
        #expect(sequence == 7 && time == 42 && payload == 20..<22 && size == 26)
        for cut in 0..<bytes.count {
            let torn = Array(bytes[0..<cut]).withUnsafeBytes { JournalFormat.parse($0, maximumPayload: 1 << 20) }
            guard case .incomplete = torn else {
                Issue.record("a frame cut at \(cut) bytes parsed as \(torn)")
                continue
            }
        }
        for index in bytes.indices {
            var damaged = bytes
            damaged[index] ^= 0x01
            let parsed = damaged.withUnsafeBytes { JournalFormat.parse($0, maximumPayload: 1 << 20) }
            if case .record(7, 42, _, _) = parsed { Issue.record("a flipped bit at byte \(index) went unnoticed") }
        }
        var seal: [UInt8] = []
        JournalFormat.appendFrame(sequence: 9, time: 0, payload: nil, to: &seal)
        let parsedSeal = seal.withUnsafeBytes { JournalFormat.parse($0, maximumPayload: 1 << 20) }
        guard case .seal(next: 9) = parsedSeal else {
            Issue.record("not a seal: \(parsedSeal)")
            return
        }
    }

    @Test func segmentNames() {
        #expect(JournalFormat.segmentName(1) == "00000000000000000001.seg")
        #expect(JournalFormat.segmentName(UInt64.max) == "18446744073709551615.seg")
        #expect(JournalFormat.segmentSequence("00000000000000000042.seg") == 42)
        #expect(JournalFormat.segmentSequence("0000000000000000042.seg") == nil)
        #expect(JournalFormat.segmentSequence("0000000000000000004a.seg") == nil)
        #expect(JournalFormat.segmentSequence("99999999999999999999.seg") == nil)
        // Sequence numbers start at 1.
        #expect(JournalFormat.segmentSequence("00000000000000000000.seg") == nil)
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return result
    }

    /// The hex lines between "```hex" and "```" under "## Test vector" in docs/journal-format.md.
    static func documentedVector() throws -> [UInt8] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/journal-format.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let section = text.range(of: "## Test vector"),
            let open = text.range(of: "```hex\n", range: section.upperBound..<text.endIndex),
            let close = text.range(of: "```", range: open.upperBound..<text.endIndex)
        else { throw JournalTestFailure("docs/journal-format.md has no hex block under '## Test vector'") }
        var hex = ""
        for line in text[open.upperBound..<close.lowerBound].split(separator: "\n") {
            // "OFFSET: HEX HEX …  # comment"
            let body = line.split(separator: "#", maxSplits: 1)[0]
            let parts = body.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            hex += parts[1].filter { !$0.isWhitespace }
        }
        return bytes(hex)
    }
}

struct JournalTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

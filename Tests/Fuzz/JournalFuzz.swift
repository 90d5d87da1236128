// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the journal code that reads untrusted bytes: segment headers
// (JournalFormat.checkHeader), frames (JournalFormat.parse, through JournalScan.run, which reads a
// real file descriptor as the readers and the appenders' repair do), segment file names, and
// durable consumers' cursor files (JournalCursorFile.parse). Built with the whole Wormhole module
// by Tests/fuzz.sh.
//
// The input is a segment file: a 16-byte header, then frames. Invariants, for every input:
// - nothing crashes or reads out of bounds (ASan);
// - the header is accepted exactly when it has the magic and version 1, its first sequence read
//   little-endian; otherwise refused as journalCorrupt or journalVersion, naming the file;
// - JournalScan.run over the file agrees exactly with a reference walk written here from
//   docs/journal-format.md (a byte-table CRC-32C independent of the slicing-by-8 one): the same
//   whole records (sequence, time, payload bytes), end offset, next sequence, and stop (end, seal,
//   incomplete, a jump to a later number, damage and whether it looks like a torn tail);
// - segment names: segmentSequence(segmentName(n)) == n, and a name that parses is exactly 20
//   digits + ".seg"; no segment is named 0;
// - a record numbered 2^64 − 1 (no number would follow it) is damage.
// And for a share of the inputs, chosen by the input's hash (the same input, the same checks),
// as they cost several reads, files or a 256 KiB read:
// - (1 in 4) scanning in steps of 1 to 4 records (the budget) gives the same as one scan;
// - (1 in 64) the same frames placed across the scanner's 256 KiB read chunk, after one large
//   record (header byte 6, reserved, chooses where), give the same records and stop;
// - (1 in 2) a segment the writer's encoder (JournalFormat.header, appendFrame) builds from the
//   input's lines reads back exactly, sealed; cut short anywhere it gives the records before the
//   cut and waits (incomplete); with one bit flipped outside a length field, the records before
//   the flipped frame and then damage at its offset, never the altered record;
// - (inputs starting with '{', and 1 in 8 others) a cursor file parses to (acknowledged ≤
//   delivering ≤ 2^64 − 2) or is refused as invalidCursor naming the file; (1 in 64) the line
//   the consumer stores parses back.

import Foundation
import Glibc

// MARK: Reference

/// The classic one-table CRC-32C (reflected 0x82F63B78), built here, not taken from CRC32C.
private let referenceTable: [UInt32] = (0..<256).map { byte in
    var crc = UInt32(byte)
    for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    return crc
}

private func referenceCRC(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
    referenceTable.withUnsafeBufferPointer { table in
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = (crc >> 8) ^ table[Int((crc ^ UInt32(byte)) & 0xFF)] }
        return ~crc
    }
}

private func little<T: FixedWidthInteger>(_ type: T.Type, _ bytes: UnsafeRawBufferPointer, _ offset: Int) -> T {
    var value: T = 0
    for index in (0..<MemoryLayout<T>.size).reversed() { value = value << 8 | T(bytes[offset + index]) }
    return value
}

private enum Stop: Equatable {
    case end
    case seal(UInt64)
    case budget, incomplete
    case invalid(tailLike: Bool)
    case jump(UInt64)
}

private struct Walk {
    var records: [(sequence: UInt64, time: UInt64, payload: Range<Int>)] = []
    var end: Int
    var next: UInt64
    var stop = Stop.end
}

/// What a reader must find in `bytes` (the file from `base` on) from file offset `offset`,
/// expecting sequence `next`, by the rules of docs/journal-format.md.
private func referenceWalk(
    _ bytes: UnsafeRawBufferPointer, base: Int, from offset: Int, expecting next: UInt64, maximumRecords: Int = .max
) -> Walk {
    let maximumPayload = 1 << 20
    var walk = Walk(end: offset, next: next)
    let size = base + bytes.count
    func allZero(from start: Int) -> Bool { bytes[(start - base)...].allSatisfy { $0 == 0 } }
    while true {
        if walk.end >= size {
            walk.stop = .end
            return walk
        }
        if walk.records.count >= maximumRecords {
            walk.stop = .budget
            return walk
        }
        let at = walk.end - base
        let remaining = size - walk.end
        if remaining < 20 {
            walk.stop = .incomplete
            return walk
        }
        let length = little(UInt32.self, bytes, at)
        let sequence = little(UInt64.self, bytes, at + 4)
        let time = little(UInt64.self, bytes, at + 12)
        let seal = length == 0xFFFF_FFFF
        if !seal && Int(length) > maximumPayload {
            walk.stop = .invalid(tailLike: allZero(from: walk.end))
            return walk
        }
        let payloadLength = seal ? 0 : Int(length)
        let frameSize = 24 + payloadLength
        if remaining < frameSize {
            walk.stop = .incomplete
            return walk
        }
        let stored = little(UInt32.self, bytes, at + 20 + payloadLength)
        if stored != referenceCRC(UnsafeRawBufferPointer(rebasing: bytes[at..<(at + 20 + payloadLength)])) {
            walk.stop = .invalid(tailLike: walk.end + frameSize >= size || allZero(from: walk.end))
            return walk
        }
        // A whole frame numbered after the expected one: the numbers between are not in the
        // file (an append numbered past a stored cursor); the frame is not consumed.
        if sequence > walk.next && (seal || sequence <= .max - 1) {
            walk.stop = .jump(sequence)
            return walk
        }
        if sequence != walk.next {
            walk.stop = .invalid(tailLike: false)
            return walk
        }
        // No record can carry the last 64-bit number: the sequence after it would not fit.
        if !seal && sequence == .max {
            walk.stop = .invalid(tailLike: false)
            return walk
        }
        if seal {
            walk.end += 24
            walk.stop = .seal(sequence)
            return walk
        }
        walk.records.append((sequence, time, (walk.end + 20)..<(walk.end + 20 + payloadLength)))
        walk.end += frameSize
        walk.next += 1
    }
}

// MARK: The file the scanner reads

/// Two anonymous files (created and unlinked at start): `plain` holds the input; `chunked` holds
/// a header and one large record, then the input's frames.
private func anonymousFile(_ name: String) -> OpenFile {
    var template = Array("/dev/shm/wormhole-fuzz-XXXXXX".utf8CString)
    if access("/dev/shm", W_OK) != 0 { template = Array("/tmp/wormhole-fuzz-XXXXXX".utf8CString) }
    let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard descriptor >= 0 else { fatalError("mkstemp: errno \(errno)") }
    template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
    return OpenFile(descriptor: descriptor, path: name)
}

private let plain = anonymousFile("fuzz.seg")
private let chunked = anonymousFile("chunked.seg")
nonisolated(unsafe) private var chunkedPrefix = -1
/// The header and large record that end `before` bytes short of the chunk, by `before` (built once each).
nonisolated(unsafe) private var prefixes: [Int: [UInt8]] = [:]
private let chunk = 256 * 1024

/// Makes `file` hold `bytes` at `offset` and end there (the bytes before are left as they are).
private func fill(_ file: OpenFile, at offset: Int, _ bytes: UnsafeRawBufferPointer) {
    guard pwrite(file.descriptor, bytes.baseAddress, bytes.count, off_t(offset)) == bytes.count,
        ftruncate(file.descriptor, off_t(offset + bytes.count)) == 0
    else { fatalError("writing the scratch file: errno \(errno)") }
}

private func scan(
    _ file: OpenFile, from offset: Int, expecting next: UInt64, maximumRecords: Int = .max
) -> JournalScan {
    do {
        return try JournalScan.run(file, from: offset, expecting: next, collect: true, maximumRecords: maximumRecords)
    } catch {
        fatalError("scan threw \(error)")
    }
}

private func stop(of scan: JournalScan) -> Stop {
    switch scan.stop {
    case .end: return .end
    case .seal(let next): return .seal(next)
    case .budget: return .budget
    case .incomplete: return .incomplete
    case .jump(let to): return .jump(to)
    case .invalid(let reason, let tailLike):
        if reason.isEmpty { fatalError("damage reported without a reason") }
        return .invalid(tailLike: tailLike)
    }
}

/// Fails unless `scanned` (records from index `skip` on) is what the reference walk found.
private func agree(
    _ scanned: JournalScan, skip: Int = 0, _ walk: Walk, _ bytes: UnsafeRawBufferPointer, base: Int, _ what: String
) {
    func fail(_ why: String) -> Never {
        fatalError(
            "\(what): \(why); scan: end \(scanned.end), next \(scanned.next), stop \(scanned.stop), "
                + "\(scanned.records.count) records; reference: end \(walk.end), next \(walk.next), stop \(walk.stop), "
                + "\(walk.records.count) records")
    }
    if scanned.records.count - skip != walk.records.count { fail("record count") }
    for (record, expected) in zip(scanned.records[skip...], walk.records) {
        if record.sequence != expected.sequence || record.time != expected.time {
            fail("record \(expected.sequence) header")
        }
        let payload = UnsafeRawBufferPointer(
            rebasing: bytes[(expected.payload.lowerBound - base)..<(expected.payload.upperBound - base)])
        if !record.payload.elementsEqual(payload) { fail("record \(expected.sequence) payload") }
    }
    if scanned.end != walk.end || scanned.next != walk.next || stop(of: scanned) != walk.stop { fail("end or stop") }
    if scanned.size != base + bytes.count { fail("file size \(scanned.size)") }
}

// MARK: The target

/// FNV-1a of the input's first 64 bytes and its length: chooses, the same way for the same input,
/// what is done with it beyond the checks every input gets.
private func fnv(_ input: UnsafeRawBufferPointer) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in input.prefix(64) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
    return (hash ^ UInt64(input.count)) &* 0x100_0000_01B3
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJournal(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    checkHeader(input)
    checkNames(input)
    let hash = fnv(input)
    if input.first == UInt8(ascii: "{") || hash >> 12 & 7 == 0 { checkCursor(input, roundTrip: hash >> 20 & 7 == 0) }
    guard size >= 16 else { return 0 }
    let first = little(UInt64.self, input, 8)

    // The file as it is, scanned once, then record by record.
    fill(plain, at: 0, input)
    let walk = referenceWalk(UnsafeRawBufferPointer(rebasing: input[16...]), base: 16, from: 16, expecting: first)
    let whole = scan(plain, from: 16, expecting: first)
    agree(whole, walk, UnsafeRawBufferPointer(rebasing: input[16...]), base: 16, "scan")
    // What follows costs a read per step, or a 256 KiB read, or several files: each is done for
    // a share of the inputs, chosen by the input's hash (the same input, the same checks).
    if hash >> 8 & 3 == 0 {
        let step = 1 + Int(hash >> 10 & 3)
        var stepped = scan(plain, from: 16, expecting: first, maximumRecords: step)
        var records = stepped.records
        while case .budget = stepped.stop {
            stepped = scan(plain, from: stepped.end, expecting: stepped.next, maximumRecords: step)
            records += stepped.records
        }
        stepped.records = records
        agree(stepped, walk, UnsafeRawBufferPointer(rebasing: input[16...]), base: 16, "scan in steps of \(step)")
    }

    if hash % 64 == 0 { checkAcrossChunk(input, before: Int(input[6])) }
    if hash >> 16 & 1 == 0 { checkEncoded(input, hash: hash) }
    return 0
}

private func checkHeader(_ input: UnsafeRawBufferPointer) {
    // What a reader reads: the first 16 bytes, or fewer in a shorter file.
    let head = Array(input.prefix(16))
    let magic = head.count == 16 && head[0..<4].elementsEqual("WHJL".utf8)
    do {
        let first = try JournalFormat.checkHeader(head, path: "fuzz.seg")
        guard magic, head[4] == 1, first == little(UInt64.self, input, 8) else {
            fatalError("header \(head) accepted with first sequence \(first)")
        }
    } catch {
        let expected: WormholeError.Code = magic ? .journalVersion : .journalCorrupt
        if error.code != expected || error.value != "fuzz.seg" || magic && head[4] == 1 {
            fatalError("header \(head) refused as \(error)")
        }
    }
}

private func checkNames(_ input: UnsafeRawBufferPointer) {
    let name = String(decoding: input.prefix(64), as: UTF8.self)
    if let sequence = JournalFormat.segmentSequence(name) {
        if JournalFormat.segmentName(sequence) != name { fatalError("segment name \(name) parsed as \(sequence)") }
    } else if name.utf8.count == 24, name.utf8.prefix(20).allSatisfy({ (0x30...0x39).contains($0) }),
        name.utf8.suffix(4).elementsEqual(".seg".utf8),
        let number = UInt64(String(decoding: name.utf8.prefix(20), as: UTF8.self)), number >= 1
    {
        fatalError("segment name \(name) not parsed")
    }
    if input.count >= 8 {
        let sequence = little(UInt64.self, input, 0)
        let made = JournalFormat.segmentName(sequence)
        // Sequence numbers start at 1: no segment is named 0.
        if JournalFormat.segmentSequence(made) != (sequence == 0 ? nil : sequence) || made.utf8.count != 24 {
            fatalError("segment name \(made)")
        }
    }
}

private func checkCursor(_ input: UnsafeRawBufferPointer, roundTrip: Bool) {
    do {
        let (acknowledged, delivering) = try JournalCursorFile.parse(
            Array(input), path: "fuzz.cursor", consumer: "fuzz")
        if delivering < acknowledged || delivering > JournalFormat.maximumSequence {
            fatalError("cursor parsed as acknowledged \(acknowledged), delivering \(delivering)")
        }
    } catch {
        if error.code != .invalidCursor || error.value != "fuzz.cursor" { fatalError("cursor refused as \(error)") }
    }
    // The line the consumer stores reads back (for one input in 8: a second JSONDecoder is slow).
    guard roundTrip, input.count >= 16 else { return }
    let a = little(UInt64.self, input, 0)
    let d = max(a, little(UInt64.self, input, 8))
    let line = "{\"format\":1,\"acknowledged\":\(a),\"delivering\":\(d)}\n"
    let stored = try? JournalCursorFile.parse(Array(line.utf8), path: "c", consumer: "c")
    // Up to the largest sequence number a journal can hold (the one after must fit).
    if d <= JournalFormat.maximumSequence ? stored.map({ $0 != (a, d) }) ?? true : stored != nil {
        fatalError("stored cursor \(line) read back as \(String(describing: stored))")
    }
}

/// The input's frames after one valid record that ends `before` bytes short of the scanner's
/// first read chunk, so that they straddle it.
private func checkAcrossChunk(_ input: UnsafeRawBufferPointer, before: Int) {
    let prefix = 16 + chunk - before
    if chunkedPrefix != prefix {
        let bytes =
            prefixes[before]
            ?? {
                var bytes = JournalFormat.header(first: 0)
                let payload = Data(repeating: UInt8(ascii: " "), count: prefix - 16 - 24)
                JournalFormat.appendFrame(sequence: 0, time: 0, payload: payload, to: &bytes)
                prefixes[before] = bytes
                return bytes
            }()
        bytes.withUnsafeBytes { fill(chunked, at: 0, $0) }
        chunkedPrefix = prefix
    }
    let frames = UnsafeRawBufferPointer(rebasing: input[16...])
    fill(chunked, at: prefix, frames)
    let scanned = scan(chunked, from: 16, expecting: 0)
    guard let large = scanned.records.first, large.sequence == 0, large.payload.count == prefix - 40 else {
        fatalError("the large record before the chunk boundary was not read: \(scanned.stop)")
    }
    agree(
        scanned, skip: 1, referenceWalk(frames, base: prefix, from: prefix, expecting: 1), frames, base: prefix,
        "across the chunk")
}

/// A segment the writer's encoder builds from the input's lines (up to 16).
private func checkEncoded(_ input: UnsafeRawBufferPointer, hash: UInt64) {
    let first = (little(UInt64.self, input, 8) & 0xFFFF_FFFF_FFFF) + 1
    let lines = input[16...].split(separator: 0x0A, maxSplits: 15, omittingEmptySubsequences: false)
    var bytes = JournalFormat.header(first: first)
    var starts: [Int] = []
    for (index, line) in lines.enumerated() {
        starts.append(bytes.count)
        JournalFormat.appendFrame(
            sequence: first + UInt64(index), time: UInt64(index) << 40, payload: Data(line), to: &bytes)
    }
    starts.append(bytes.count)
    JournalFormat.appendFrame(sequence: first + UInt64(lines.count), time: 0, payload: nil, to: &bytes)
    let size = bytes.count
    /// The first `count` records (all of them, when `exactly`) are the encoded ones.
    func check(_ scanned: JournalScan, records count: Int, exactly: Bool = true, _ what: String) {
        guard exactly ? scanned.records.count == count : scanned.records.count >= count else {
            fatalError("\(what): \(scanned.records.count) records, not \(count)")
        }
        for (index, record) in scanned.records.prefix(count).enumerated() {
            guard record.sequence == first + UInt64(index), record.time == UInt64(index) << 40,
                record.payload.elementsEqual(lines[lines.startIndex + index])
            else { fatalError("\(what): record \(index) differs") }
        }
    }

    bytes.withUnsafeBytes { fill(plain, at: 0, $0) }
    let whole = scan(plain, from: 16, expecting: first)
    check(whole, records: lines.count, "encoded segment")
    guard case .seal(let next) = whole.stop, next == first + UInt64(lines.count), whole.end == size else {
        fatalError("encoded segment: stop \(whole.stop) at \(whole.end) of \(size)")
    }

    // Cut short (a writer killed mid-write): the whole frames before the cut, then wait.
    let cut = 16 + Int(hash % UInt64(size - 16))
    bytes.withUnsafeBytes { fill(plain, at: 0, UnsafeRawBufferPointer(rebasing: $0[..<cut])) }
    let torn = scan(plain, from: 16, expecting: first)
    let wholeBefore = starts.lastIndex { $0 <= cut }!
    check(torn, records: wholeBefore, "cut at \(cut)")
    let atBoundary = starts[wholeBefore] == cut
    guard torn.end == starts[wholeBefore], atBoundary ? torn.stop.isEnd : torn.stop.isIncomplete else {
        fatalError("cut at \(cut): stop \(torn.stop) at \(torn.end)")
    }

    // One bit flipped: the records before its frame, then damage there (outside a length field).
    let flip = 16 + Int((hash >> 32) % UInt64(size - 16))
    let frame = starts.lastIndex { $0 <= flip }!
    var damaged = bytes
    damaged[flip] ^= 1 << UInt8(hash >> 60 & 7)
    damaged.withUnsafeBytes { fill(plain, at: 0, $0) }
    let hurt = scan(plain, from: 16, expecting: first)
    if flip - starts[frame] < 4 {
        // A length changed: the frames are cut elsewhere (a crafted payload can hold a checksum
        // that matches the new cut); the records before it still read back.
        check(hurt, records: frame, exactly: false, "bit \(flip) flipped in a length")
    } else {
        check(hurt, records: frame, "bit \(flip) flipped")
        guard hurt.end == starts[frame], case .invalid = hurt.stop else {
            fatalError("bit \(flip) flipped: stop \(hurt.stop) at \(hurt.end), frame at \(starts[frame])")
        }
    }
}

extension JournalScan.Stop {
    fileprivate var isEnd: Bool { if case .end = self { true } else { false } }
    fileprivate var isIncomplete: Bool { if case .incomplete = self { true } else { false } }
}

// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// One record as stored: its sequence number, append time and JSON payload.
struct RawJournalRecord: Sendable {
    var sequence: UInt64
    var time: UInt64
    var payload: Data
}

/// Walks the frames of one segment from an offset, checking each frame's checksum and that the
/// sequence numbers follow on.
struct JournalScan {
    /// Why the walk stopped.
    enum Stop {
        /// The end of the file, on a frame boundary.
        case end
        /// A seal: the next segment starts at `next`.
        case seal(next: UInt64)
        /// The stop budget (records or bytes) was reached.
        case budget
        /// The frame at `end` is whole and valid but numbered `to`, after the expected number (an
        /// append numbered past a stored consumer cursor, or records lost before it): the numbers
        /// in between are not in the file. The frame is not consumed.
        case jump(to: UInt64)
        /// The last frame is not all there (being written, or torn by a killed writer).
        case incomplete
        /// The frame at `end` is damaged. `tailLike`: nothing valid can follow it (it reaches the
        /// end of the file, or only zero bytes follow), as after a writer killed mid-write.
        case invalid(reason: String, tailLike: Bool)
    }

    var records: [RawJournalRecord] = []
    /// The offset just after the last whole frame read (of the seal, when stopped at one).
    var end: Int
    /// The sequence number the next record must carry.
    var next: UInt64
    var stop: Stop = .end
    /// The file's size when the walk started.
    var size = 0

    /// Scans `file` from `offset`, expecting `next`; collects payloads when `collect`. `tail`:
    /// every byte from `offset` to the end of the file, as a short read just found them (no
    /// `fstat` and no second read, see ``JournalWriter``).
    static func run(
        _ file: OpenFile, from offset: Int, expecting next: UInt64, collect: Bool,
        maximumRecords: Int = .max, maximumBytes: Int = .max, tail: [UInt8]? = nil
    ) throws(WormholeError) -> JournalScan {
        var scan = JournalScan(end: offset, next: next)
        let size: Int
        if let tail { size = offset + tail.count } else { size = try file.size() }
        scan.size = size
        var bytesTaken = 0
        var taken = 0
        let chunk = 256 * 1024
        while scan.end < size {
            if taken >= maximumRecords || bytesTaken >= maximumBytes {
                scan.stop = .budget
                return scan
            }
            var buffer: [UInt8]
            if let tail, scan.end == offset {
                buffer = tail
            } else {
                buffer = try file.read(
                    at: scan.end, count: min(size - scan.end, max(chunk, JournalFormat.frameOverhead)))
            }
            var position = 0
            while position < buffer.count {
                if taken >= maximumRecords || bytesTaken >= maximumBytes {
                    scan.stop = .budget
                    return scan
                }
                let parsed = buffer.withUnsafeBytes { bytes in
                    JournalFormat.parse(
                        UnsafeRawBufferPointer(rebasing: bytes[position...]), maximumPayload: Journal.maximumRecordSize)
                }
                switch parsed {
                case .record(let sequence, let time, let payload, let frameSize):
                    if let stop = scan.outOfOrder(sequence, jumpingThrough: JournalFormat.maximumSequence, "record has")
                    {
                        scan.stop = stop
                        return scan
                    }
                    if sequence > JournalFormat.maximumSequence {
                        // The number after it would not fit in 64 bits (a crafted file).
                        scan.stop = .invalid(
                            reason: "record has sequence number \(sequence), past the largest a journal can hold "
                                + "(\(JournalFormat.maximumSequence))",
                            tailLike: false)
                        return scan
                    }
                    if collect {
                        let start = position + payload.lowerBound
                        scan.records.append(
                            RawJournalRecord(
                                sequence: sequence, time: time, payload: Data(buffer[start..<(start + payload.count)])))
                    }
                    bytesTaken += frameSize
                    taken += 1
                    scan.next += 1
                    scan.end += frameSize
                    position += frameSize
                case .seal(let next):
                    if let stop = scan.outOfOrder(next, jumpingThrough: JournalFormat.maximumSequence + 1, "seal names")
                    {
                        scan.stop = stop
                        return scan
                    }
                    scan.end += JournalFormat.frameOverhead
                    scan.stop = .seal(next: next)
                    return scan
                case .incomplete(let needed):
                    // Not all in this buffer: whole in the file (read again from the frame), or not.
                    let available = size - scan.end
                    let want = needed ?? JournalFormat.frameHeadSize
                    if available < want {
                        scan.stop = .incomplete
                        return scan
                    }
                    buffer = try file.read(at: scan.end, count: min(available, max(chunk, want)))
                    position = 0
                    if buffer.count < want {
                        scan.stop = .incomplete
                        return scan
                    }
                case .invalid(let reason, let claimedSize):
                    let reachesEnd = claimedSize.map { scan.end + $0 >= size } ?? false
                    let tailLike = reachesEnd ? true : try allZero(file, from: scan.end, to: size)
                    scan.stop = .invalid(reason: reason, tailLike: tailLike)
                    return scan
                }
            }
        }
        scan.stop = .end
        return scan
    }

    /// Where a frame numbered `number` stops the walk, which expects ``next``: a jump to a number
    /// after it (at most `bound`), or a damaged frame (`what`, such as "record has", names it);
    /// nil for the number expected.
    private func outOfOrder(_ number: UInt64, jumpingThrough bound: UInt64, _ what: String) -> Stop? {
        if number > next && number <= bound { return .jump(to: number) }
        if number != next {
            return .invalid(reason: "\(what) sequence number \(number) where \(next) was expected", tailLike: false)
        }
        return nil
    }

    /// After a damaged frame at `offset`: the offset and number of the next whole, valid frame
    /// (record or seal) numbered after `next` and at most `bound`, found by trying every later
    /// offset (a frame's length field may be what is damaged). Nil when there is none in the file.
    /// A candidate's number and length are checked before its checksum, so garbage costs little.
    static func resynchronise(
        _ file: OpenFile, from offset: Int, after next: UInt64, through bound: UInt64
    ) throws(WormholeError) -> (offset: Int, sequence: UInt64)? {
        let size = try file.size()
        let window = 4 << 20
        let largestFrame = Journal.maximumRecordSize + JournalFormat.frameOverhead
        var start = offset + 1
        while start + JournalFormat.frameOverhead <= size {
            let buffer = try file.read(at: start, count: min(size - start, window + largestFrame))
            let candidates = min(buffer.count, window)
            let found = buffer.withUnsafeBytes { bytes -> (Int, UInt64)? in
                var index = 0
                while index < candidates, bytes.count - index >= JournalFormat.frameOverhead {
                    defer { index += 1 }
                    let sequence = JournalFormat.load(UInt64.self, bytes, at: index + 4)
                    guard sequence > next, sequence <= bound else { continue }
                    let length = JournalFormat.load(UInt32.self, bytes, at: index)
                    guard length == JournalFormat.sealLength || Int(length) <= Journal.maximumRecordSize else {
                        continue
                    }
                    switch JournalFormat.parse(
                        UnsafeRawBufferPointer(rebasing: bytes[index...]), maximumPayload: Journal.maximumRecordSize)
                    {
                    case .record(let number, _, _, _) where number <= JournalFormat.maximumSequence:
                        return (index, number)
                    case .seal(let number): return (index, number)
                    default: continue
                    }
                }
                return nil
            }
            if let found { return (start + found.0, found.1) }
            start += candidates
        }
        return nil
    }

    /// Whether every byte of `file` in `start..<end` is zero (a tail a power loss can leave).
    private static func allZero(_ file: OpenFile, from start: Int, to end: Int) throws(WormholeError) -> Bool {
        var offset = start
        while offset < end {
            let bytes = try file.read(at: offset, count: min(end - offset, 1 << 20))
            if bytes.isEmpty { return true }
            if bytes.contains(where: { $0 != 0 }) { return false }
            offset += bytes.count
        }
        return true
    }
}

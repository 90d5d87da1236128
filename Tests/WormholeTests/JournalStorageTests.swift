// SPDX-License-Identifier: Apache-2.0
// The journal on disk, in one process, without a bus: appending and reading back, rollover and
// seals, torn-tail repair, damage, foreign files, newer versions, cursors, retention and gaps,
// size limits, group commit. The cross-process and crash runs are in JournalProcessTests.

import Dispatch
import Foundation
import Glibc
import Logging
import Testing

@testable import Wormhole

/// A container root and a journal location in it.
final class JournalDisk: Sendable {
    static let group = "group.com.example.journal"
    let root: StorageTempDirectory

    init() throws { root = try StorageTempDirectory() }
    deinit { root.remove() }

    func location(_ identifier: String = "events") throws -> JournalLocation {
        var logger = Logger(label: "journal-tests")
        logger.logLevel = .critical
        return JournalLocation(
            container: try GroupContainer(group: GroupIdentifier(Self.group), root: root.path),
            directory: try WormholeDirectoryName("wormhole"), identifier: try MessageIdentifier(identifier),
            logger: logger)
    }

    func writer(_ identifier: String = "events", options: Journal.Options = Journal.Options()) throws -> JournalWriter {
        JournalWriter(location: try location(identifier), options: options)
    }

    func reader(_ identifier: String = "events", from start: JournalPosition = .beginning) throws -> JournalReader {
        try JournalReader(location: try location(identifier), start: start)
    }

    func directory(_ identifier: String = "events") -> String {
        root.child(Self.group, "wormhole", identifier + ".journal")
    }

    func segment(_ first: UInt64, _ identifier: String = "events") -> String {
        directory(identifier) + "/" + JournalFormat.segmentName(first)
    }

    func segments(_ identifier: String = "events") throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory(identifier)).filter { $0.hasSuffix(".seg") }
            .sorted()
    }
}

func payload(_ n: Int, size: Int = 0) -> Data {
    Data(("{\"n\":\(n)" + (size > 0 ? ",\"pad\":\"" + String(repeating: "p", count: size) + "\"" : "") + "}").utf8)
}

func numbers(_ records: [RawJournalRecord]) -> [Int] {
    records.map { record in
        (try? JSONSerialization.jsonObject(with: record.payload) as? [String: Any])?["n"] as? Int ?? -1
    }
}

/// Reads everything available, through as many polls as it takes.
func drain(_ reader: JournalReader) throws -> [RawJournalRecord] {
    var all: [RawJournalRecord] = []
    while true {
        let batch = try reader.poll(maximumRecords: 50)
        if batch.isEmpty { return all }
        all += batch
    }
}

func appendBytes(_ bytes: [UInt8], to path: String) throws {
    let fd = open(path, O_WRONLY | O_APPEND)
    guard fd >= 0 else { throw JournalTestFailure("open \(path): errno \(errno)") }
    defer { close(fd) }
    guard write(fd, bytes, bytes.count) == bytes.count else { throw JournalTestFailure("write: errno \(errno)") }
}

func flipByte(at offset: Int, in path: String) throws {
    let fd = open(path, O_RDWR)
    guard fd >= 0 else { throw JournalTestFailure("open \(path): errno \(errno)") }
    defer { close(fd) }
    var byte: UInt8 = 0
    guard pread(fd, &byte, 1, off_t(offset)) == 1 else { throw JournalTestFailure("pread") }
    byte ^= 0x5A
    guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else { throw JournalTestFailure("pwrite") }
}

func fileSize(_ path: String) throws -> Int {
    (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1
}

@Suite("Journal storage")
struct JournalStorageTests {
    @Test func appendsAreNumberedFromOneAndReadBackInOrder() throws {
        let disk = try JournalDisk()
        let writer = try disk.writer()
        #expect(try writer.append([payload(0)]) == 1...1)
        #expect(try writer.append([payload(1), payload(2), payload(3)]) == 2...4)
        #expect(try writer.append([payload(4)]) == 5...5)
        let records = try drain(try disk.reader())
        #expect(records.map(\.sequence) == [1, 2, 3, 4, 5])
        #expect(numbers(records) == [0, 1, 2, 3, 4])
        // Another writer (as another process would) continues the numbering.
        #expect(try disk.writer().append([payload(5)]) == 6...6)
        #expect(try writer.append([payload(6)]) == 7...7)
        #expect(try drain(try disk.reader(from: .sequence(6))).map(\.sequence) == [6, 7])
        let mode = try FileManager.default.attributesOfItem(atPath: disk.directory())[.posixPermissions] as? Int
        #expect(mode == 0o700)
    }

    @Test func segmentsRollOverWithSealsAndReadersFollowThem() throws {
        let disk = try JournalDisk()
        let writer = try disk.writer(options: Journal.Options(segmentSize: 4096))
        for n in 0..<300 { _ = try writer.append([payload(n, size: 80)]) }
        let segments = try disk.segments()
        #expect(segments.count >= 6, "300 records of ~110 bytes in 4 KiB segments")
        #expect(segments.first == "00000000000000000001.seg")
        let all = try drain(try disk.reader())
        #expect(all.map(\.sequence) == Array(1...300))
        #expect(numbers(all) == Array(0..<300))
        let middle = try drain(try disk.reader(from: .sequence(150)))
        #expect(middle.map(\.sequence) == Array(150...300))
        let atEnd = try disk.reader(from: .end)
        #expect(try atEnd.poll().isEmpty)
        #expect(try disk.reader(from: .sequence(301)).poll().isEmpty)
        _ = try writer.append([payload(300)])
        #expect(try atEnd.poll().map(\.sequence) == [301])
        #expect(throws: WormholeError.self) { try disk.reader(from: .sequence(303)) }
        do {
            _ = try disk.reader(from: .sequence(303))
        } catch let error as WormholeError {
            #expect(error.code == .invalidPosition && error.value == "303")
        }
    }

    @Test(arguments: [3, 10, 20, 30])
    func aTornTailIsInvisibleToReadersAndRepairedByTheNextAppender(cut: Int) throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append([payload(0), payload(1), payload(2)])
        let whole = try fileSize(disk.segment(1))
        // What a writer killed mid-write leaves: the first `cut` bytes of the frame of record 4.
        var frame: [UInt8] = []
        JournalFormat.appendFrame(sequence: 4, time: 0, payload: payload(3, size: 10), to: &frame)
        try appendBytes(Array(frame.prefix(cut)), to: disk.segment(1))
        let reader = try disk.reader()
        #expect(try drain(reader).map(\.sequence) == [1, 2, 3])
        #expect(try disk.reader(from: .end).poll().isEmpty)
        #expect(try Journal.statusForTests(disk.location()).last == 3)
        // A fresh appender (another process) repairs the tail, then appends record 4.
        #expect(try disk.writer().append([payload(99)]) == 4...4)
        var expected: [UInt8] = []
        JournalFormat.appendFrame(sequence: 4, time: 0, payload: payload(99), to: &expected)
        #expect(try fileSize(disk.segment(1)) == whole + expected.count)
        let after = try drain(reader)
        #expect(after.map(\.sequence) == [4])
        #expect(numbers(after) == [99])
    }

    @Test func aWholeLastFrameWithABadChecksumIsATornTailToo() throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append([payload(0)])
        var frame: [UInt8] = []
        JournalFormat.appendFrame(sequence: 2, time: 0, payload: payload(1), to: &frame)
        frame[frame.count - 1] ^= 0xFF
        try appendBytes(frame, to: disk.segment(1))
        #expect(try drain(try disk.reader()).map(\.sequence) == [1])
        #expect(try disk.writer().append([payload(2)]) == 2...2)
        #expect(numbers(try drain(try disk.reader())) == [0, 2])
    }

    @Test func damageInAMiddleSegmentIsReportedOnceWithItsRangeAndReadPast() throws {
        let disk = try JournalDisk()
        let writer = try disk.writer(options: Journal.Options(segmentSize: 4096))
        for n in 0..<100 { _ = try writer.append([payload(n, size: 80)]) }
        let segments = try disk.segments()
        #expect(segments.count >= 3)
        // The payload of the 5th record of the first segment.
        let frameSize = JournalFormat.frameOverhead + payload(0, size: 80).count
        try flipByte(at: JournalFormat.headerSize + 4 * frameSize + 30, in: disk.segment(1))
        let reader = try disk.reader()
        var delivered: [UInt64] = []
        var failures: [WormholeError] = []
        while true {
            do {
                let batch = try reader.poll()
                if batch.isEmpty { break }
                delivered += batch.map(\.sequence)
            } catch {
                failures.append(error)
            }
        }
        // Every record but the damaged one, in order; one report, in its place.
        #expect(delivered == [1, 2, 3, 4] + Array(6...100))
        #expect(failures.count == 1)
        #expect(failures.first?.code == .journalDamaged)
        #expect(failures.first?.value == disk.segment(1))
        #expect(failures.first?.journalDamage?.from == 5 && failures.first?.journalDamage?.to == 5)
        #expect(failures.first?.journalDamage?.reason == .checksum)
        #expect(failures.first?.message.hasPrefix("records 5..5 ") == true)
        #expect(failures.first?.message.contains("offset \(JournalFormat.headerSize + 4 * frameSize)") == true)
        #expect(try Journal.statusForTests(disk.location()).damaged.map { [$0.from, $0.to] } == [[5, 5]])
        // Appending goes on: the damage is not in the last segment.
        #expect(try writer.append([payload(100)]) == 101...101)
    }

    @Test func damageInTheMiddleOfTheLastSegmentStopsAppendsWithoutTruncating() throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append((0..<5).map { payload($0) })
        let size = try fileSize(disk.segment(1))
        try flipByte(at: JournalFormat.headerSize + 22, in: disk.segment(1))
        do {
            _ = try disk.writer().append([payload(5)])
            Issue.record("appended after damage")
        } catch let error as WormholeError {
            #expect(error.code == .journalCorrupt && error.value == disk.segment(1))
        }
        #expect(try fileSize(disk.segment(1)) == size)
    }

    @Test(arguments: [
        "notes.txt", "00000000000000000001.seg.bak", "events.cursor.old", "1.seg", "00000000000000000000.seg",
    ])
    func aForeignFileIsRefusedByName(name: String) throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append([payload(0)])
        _ = FileManager.default.createFile(atPath: disk.directory() + "/" + name, contents: Data("x".utf8))
        for attempt in 0..<3 {
            do {
                switch attempt {
                case 0: _ = try disk.reader()
                case 1: _ = try disk.writer().append([payload(1)])
                default: _ = try Journal.statusForTests(disk.location())
                }
                Issue.record("attempt \(attempt) accepted a journal with '\(name)' in it")
            } catch let error as WormholeError {
                #expect(error.code == .journalCorrupt)
                #expect(error.value == disk.directory() + "/" + name)
            }
        }
    }

    /// Found by fuzzing (Tests/fuzz.sh journal): a record numbered 2^64 − 1 overflowed the
    /// scanner's next sequence number and crashed readers and appenders. It is damage.
    @Test func aRecordNumberedPastTheLargestSequenceIsDamageNotACrash() throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append([payload(0)])
        let first = JournalFormat.maximumSequence
        var bytes = JournalFormat.header(first: first)
        JournalFormat.appendFrame(sequence: first, time: 0, payload: payload(1), to: &bytes)
        JournalFormat.appendFrame(sequence: first + 1, time: 0, payload: payload(2), to: &bytes)
        JournalFormat.appendFrame(sequence: 7, time: 0, payload: payload(3), to: &bytes)
        #expect(
            FileManager.default.createFile(
                atPath: disk.segment(first), contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
        do {
            _ = try disk.writer().append([payload(4)])
            Issue.record("appended after a record numbered 2^64 - 1")
        } catch let error as WormholeError {
            #expect(error.code == .journalCorrupt && error.value == disk.segment(first))
            #expect(error.message.contains("18446744073709551615"))
        }
        #expect(try disk.reader(from: .end).poll().isEmpty)
        let reader = try disk.reader(from: .sequence(first))
        #expect(try reader.poll().map(\.sequence) == [first])
        let damage = #expect(throws: WormholeError.self) { try reader.poll() }
        #expect(damage?.code == .journalDamaged && damage?.value == disk.segment(first))
        #expect(damage?.message.contains("18446744073709551615") == true)
        // Reported once; nothing readable follows.
        #expect(try reader.poll().isEmpty)
    }

    /// A last segment starting at 2^64 − 2 (a crafted name) takes that one record, then appends
    /// are refused: no record is numbered past the largest sequence number.
    @Test func appendsStopAtTheLargestSequenceNumber() throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append([payload(0)])
        let first = JournalFormat.maximumSequence
        let header = Data(JournalFormat.header(first: first))
        #expect(
            FileManager.default.createFile(
                atPath: disk.segment(first), contents: header, attributes: [.posixPermissions: 0o600]))
        let writer = try disk.writer()
        #expect(try writer.append([payload(1)]) == first...first)
        let size = try fileSize(disk.segment(first))
        let refusal = #expect(throws: WormholeError.self, "appended past the largest sequence number") {
            try writer.append([payload(2)])
        }
        #expect(refusal?.code == .journalCorrupt && refusal?.value == disk.segment(first))
        #expect(try fileSize(disk.segment(first)) == size)
        #expect(try drain(try disk.reader(from: .sequence(first))).map(\.sequence) == [first])
    }

    @Test func aSegmentOfANewerFormatVersionIsRefusedNamingTheVersion() throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append([payload(0)])
        let fd = open(disk.segment(1), O_RDWR)
        var version: UInt8 = 2
        #expect(pwrite(fd, &version, 1, 4) == 1)
        close(fd)
        for attempt in 0..<2 {
            do {
                if attempt == 0 { _ = try disk.reader().poll() } else { _ = try disk.writer().append([payload(1)]) }
                Issue.record("a version 2 segment was accepted")
            } catch let error as WormholeError {
                #expect(error.code == .journalVersion)
                #expect(error.value == disk.segment(1))
                #expect(error.message.contains("version 2"))
            }
        }
    }

    @Test func recordsOverTheMaximumSizeAreRefusedBeforeAnythingIsWritten() throws {
        let disk = try JournalDisk()
        let writer = try disk.writer()
        _ = try writer.append([payload(0)])
        let size = try fileSize(disk.segment(1))
        let big = Data(repeating: UInt8(ascii: "1"), count: Journal.maximumRecordSize + 1)
        do {
            _ = try writer.append([payload(1), big])
            Issue.record("accepted a record over the maximum")
        } catch {
            #expect(error.code == .recordTooLarge && error.value == String(Journal.maximumRecordSize + 1))
        }
        #expect(try fileSize(disk.segment(1)) == size)
        let largest = Data(repeating: UInt8(ascii: "1"), count: Journal.maximumRecordSize)
        #expect(try writer.append([largest]) == 2...2)
        #expect(try drain(try disk.reader()).map(\.payload.count) == [payload(0).count, Journal.maximumRecordSize])
    }

    @Test func retentionRemovesWholeOldSegmentsAndAReaderBehindGetsAGapReport() throws {
        let disk = try JournalDisk()
        let options = Journal.Options(segmentSize: 4096, retention: Journal.Retention(maximumRecords: 50))
        let writer = try disk.writer(options: options)
        _ = try writer.append([payload(0, size: 80)])
        let behind = try disk.reader()
        #expect(try behind.poll(maximumRecords: 1).map(\.sequence) == [1])
        for n in 1..<400 { _ = try writer.append([payload(n, size: 80)]) }
        let segments = try disk.segments()
        let firstKept = JournalFormat.segmentSequence(segments[0])!
        #expect(firstKept > 1 && firstKept <= 400 - 50 + 1, "kept from \(firstKept)")
        // The reader still holds segment 1 open; after it, the next segments are gone.
        var delivered: [UInt64] = [1]
        var gap: WormholeError?
        while true {
            do {
                let batch = try behind.poll()
                if batch.isEmpty { break }
                delivered += batch.map(\.sequence)
            } catch {
                #expect(gap == nil, "one gap report")
                gap = error
            }
        }
        #expect(gap?.code == .journalGap)
        #expect(gap?.value == String(firstKept))
        let beforeGap = delivered.filter { $0 < firstKept }
        #expect(beforeGap == Array(1...UInt64(beforeGap.count)))
        #expect(delivered.filter { $0 >= firstKept } == Array(firstKept...400))
        #expect(gap?.message.hasPrefix("records \(beforeGap.count + 1)..\(firstKept - 1) ") == true)
        #expect(gap?.journalDamage?.reason == .retention)
        // A reader asking for a removed record gets the report first, then the first available.
        let late = try disk.reader(from: .sequence(2))
        #expect(throws: WormholeError.self) { try late.poll() }
        #expect(try late.poll().first?.sequence == firstKept)
        // .beginning never reports a gap.
        #expect(try disk.reader(from: .beginning).poll().first?.sequence == firstKept)
    }

    @Test func trimBySizeAndAgeKeepsTheLastSegment() throws {
        let disk = try JournalDisk()
        let writer = try disk.writer(options: Journal.Options(segmentSize: 4096))
        for n in 0..<200 { _ = try writer.append([payload(n, size: 80)]) }
        let before = try disk.segments()
        let removed = try writer.trim(Journal.Retention(maximumBytes: 10_000))
        let after = try disk.segments()
        #expect(removed == Array(before.prefix(removed.count)))
        #expect(after == Array(before.dropFirst(removed.count)))
        let total = try after.map { try fileSize(disk.directory() + "/" + $0) }.reduce(0, +)
        #expect(total <= 10_000 && total > 10_000 - 4096 - 200)
        let all = try writer.trim(Journal.Retention(maximumAge: 0))
        #expect(try disk.segments() == [after.last!])
        #expect(all.count == after.count - 1)
        #expect(try writer.append([payload(200)]) == 201...201)
    }

    @Test func aDurableConsumerKilledMidBatchGetsThatBatchAgainFlaggedAndNothingElse() throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append((0..<600).map { payload($0) })
        let location = try disk.location()
        do {
            let first = try JournalConsumerCore(
                location: location, start: .beginning, consumer: "indexer", synchronized: false)
            let batch = try first.nextBatch()
            #expect(batch.count == JournalConsumerCore.batchSize)
            #expect(batch.allSatisfy { !$0.isRedelivery })
            let second = try first.nextBatch()  // the first batch handled: acknowledged now
            #expect(second.first?.record.sequence == UInt64(JournalConsumerCore.batchSize) + 1)
            // Dropped without acknowledging the second batch: a crash.
        }
        let cursor = try String(contentsOfFile: disk.directory() + "/indexer.cursor", encoding: .utf8)
        #expect(cursor == "{\"format\":1,\"acknowledged\":256,\"delivering\":512}\n")
        let restarted = try JournalConsumerCore(
            location: location, start: .end, consumer: "indexer", synchronized: false)
        let again = try restarted.nextBatch()
        #expect(again.map(\.record.sequence) == Array(257...512))
        #expect(again.allSatisfy { $0.isRedelivery })
        let rest = try restarted.nextBatch()
        #expect(rest.map(\.record.sequence) == Array(513...600))
        #expect(rest.allSatisfy { !$0.isRedelivery })
        #expect(try restarted.nextBatch().isEmpty)
        let stored = try String(contentsOfFile: disk.directory() + "/indexer.cursor", encoding: .utf8)
        #expect(stored == "{\"format\":1,\"acknowledged\":600,\"delivering\":600}\n")
    }

    @Test func aNewDurableConsumerStoresItsStartAtOnce() throws {
        let disk = try JournalDisk()
        let writer = try disk.writer()
        _ = try writer.append((0..<5).map { payload($0) })
        let location = try disk.location()
        do { _ = try JournalConsumerCore(location: location, start: .end, consumer: "late", synchronized: false) }
        _ = try writer.append([payload(5)])
        let restarted = try JournalConsumerCore(location: location, start: .end, consumer: "late", synchronized: false)
        #expect(try restarted.nextBatch().map(\.record.sequence) == [6])
    }

    @Test func aConsumerNameIsUsedByOneReaderAtATime() throws {
        let disk = try JournalDisk()
        let location = try disk.location()
        let first = try JournalConsumerCore(
            location: location, start: .beginning, consumer: "solo", synchronized: false)
        do {
            _ = try JournalConsumerCore(location: location, start: .beginning, consumer: "solo", synchronized: false)
            Issue.record("two readers of one consumer")
        } catch {
            #expect(error.code == .consumerBusy && error.value == "solo")
        }
        withExtendedLifetime(first) {}
        #expect(throws: WormholeError.self) {
            try JournalConsumerCore(location: location, start: .beginning, consumer: "a/b", synchronized: false)
        }
    }

    @Test(arguments: [
        "not json", "{\"format\":2,\"acknowledged\":1,\"delivering\":1}",
        "{\"format\":1,\"acknowledged\":-1,\"delivering\":1}",
        "{\"format\":1,\"acknowledged\":1.5,\"delivering\":2}", "{\"format\":1,\"acknowledged\":3,\"delivering\":2}",
        "",
        // Found by fuzzing: acknowledged + 1 overflowed (a crash, not an error).
        "{\"format\":1,\"acknowledged\":18446744073709551615,\"delivering\":18446744073709551615}",
    ])
    func aCursorFileThatDoesNotParseIsRefusedNamingIt(content: String) throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append((0..<5).map { payload($0) })
        let path = disk.directory() + "/broken.cursor"
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(content.utf8), attributes: [.posixPermissions: 0o600])
        do {
            _ = try JournalConsumerCore(
                location: try disk.location(), start: .beginning, consumer: "broken", synchronized: false)
            Issue.record("accepted cursor '\(content)'")
        } catch let error as WormholeError {
            #expect(error.code == .invalidCursor && error.value == path)
        }
    }

    /// The issue's case: a record a durable consumer stored is cut at the tail (a torn frame);
    /// the next append must not take its number again, or the consumer would skip it silently.
    @Test func aCutRecordAConsumerStoredIsNeverNumberedAgain() throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append((0..<3).map { payload($0) })
        do {
            let core = try JournalConsumerCore(
                location: try disk.location(), start: .beginning, consumer: "c", synchronized: false)
            #expect(try core.nextBatch().map(\.record.sequence) == [1, 2, 3])
            try core.acknowledgeHandedOut()
        }
        // Cut the last frame in half: a torn tail the next appender repairs.
        let size = try fileSize(disk.segment(1))
        #expect(truncate(disk.segment(1), off_t(size - 10)) == 0)
        #expect(try disk.writer().append([payload(3)]) == 4...4)
        // The consumer, restarted, gets the new record (not skipped as "3, already handled").
        let core = try JournalConsumerCore(
            location: try disk.location(), start: .beginning, consumer: "c", synchronized: false)
        #expect(try core.nextBatch().map(\.record.sequence) == [4])
        let status = try Journal.statusForTests(disk.location())
        #expect(status.damaged.map { [$0.from, $0.to] } == [[3, 3]] && status.damaged.first?.reason == .truncated)
        #expect(status.last == 4 && status.readable == 3)
        // Without a consumer that stored it, a torn frame was never a record: its number is reused.
        let other = try JournalDisk()
        _ = try other.writer().append((0..<3).map { payload($0) })
        #expect(truncate(other.segment(1), off_t(try fileSize(other.segment(1)) - 10)) == 0)
        #expect(try other.writer().append([payload(3)]) == 3...3)
        #expect(try Journal.statusForTests(other.location()).damaged.isEmpty)
    }

    /// A cursor past the last whole record (a frame it read was cut since) is not an error: the
    /// consumer waits there, and the next append numbers after it (contract §6, v1.2).
    @Test func aCursorPastTheEndWaitsAndTheNextAppendNumbersAfterIt() throws {
        let disk = try JournalDisk()
        _ = try disk.writer().append((0..<5).map { payload($0) })
        let path = disk.directory() + "/ahead.cursor"
        let text = "{\"format\":1,\"acknowledged\":9,\"delivering\":9}"
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let core = try JournalConsumerCore(
            location: try disk.location(), start: .beginning, consumer: "ahead", synchronized: false)
        #expect(try core.nextBatch().isEmpty)
        #expect(try disk.writer().append([payload(5)]) == 10...10)
        #expect(try core.nextBatch().map(\.record.sequence) == [10])
        // Another reader is told that 6...9 are gone.
        let reader = try disk.reader()
        #expect(try reader.poll().map(\.sequence) == [1, 2, 3, 4, 5])
        let error = #expect(throws: WormholeError.self) { try reader.poll() }
        #expect(
            error?.journalDamage
                == JournalDamage(
                    from: 6, to: 9, file: JournalFormat.segmentName(1), reason: .truncated,
                    detail: error?.journalDamage?.detail ?? ""))
        #expect(try reader.poll().map(\.sequence) == [10])
    }

    @Test func groupCommitRecordsWhatWasSynchronised() async throws {
        let disk = try JournalDisk()
        let writer = try disk.writer(options: Journal.Options(durability: .fdatasync))
        // Four threads at once, on Dispatch threads: each append waits for a disk sync, which must
        // not hold up Swift's cooperative pool (and the other tests on it).
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                DispatchQueue.concurrentPerform(iterations: 4) { thread in
                    for n in 0..<25 { _ = try? writer.append([payload(thread * 100 + n)]) }
                }
                continuation.resume()
            }
        }
        let records = try drain(try disk.reader())
        #expect(records.map(\.sequence) == Array(1...100))
        #expect(Set(numbers(records)).count == 100)
        let stored = try Data(contentsOf: URL(fileURLWithPath: disk.directory() + "/sync.lock"))
        #expect(stored.count == JournalFormat.syncPositionSize)
        let position = JournalFormat.parseSyncPosition([UInt8](stored), checked: true)
        #expect(position?.segment == 1)
        // The last sync covered every record, and never more than whole frames.
        #expect(position?.offset == UInt64(try fileSize(disk.segment(1))))
    }

    /// Without a bus (its socket missing), appends go on, and `flush` says the readers were not
    /// told, once per round of appends: the first post fails to connect, the later ones are
    /// skipped for the same reason (no post is queued per append).
    @Test func withoutABusAppendsGoOnAndFlushSaysReadersWereNotTold() throws {
        let disk = try JournalDisk()
        let center = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(JournalDisk.group), containerRoot: disk.root.path,
            busAddress: try BusAddress("unix:path=\(disk.root.path)/no-bus-here"))
        let journal = center.journal("events")
        for n in 1...50 { #expect(try journal.append(["n": n]) == UInt64(n)) }
        #expect(journal.flush() != nil)
        #expect(journal.flush() == nil)
        for n in 51...100 { #expect(try journal.append(["n": n]) == UInt64(n)) }
        #expect(journal.flush() != nil)
        #expect(try drain(try disk.reader()).map(\.sequence) == Array(1...100))
    }
}

extension Journal {
    /// The status of a journal, as `Journal.status()` reads it.
    static func statusForTests(_ location: JournalLocation) throws -> JournalStatus {
        try JournalStatus.read(location)
    }
}

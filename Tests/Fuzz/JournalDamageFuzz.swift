// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: reading a journal past damage (contract §6, v1.2). Built with the whole
// Wormhole module by Tests/fuzz.sh (target `journaldamage`).
//
// The input's first two bytes choose a journal (1 to 64 records of 20 to 1,000 bytes, 4 KiB
// segments: up to ~16 segments), written by the real appender; the rest, in groups of four
// bytes, up to six damages to its segments: cut the file (anywhere, the header included),
// remove it, put a FIFO, a directory or a symlink in its place, flip a byte, overwrite its
// header, or append garbage. A reader from the beginning then polls until it has nothing more.
// Invariants, for every input:
// - nothing crashes, and the reader ends (no endless report loop);
// - records come in increasing order, each exactly the payload appended with its number;
// - nothing is skipped silently: from the first number delivered or reported to the reader's
//   end, every number is delivered or inside exactly one reported range, ranges in order;
// - every record of a segment no damage touched is delivered;
// - `check()` (a second reader, as `journal check` does) reports the same ranges.

import Foundation
import Glibc
import Logging

private let root: String = {
    let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
    var template = Array((base + "/wormhole-damage-XXXXXX").utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { fatalError("mkdtemp") }
    return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}()

private let location: JournalLocation = {
    var logger = Logger(label: "fuzz")
    logger.logLevel = .critical
    do {
        return JournalLocation(
            container: try GroupContainer(group: GroupIdentifier("group.fuzz"), root: root),
            directory: try WormholeDirectoryName("w"), identifier: try MessageIdentifier("j"), logger: logger)
    } catch {
        fatalError("location: \(error)")
    }
}()

private func removeTree(_ path: String) {
    _ = try? FileManager.default.removeItem(atPath: path)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJournalDamage(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard input.count >= 2 else { return 0 }
    removeTree(location.path)
    let count = Int(input[0] % 64) + 1
    let pad = Int(input[1] % 8) * 125
    var payloads: [UInt64: Data] = [:]
    let writer = JournalWriter(location: location, options: Journal.Options(segmentSize: 4096))
    for n in 1...count {
        let payload = Data(("{\"n\":\(n),\"p\":\"" + String(repeating: "p", count: pad) + "\"}").utf8)
        do {
            let range = try writer.append([payload])
            payloads[range.lowerBound] = payload
        } catch {
            fatalError("append: \(error)")
        }
    }
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: location.path)) ?? [])
        .filter { $0.hasSuffix(".seg") }.sorted()
    let firsts = names.compactMap { JournalFormat.segmentSequence($0) }
    var touched = Set<String>()
    var index = 2
    while index + 4 <= input.count && touched.count < 6 {
        let kind = input[index] % 8
        let name = names[Int(input[index + 1]) % names.count]
        let path = location.path + "/" + name
        let offset = Int(input[index + 2]) | Int(input[index + 3]) << 8
        index += 4
        touched.insert(name)
        let fileSize = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        switch kind {
        case 1: removeTree(path)
        case 2:
            removeTree(path)
            _ = mkfifo(path, 0o600)
        case 3:
            removeTree(path)
            _ = mkdir(path, 0o700)
        case 4:
            removeTree(path)
            _ = symlink(names[0], path)
        default:
            // Never through a symlink planted before: that would damage the segment it names.
            let descriptor = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            var status = stat()
            guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
            if kind == 0 {
                _ = ftruncate(descriptor, off_t(offset % max(1, fileSize)))
            } else if kind == 5, fileSize > 0 {
                var byte: UInt8 = 0
                let at = off_t(offset % fileSize)
                _ = pread(descriptor, &byte, 1, at)
                byte ^= UInt8(1 << (offset % 8))
                _ = pwrite(descriptor, &byte, 1, at)
            } else if kind == 6 {
                var garbage = [UInt8](repeating: UInt8(truncatingIfNeeded: offset), count: 16)
                _ = pwrite(descriptor, &garbage, 16, 0)
            } else {
                var garbage = (0..<(offset % 300)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ offset) }
                _ = pwrite(descriptor, &garbage, garbage.count, off_t(fileSize))
            }
        }
    }

    // Read everything, as `listen --journal --from start` does.
    let reader: JournalReader
    do {
        reader = try JournalReader(location: location, start: .beginning)
    } catch {
        return 0  // A journal that cannot be opened at all (a foreign entry name) is refused, named.
    }
    var delivered: [UInt64] = []
    var reported: [JournalDamage] = []
    var polls = 0
    while true {
        polls += 1
        if polls > 10_000 {
            fatalError("the reader does not end: \(delivered.count) records, \(reported.count) reports")
        }
        do {
            let batch = try reader.poll(maximumRecords: 7)
            if batch.isEmpty { break }
            for record in batch {
                guard payloads[record.sequence] == record.payload else {
                    fatalError("record \(record.sequence) is not the payload appended with that number")
                }
                if let last = delivered.last, record.sequence <= last {
                    fatalError("record \(record.sequence) after \(last)")
                }
                delivered.append(record.sequence)
            }
        } catch {
            guard let damage = error.journalDamage else {
                if error.code == .journalVersion || error.code == .io { return 0 }
                fatalError("a poll threw without a range: \(error)")
            }
            guard error.message.hasPrefix("records \(damage.from)..\(damage.to) ") else {
                fatalError("message: \(error.message)")
            }
            reported.append(damage)
        }
    }
    // Nothing skipped silently: every number is delivered or in one range, in order.
    var events: [(from: UInt64, to: UInt64)] = delivered.map { ($0, $0) } + reported.map { ($0.from, $0.to) }
    events.sort { $0.from < $1.from }
    if let firstEvent = events.first {
        var expected = firstEvent.from
        for event in events {
            guard event.from == expected, event.to >= event.from else {
                fatalError(
                    "numbers \(expected)..\(event.from) neither delivered nor reported (or overlap): \(reported)")
            }
            expected = event.to &+ 1
        }
        if expected < reader.nextSequence {
            fatalError("numbers \(expected)..<\(reader.nextSequence) passed silently")
        }
    }
    // Every record of an untouched segment is delivered.
    let deliveredSet = Set(delivered)
    for (position, name) in names.enumerated() where !touched.contains(name) {
        let first = firsts[position]
        let end = position + 1 < firsts.count ? firsts[position + 1] : UInt64(count) + 1
        for sequence in first..<end where !deliveredSet.contains(sequence) {
            fatalError("record \(sequence) of untouched segment \(name) was not delivered; reports \(reported)")
        }
    }
    // `journal check` finds the same ranges.
    do {
        let checked = try JournalReader(location: location, start: .beginning).check().damaged
        let fromPolls = reported.map { [$0.from, $0.to] }
        if checked.map({ [$0.from, $0.to] }) != fromPolls { fatalError("check \(checked) != polls \(reported)") }
    } catch {
        fatalError("check threw \(error)")
    }
    return 0
}

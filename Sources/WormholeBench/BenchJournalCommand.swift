// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Dispatch
import Foundation
import Glibc
import Synchronization
import Wormhole

/// The processes of the journal suite (run by the bench), one `--mode` each:
///
/// - `append-loop`: appends `{"p":PID,"i":I}` forever, `--batch` records per append, writing
///   `SEQUENCE PID I` per record on standard output once its append returned (the bench kills it).
/// - `consume`: a durable consumer `--consumer` from the beginning; per record writes
///   `SEQUENCE REDELIVERY(0|1) OK(1|0)` (OK: the message is `{"n":SEQUENCE-1}`); with `--count`,
///   exits 0 after record `--count`.
/// - `fanout`: an in-process cursor from the beginning; once `--count` records arrived, writes
///   `RECORDS INORDER DUPLICATES` (INORDER 1 when sequence numbers ran 1…count and each appender's
///   records came in its order) and exits.
/// - `rate`: `ready` once connected, waits for a shared lock on `--go` (the bench holds it
///   exclusively until every appender is ready), appends `--count` 100-byte records `--batch` at a
///   time from `--threads` threads (`--fsync`: `fdatasync` with group commit; `--documents`: the
///   records made as `JSONDocument`s before `ready`, so the rate is the journal's alone, without
///   the JSON encoder), prints `START END COUNT CPU` (monotonic ns; CPU: nanoseconds of user and
///   system time of the whole process, every thread, from START to END).
/// - `echo`: appends each record of journal `ping` (from the end) to journal `pong`.
struct BenchJournalCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-journal", shouldDisplay: false)

    enum Mode: String, ExpressibleByArgument {
        case appendLoop = "append-loop"
        case consume, fanout, rate, echo
    }

    @Option var mode: Mode
    @Option var group: String
    @Option var root: String
    @Option var identifier = "events"
    @Option var batch = 1
    @Option var count = 0
    @Option var consumer = "bench"
    @Option var go = ""
    @Option var threads = 1
    @Flag var fsync = false
    @Flag var documents = false
    @OptionGroup var bus: BusOptions

    private static func writeOut(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(1, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                Foundation.exit(1)
            }
            offset += written
        }
    }

    /// User and system time of this process (every thread) so far, in nanoseconds.
    private static func processCPU() -> UInt64 {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let micros =
            (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + usage.ru_utime.tv_usec
            + usage.ru_stime.tv_usec
        return UInt64(micros) * 1_000
    }

    func run() throws {
        let address = try bus.required()
        let journal = try LibraryAPI.journal(
            group: group, root: root, address: address, identifier: identifier, synchronized: fsync)
        switch mode {
        case .appendLoop:
            let pid = Int(getpid())
            var next = 0
            while true {
                let messages = (next..<(next + batch)).map { ["p": pid, "i": $0] }
                let range = try LibraryAPI.append(journal, contentsOf: messages)
                var lines = ""
                for (offset, sequence) in range.enumerated() { lines += "\(sequence) \(pid) \(next + offset)\n" }
                Self.writeOut(lines)
                next += batch
            }
        case .consume:
            let last = UInt64(count)
            let listener = try LibraryAPI.listen(journal, from: .beginning, consumer: consumer) { result in
                switch result {
                case .success(let record):
                    let ok = record.message.compactText == "{\"n\":\(record.sequence - 1)}"
                    Self.writeOut("\(record.sequence) \(record.isRedelivery ? 1 : 0) \(ok ? 1 : 0)\n")
                    if record.sequence == last { Foundation.exit(0) }
                case .failure(let error):
                    Console.progress("consume: \(error)")
                    Foundation.exit(2)
                }
            }
            HelperProcess.announceReadyAndServe(keeping: (journal, listener))
        case .fanout:
            struct Tally {
                var next: UInt64 = 1
                var inOrder = true
                var seen = Set<[Int]>()
                var duplicates = 0
                var lastByProcess: [Int: Int] = [:]
            }
            let tally = Mutex(Tally())
            let total = count
            let listener = try LibraryAPI.listen(journal, from: .beginning, consumer: nil) { result in
                guard case .success(let record) = result else {
                    Console.progress("fanout: \(result)")
                    Foundation.exit(2)
                }
                let object = (try? JSONSerialization.jsonObject(with: record.message.data)) as? [String: Any] ?? [:]
                let pair = [object["p"] as? Int ?? -1, object["i"] as? Int ?? -1]
                let finished = tally.withLock { tally -> String? in
                    if record.sequence != tally.next { tally.inOrder = false }
                    tally.next = record.sequence + 1
                    if !tally.seen.insert(pair).inserted { tally.duplicates += 1 }
                    if let previous = tally.lastByProcess[pair[0]], previous >= pair[1] { tally.inOrder = false }
                    tally.lastByProcess[pair[0]] = pair[1]
                    guard tally.seen.count + tally.duplicates >= total else { return nil }
                    return "\(tally.seen.count + tally.duplicates) \(tally.inOrder ? 1 : 0) \(tally.duplicates)\n"
                }
                if let finished {
                    Self.writeOut(finished)
                    Foundation.exit(0)
                }
            }
            HelperProcess.announceReadyAndServe(keeping: (journal, listener))
        case .rate:
            _ = try journal.status()
            let pid = Int(getpid())
            let pad = String(repeating: "x", count: 68)
            let (count, batch, threads) = (self.count, self.batch, self.threads)
            let share = { @Sendable (thread: Int) in count / threads + (thread < count % threads ? 1 : 0) }
            // With `--documents`, each thread's records encoded now (the same bytes as the Codable path).
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes]
            let prepared: [[JSONDocument]] =
                documents
                ? try (0..<threads).map { thread in
                    try (0..<share(thread)).map { i in
                        try JSONDocument(data: encoder.encode(BenchRecord(p: pid, i: thread * 1_000_000 + i, pad: pad)))
                    }
                } : []
            try StartGate.pass(go)
            let start = MonotonicClock.now()
            let cpuAtStart = Self.processCPU()
            // `--threads` threads of this process append at once, `--count` records in all.
            let failure = Mutex<(any Error)?>(nil)
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                let share = share(thread)
                var done = 0
                do {
                    while done < share {
                        let size = min(batch, share - done)
                        if documents {
                            if size == 1 {
                                try LibraryAPI.append(journal, document: prepared[thread][done])
                            } else {
                                try LibraryAPI.append(journal, documents: Array(prepared[thread][done..<(done + size)]))
                            }
                            done += size
                            continue
                        }
                        // About 100 bytes each: {"p":PID,"i":I,"pad":"xxx…"}.
                        let messages = (done..<(done + size)).map {
                            BenchRecord(p: pid, i: thread * 1_000_000 + $0, pad: pad)
                        }
                        if size == 1 {
                            try LibraryAPI.append(journal, messages[0])
                        } else {
                            try LibraryAPI.append(journal, contentsOf: messages)
                        }
                        done += size
                    }
                } catch {
                    failure.withLock { $0 = error }
                }
            }
            if let error = failure.withLock({ $0 }) { throw BenchFailure("append failed: \(error)") }
            let end = MonotonicClock.now()
            let cpu = Self.processCPU() - cpuAtStart
            _ = journal.flush()
            Console.output("\(start) \(end) \(count) \(cpu)")
        case .echo:
            let pong = try LibraryAPI.journal(group: group, root: root, address: address, identifier: "pong")
            let listener = try LibraryAPI.listen(journal, from: .end, consumer: nil) { result in
                guard case .success(let record) = result else { return }
                if record.message.compactText.contains("18446744073709551615") { Foundation.exit(0) }
                _ = try? pong.append(record.message)
            }
            HelperProcess.announceReadyAndServe(keeping: (journal, pong, listener))
        }
    }
}

/// A record of the rate rows: about 100 bytes of JSON.
struct BenchRecord: Codable, Sendable {
    var p: Int
    var i: Int
    var pad: String
}

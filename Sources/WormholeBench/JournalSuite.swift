// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Wormhole
import WormholeDBus

/// The journal (issue 10): records lost, corrupt or duplicated without a flag across SIGKILLs of
/// appenders and of durable consumers; 8 appender processes and 8 consumers; appends/s from 8
/// processes with and without `fdatasync`; append -> consumer latency against the mailbox path.
struct JournalSuite: BenchSuite {
    let context: BenchContext
    static let group = "group.org.wormhole.bench"

    func run() throws {
        let parts = options.selectedJournalParts
        Console.output("\njournal (segments with CRC-32C frames, flock-serialised appenders, lock-free readers)")
        if parts.contains("kills") {
            try appenderKills(options.journalKills)
            try consumerKills(options.journalKills)
        }
        if parts.contains("fanout") { try fanout(processes: 8, records: options.journalRecords) }
        if parts.contains("rates") || parts.contains("durable") {
            Console.output(
                "\nappends/s of 100 B records in \(NSTemporaryDirectory()) (JSON documents: made before the clock "
                    + "starts, the journal's own rate; Codable: encoded by each append)")
        }
        // processes, batch, fdatasync, threads per process, JSON documents, goal (appends/s, at least).
        let rows: [(Int, Int, Bool, Int, Bool, Double?)] = [
            (1, 1, false, 1, true, 150_000), (1, 1, false, 1, false, nil),
            (8, 1, false, 1, true, 250_000), (8, 1, false, 1, false, nil), (8, 100, false, 1, false, 250_000),
            (8, 1, true, 1, false, 10_000), (8, 1, true, 8, false, 10_000), (8, 100, true, 1, false, 10_000),
        ]
        for (processes, batch, fsync, threads, documents, goal) in rows
        where parts.contains(fsync ? "durable" : "rates") {
            // One process appends 4 times as many as each of 8; with fdatasync, a twentieth.
            let appends = (processes == 1 ? 4 : 1) * (fsync ? options.journalAppends / 20 : options.journalAppends)
            try rate(
                processes: processes, appends: appends, batch: batch, fsync: fsync, threads: threads,
                documents: documents, goal: goal)
        }
        if parts.contains("durable") {
            try durableAgainstFloor(records: max(50, options.journalAppends / 100), rounds: 3)
        }
        if parts.contains("latency") { try latency() }
    }

    private func helper(_ root: String, _ mode: String, _ extra: [String] = []) -> [String] {
        [
            "_bench-journal", "--mode", mode, "--group", Self.group, "--root", root, "--bus-address",
            address.rawValue,
        ]
            + extra
    }

    private func journal(_ root: String, _ identifier: String = "events") throws -> Journal {
        try LibraryAPI.journal(group: Self.group, root: root, address: address, identifier: identifier)
    }

    /// SIGKILLs an appender at a random instant (up to 5 ms after its first acknowledged append),
    /// `kills` times, then reads the journal: every acknowledged record must be there with its
    /// content, with no gap (the reader checks sequence numbers and checksums) and none twice.
    private func appenderKills(_ kills: Int) throws {
        guard kills > 0 else { return }
        let work = try ScratchDirectory("journal")
        var acknowledged: [UInt64: [Int]] = [:]
        for kill in 0..<kills {
            if kill % 100 == 0 { Console.progress("journal: appender kill \(kill + 1)/\(kills)") }
            let batch = kill % 2 == 0 ? "1" : "7"
            let child = try ChildProcess(
                executable: Executables.current, arguments: helper(work.path, "append-loop", ["--batch", batch]))
            guard let first = try child.output.readLine(timeoutSeconds: 60) else {
                throw BenchFailure("an appender exited before its first append (status \(child.waitForExit()))")
            }
            usleep(UInt32.random(in: 0..<5_000))
            child.terminate(signal: SIGKILL)
            for line in [String(decoding: first, as: UTF8.self)] + (try child.readAllOutput()) {
                let fields = line.split(separator: " ")
                guard fields.count == 3, let sequence = UInt64(fields[0]), let p = Int(fields[1]),
                    let i = Int(fields[2])
                else { continue }
                acknowledged[sequence] = [p, i]
            }
        }
        Console.progress("journal: reading back \(acknowledged.count) acknowledged records")
        var (lost, corrupt, duplicated) = (0, 0, 0)
        var damage: String?
        var records: [JournalRecord<JSONDocument>] = []
        do {
            records = try LibraryAPI.records(try journal(work.path), from: 1)
        } catch {
            damage = "\(error)"
        }
        let pairs = records.map { record -> [Int] in
            let object = (try? JSONSerialization.jsonObject(with: record.message.data)) as? [String: Any] ?? [:]
            return [object["p"] as? Int ?? -1, object["i"] as? Int ?? -1]
        }
        var seen = Set<[Int]>()
        for pair in pairs where !seen.insert(pair).inserted { duplicated += 1 }
        for (sequence, pair) in acknowledged {
            if sequence > records.count {
                lost += 1
            } else if pairs[Int(sequence) - 1] != pair {
                corrupt += 1
            }
        }
        if damage != nil { corrupt += 1 }
        Console.output(
            "appender kills: \(kills) SIGKILLs at random instants, \(acknowledged.count) acknowledged records, "
                + "\(records.count) in the journal: \(lost) lost, \(corrupt) corrupt, \(duplicated) duplicated"
                + (damage.map { " (read failed: \($0))" } ?? ""))
        let count = acknowledged.count
        report.figure(
            "journal", "appender kills: acknowledged records lost", value: Double(lost), unit: "count", count: count,
            target: 0)
        report.figure(
            "journal", "appender kills: records corrupt", value: Double(corrupt), unit: "count", count: count, target: 0
        )
        report.figure(
            "journal", "appender kills: records duplicated", value: Double(duplicated), unit: "count", count: count,
            target: 0)
    }

    /// SIGKILLs a durable consumer at a random instant (up to 5 ms after its first record),
    /// `kills` times, topping the journal up as it is read, then lets one read to the end: every
    /// record must have been seen, every second sighting flagged, every message intact.
    private func consumerKills(_ kills: Int) throws {
        guard kills > 0 else { return }
        let work = try ScratchDirectory("journal")
        let journal = try journal(work.path)
        var appended: UInt64 = 0
        func topUp(to wanted: UInt64) throws {
            while appended < wanted {
                let start = Int(appended)
                try LibraryAPI.append(journal, contentsOf: (start..<(start + 1000)).map { ["n": $0] })
                appended += 1000
            }
        }
        var seen = Set<UInt64>()
        var highest: UInt64 = 0
        var (unflagged, corrupt, flagged, skipped) = (0, 0, 0, 0)
        func account(_ lines: [String]) {
            for line in lines {
                let fields = line.split(separator: " ").compactMap { UInt64($0) }
                guard fields.count == 3 else { continue }
                if fields[0] > highest + 1 { skipped += 1 }
                if fields[2] != 1 { corrupt += 1 }
                if !seen.insert(fields[0]).inserted {
                    if fields[1] == 1 { flagged += 1 } else { unflagged += 1 }
                }
                highest = max(highest, fields[0])
            }
        }
        for kill in 0..<kills {
            if kill % 100 == 0 { Console.progress("journal: consumer kill \(kill + 1)/\(kills)") }
            try topUp(to: highest + 20_000)
            let child = try ChildProcess(executable: Executables.current, arguments: helper(work.path, "consume"))
            guard let first = try child.output.readLine(timeoutSeconds: 60) else {
                throw BenchFailure("a consumer exited before its first record (status \(child.waitForExit()))")
            }
            usleep(UInt32.random(in: 0..<5_000))
            child.terminate(signal: SIGKILL)
            account([String(decoding: first, as: UTF8.self)] + (try child.readAllOutput()))
        }
        let last = try ChildProcess(
            executable: Executables.current, arguments: helper(work.path, "consume", ["--count", "\(appended)"]))
        account(try last.readAllOutput())
        let missing = Int(appended) - seen.count
        Console.output(
            "consumer kills: \(kills) SIGKILLs of a durable consumer, \(appended) records: \(missing) never delivered, "
                + "\(corrupt) corrupt, \(unflagged) delivered again without the flag (\(flagged) flagged redeliveries, "
                + String(format: "%.1f", Double(flagged) / Double(kills)) + " per kill)")
        let count = Int(appended)
        report.figure(
            "journal", "consumer kills: records never delivered", value: Double(missing + skipped), unit: "count",
            count: count, target: 0)
        report.figure(
            "journal", "consumer kills: records corrupt", value: Double(corrupt), unit: "count", count: count, target: 0
        )
        report.figure(
            "journal", "consumer kills: duplicates without the flag", value: Double(unflagged), unit: "count",
            count: count, target: 0)
    }

    /// 8 consumer processes (in-process cursors) and 8 appender processes; every consumer must
    /// see every record once, in order.
    private func fanout(processes: Int, records: Int) throws {
        Console.progress("journal: \(processes) appenders x \(records / processes) records, \(processes) consumers")
        let work = try ScratchDirectory("journal")
        let perAppender = records / processes
        let total = perAppender * processes
        let consumers = try (0..<processes).map { _ in
            try ChildProcess(
                executable: Executables.current, arguments: helper(work.path, "fanout", ["--count", "\(total)"]))
        }
        for consumer in consumers { try consumer.waitForReady() }
        let gate = try StartGate(in: work.path)
        let appenders = try gate.start(processes) { _ in
            helper(work.path, "rate", ["--count", "\(perAppender)", "--batch", "1", "--go", gate.path])
        }
        let started = MonotonicClock.now()
        gate.open()
        for appender in appenders {
            _ = try appender.readAllOutput()
            guard appender.waitForExit() == 0 else { throw BenchFailure("a fanout appender failed") }
        }
        var good = 0
        var summary: [String] = []
        for consumer in consumers {
            let line = try consumer.readAllOutput().first ?? ""
            let fields = line.split(separator: " ").compactMap { Int($0) }
            if consumer.waitForExit() == 0, fields.count == 3, fields[0] == total, fields[1] == 1, fields[2] == 0 {
                good += 1
            }
            summary.append(line)
        }
        let seconds = Double(MonotonicClock.now() - started) / 1e9
        Console.output(
            "fanout: \(processes) appender processes x \(perAppender) records, \(processes) consumer processes: "
                + "\(good) of \(processes) saw all \(total) exactly once in order ("
                + String(format: "%.1f s", seconds) + "; consumers said \(summary.joined(separator: ", ")))")
        report.figure(
            "journal", "fanout: consumers that missed, repeated or reordered", value: Double(processes - good),
            unit: "count", count: total * processes, target: 0)
    }

    /// Appends per second of 100-byte records from `processes` processes into one journal.
    private func rate(
        processes: Int, appends: Int, batch: Int, fsync: Bool, threads: Int, documents: Bool, goal: Double?
    ) throws {
        let label =
            "\(batch == 1 ? "single appends" : "batches of \(batch)")\(fsync ? ", fdatasync" : ", no fsync")"
            + (threads > 1 ? ", \(threads) threads each" : "") + (documents ? ", JSON documents" : ", Codable")
        let who = processes == 1 ? "1 process" : "\(processes) processes"
        Console.progress("journal: appends/s from \(who), \(label)")
        let (rate, total, cpu) = try measureRate(
            processes: processes, appends: appends, batch: batch, fsync: fsync, threads: threads, documents: documents)
        if fsync && threads == 1 && batch == 1 && processes > 1 {
            // The bound of this row: each process waits for the sync of its record before its next append.
            let work = try ScratchDirectory("journal")
            let latency = try bareSyncLoop(in: work.path, records: 50, bytes: 124) / 50
            Console.output(
                "  (each of the \(processes) processes waits for the sync of its record before the next append, so at "
                    + "most \(processes) records share one fdatasync: the rate is bounded by \(processes) / fdatasync latency; "
                    + String(
                        format: "a bare write + fdatasync of 124 bytes here takes %.2f ms, so the bound is %.0f/s)",
                        latency * 1e3, Double(processes) / latency))
        }
        Console.output(
            "appends/s: \(who) x \(appends) records of 100 B, \(label): " + String(format: "%.0f appends/s", rate)
                + String(format: " (CPU time of the appender processes, every thread: %.2f µs per append)", cpu))
        report.figure(
            "journal", "appends/s from \(who), \(label)", value: rate, unit: "appends/s", count: total,
            target: goal, atLeast: true)
        if !fsync {
            // Less at the mercy of other load on the machine than the rate.
            report.figure(
                "journal", "CPU per append from \(who), \(label)", value: cpu, unit: "us", count: total, target: nil)
        }
    }

    /// Starts `processes` appenders, lets them go at once, and returns appends per second from the
    /// first start to the last end, with the number of records (checked against the journal).
    private func measureRate(
        processes: Int, appends: Int, batch: Int, fsync: Bool, threads: Int, documents: Bool
    ) throws -> (rate: Double, total: Int, cpuPerAppend: Double) {
        let work = try ScratchDirectory("journal")
        let gate = try StartGate(in: work.path)
        let children = try gate.start(processes) { _ in
            helper(
                work.path, "rate",
                ["--count", "\(appends)", "--batch", "\(batch)", "--go", gate.path, "--threads", "\(threads)"]
                    + (fsync ? ["--fsync"] : []) + (documents ? ["--documents"] : []))
        }
        // Each appender's line ends with its CPU time (nanoseconds of user and system time).
        let run = try gate.openAndMeasure(children, extra: 1, who: "an appender")
        let status = try journal(work.path).status()
        guard status.last == UInt64(run.total) else {
            throw BenchFailure("the journal holds \(status.last) records, \(run.total) were appended")
        }
        return (run.rate, run.total, Double(run.more[0]) / 1e3 / Double(run.total))
    }

    /// A single durable appender (one process, one thread, `fdatasync` per record) against the
    /// floor under it: a bare loop of `write` + `fdatasync` of the same frame size on the same
    /// file system, in alternating rounds (floor, ours, …); the ratio of the medians.
    private func durableAgainstFloor(records: Int, rounds: Int) throws {
        Console.progress("journal: a single durable appender against a bare write + fdatasync loop")
        // {"p":PID,"i":I,"pad":"x…"} with a pid and index of this run's widths, framed (24 bytes more).
        let frame =
            24
            + Array("{\"p\":\(getpid()),\"i\":\(records),\"pad\":\"\(String(repeating: "x", count: 68))\"}".utf8).count
        var floorRates: [Double] = []
        var ourRates: [Double] = []
        for round in 0..<rounds {
            Console.progress("journal: durable single appender, round \(round + 1)/\(rounds)")
            let work = try ScratchDirectory("journal")
            floorRates.append(Double(records) / (try bareSyncLoop(in: work.path, records: records, bytes: frame)))
            ourRates.append(
                try measureRate(processes: 1, appends: records, batch: 1, fsync: true, threads: 1, documents: false)
                    .rate)
        }
        let floor = floorRates.sorted()[rounds / 2]
        let ours = ourRates.sorted()[rounds / 2]
        Console.output(
            "durable single appender: \(rounds) alternating rounds of \(records) records: bare write + fdatasync of "
                + "\(frame) B "
                + String(format: "%.0f/s, Journal.append with .fdatasync %.0f/s: %.3fx", floor, ours, ours / floor))
        // The frame's size is in the line above, not in the label: the label names the row in `--json`.
        let floorLabel = "bare write + fdatasync loop of one frame per write"
        report.figure(
            "journal", floorLabel, value: floor, unit: "appends/s", count: records * rounds, target: nil)
        report.figure(
            "journal", "appends/s from 1 process, single appends, fdatasync, Codable", value: ours, unit: "appends/s",
            count: records * rounds, target: nil)
        report.goal(
            "journal", "durable single appender / bare write + fdatasync", ratio: ours / floor, target: 0.9,
            atLeast: true,
            floor: floorLabel)
    }

    /// Seconds taken by `records` iterations of `write` + `fdatasync` of `bytes` bytes appended to
    /// a new file in `directory` (the floor under a durable appender).
    private func bareSyncLoop(in directory: String, records: Int, bytes: Int) throws -> Double {
        let path = directory + "/fdatasync-probe"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BenchFailure("cannot create \(path): errno \(errno)") }
        defer {
            close(fd)
            unlink(path)
        }
        let buffer = [UInt8](repeating: 0x78, count: bytes)
        let start = MonotonicClock.now()
        for _ in 0..<records {
            guard write(fd, buffer, buffer.count) == buffer.count, fdatasync(fd) == 0 else {
                throw BenchFailure("write/fdatasync of \(path) failed: errno \(errno)")
            }
        }
        return Double(MonotonicClock.now() - start) / 1e9
    }

    /// append -> durable-less consumer in another process, against passMessage -> listener (100 B).
    private func latency() throws {
        let (_, ours) = try latencyAgainstMessage(
            context, suite: "journal", action: "append -> consumer", label: "append -> consumer, 100 B",
            roundTrips: options.messageRoundTrips
        ) { address, root in try JournalSession(address: address, root: root, group: Self.group) }
        report.figure(
            "journal", "append->consumer p99 (one-way)", value: ours.percentile(99), unit: "us", count: ours.count,
            target: 1000)
    }
}

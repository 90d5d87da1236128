// SPDX-License-Identifier: Apache-2.0
// The journal across processes and crashes, on a private bus: appenders in several processes,
// appenders and durable consumers SIGKILLed at random instants, a full disk, a bus outage, and
// the Python reader of docs/journal-format.md reading what Swift wrote.

import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing
import WormholeDBus
import WormholeTestSupport

@testable import Wormhole

/// What a callback listener delivered, as an `AsyncStream`.
func journalRecorder() -> (
    AsyncStream<Result<JournalRecord<JSONDocument>, WormholeError>>,
    @Sendable (Result<JournalRecord<JSONDocument>, WormholeError>) -> Void
) {
    let (stream, continuation) = AsyncStream<Result<JournalRecord<JSONDocument>, WormholeError>>.makeStream()
    return (stream, { continuation.yield($0) })
}

/// `{"p":P,"i":I}` of a record.
func pair(_ payload: Data) -> [Int] {
    let object = (try? JSONSerialization.jsonObject(with: payload)) as? [String: Int] ?? [:]
    return [object["p"] ?? -1, object["i"] ?? -1]
}

let pythonPath: String? = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"].first {
    FileManager.default.isExecutableFile(atPath: $0)
}

@Suite("Journal across processes", .sharedBus)
struct JournalProcessTests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    var peer: String { get throws { try productPath("wormhole-test-peer") } }
    var environment: [String: String] { ["XDG_RUNTIME_DIR": fixture.state.path] }

    func location(_ identifier: String = "events") throws -> JournalLocation {
        try fixture.wormhole().journal(MessageIdentifier(identifier)).location
    }

    func startAppender(count: Int, batch: Int, hold: Bool = false) throws -> ChildProcess {
        try ChildProcess(
            try peer,
            [
                "journal-append", fixture.root.path, fixture.group, "events", String(count), String(batch),
                fixture.bus.address.rawValue,
            ] + (hold ? ["hold"] : []),
            environment: environment)
    }

    /// `journal-consume` as the durable consumer `indexer` of `events` (LAST 0: until killed or
    /// its input ends).
    func startConsumer(last: UInt64) throws -> ChildProcess {
        try ChildProcess(
            try peer,
            [
                "journal-consume", fixture.root.path, fixture.group, "events", "indexer", String(last),
                fixture.bus.address.rawValue,
            ],
            environment: environment)
    }

    /// The records a `journal-consume` run printed.
    func consumed(_ output: ProcessOutput) -> [(sequence: UInt64, redelivery: Bool, message: String)] {
        output.stdout.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, let sequence = UInt64(fields[0]) else { return nil }
            return (sequence, fields[1] == "1", String(fields[2]))
        }
    }

    /// Every record from the beginning (consecutive sequence numbers, checked by the reader).
    func everyRecord() throws -> [RawJournalRecord] {
        try drain(try JournalReader(location: try location(), start: .beginning))
    }

    @Test("4 appender processes: consecutive numbers, every record once, and a stream sees each in order")
    func appendersInSeveralProcesses() async throws {
        let journal = try fixture.wormhole().journal("events")
        let stream = try await journal.records(from: .end, as: JSONDocument.self)
        let children = try (0..<4).map { _ in try startAppender(count: 250, batch: 7) }
        var outputs: [ProcessOutput] = []
        for child in children { outputs.append(await MessagingHarness.wait(child)) }
        for output in outputs { #expect(output.status == 0, "\(output.stderr)") }
        let received = try await within("1,000 records") {
            var records: [JournalRecord<JSONDocument>] = []
            for try await record in stream {
                records.append(record)
                if records.count == 1000 { break }
            }
            return records
        }
        #expect(received.map(\.sequence) == Array(1...1000))
        #expect(received.allSatisfy { !$0.isRedelivery && $0.identifier.rawValue == "events" })
        let pairs = received.map { pair($0.message.data) }
        #expect(Set(pairs).count == 1000, "no record twice")
        for output in outputs {
            for line in output.stdout.split(separator: "\n") {
                let fields = line.split(separator: " ").compactMap { Int($0) }
                #expect(
                    pairs[fields[0] - 1] == [fields[1], fields[2]], "record \(fields[0]) is what its appender appended")
            }
        }
        var lastByProcess: [Int: Int] = [:]
        for pair in pairs {
            #expect(pair[1] == (lastByProcess[pair[0]] ?? -1) + 1, "each appender's records in its order")
            lastByProcess[pair[0]] = pair[1]
        }
    }

    @Test("records appended while the bus was down are delivered after the reconnect")
    func drainsAfterAReconnect() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let fixture = try MessagingFixture(bus: TestBus())
        let journal = try fixture.wormhole().journal("events")
        let (deliveries, handler) = journalRecorder()
        let listener = try journal.listen(from: .end, as: JSONDocument.self, handler: handler)
        defer { listener.cancel() }
        try journal.append(["n": 0])
        let first = try await next(1, from: deliveries, "the first record")
        #expect(try first[0].get().sequence == 1)
        fixture.bus.kill()
        let appender = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(fixture.group), containerRoot: fixture.root.path,
            busAddress: fixture.bus.address, sharedStateDirectory: fixture.state.path, logger: MessagingHarness.logger)
        let other = appender.journal(MessageIdentifier("events"))
        // The appender shares the process's connection, which may not have seen the daemon die
        // yet: its posts fail, or are accepted and lost with the socket. Either way the reader
        // learns of the records only from its catch-up after the reconnect.
        for n in 1...5 { try other.append(["n": n]) }
        _ = other.flush()
        try fixture.bus.start()
        let rest = try await next(5, from: deliveries, "the records appended during the outage")
        #expect(try rest.map { try $0.get().sequence } == [2, 3, 4, 5, 6])
    }

    @Test("20 appenders SIGKILLed at random instants: nothing that was appended is lost, no gap, no duplicate")
    func appendersKilled() async throws {
        // 600 records each, then they wait to be killed: most kills land while they append, and
        // no appender keeps a core busy while the rest of the suite runs.
        var live = try [
            startAppender(count: 600, batch: 3, hold: true), startAppender(count: 600, batch: 3, hold: true),
        ]
        var finished: [ProcessOutput] = []
        for kill in 0..<20 {
            let victim = kill % 2
            _ = try await next(Int.random(in: 1...20), from: live[victim].stdoutLines, "appended lines")
            live[victim].signal(SIGKILL)
            finished.append(await MessagingHarness.wait(live[victim]))
            live[victim] = try startAppender(count: 600, batch: 3, hold: true)
        }
        for child in live {
            child.signal(SIGKILL)
            finished.append(await MessagingHarness.wait(child))
        }
        let records = try everyRecord()
        #expect(records.map(\.sequence) == Array(1...UInt64(records.count)))
        let pairs = records.map { pair($0.payload) }
        #expect(Set(pairs).count == pairs.count, "no record appended twice")
        var confirmed = 0
        for output in finished {
            #expect(output.status == 9 || output.status == SIGKILL, "killed, not failed: \(output.stderr)")
            for line in output.stdout.split(separator: "\n") {
                let fields = line.split(separator: " ").compactMap { Int($0) }
                guard fields.count == 3 else { continue }
                confirmed += 1
                #expect(
                    fields[0] <= records.count && pairs[fields[0] - 1] == [fields[1], fields[2]],
                    "appended record \(fields[0]) kept")
            }
        }
        #expect(confirmed > 0)
        // The next appender repairs whatever tail the last kill tore, and numbering goes on.
        let after = try fixture.wormhole().journal("events").append(["n": "after"])
        let final = try everyRecord()
        #expect(after == UInt64(records.count) + 1 && final.count == records.count + 1)
    }

    @Test("a durable consumer SIGKILLed 20 times: every record, redeliveries flagged, at most one batch again per kill")
    func consumersKilled() async throws {
        // Each run first gets 500 new records, and a killed run never reaches its last record
        // (LAST 0: it waits for more), so every kill lands while it reads or waits.
        let journal = try fixture.wormhole().journal("events")
        var total: UInt64 = 0
        var runs: [[(sequence: UInt64, redelivery: Bool, message: String)]] = []
        for _ in 0..<20 {
            try journal.append(contentsOf: (Int(total)..<(Int(total) + 500)).map { ["n": $0] })
            total += 500
            let child = try startConsumer(last: 0)
            _ = try await next(Int.random(in: 1...40), from: child.stdoutLines, "consumed lines")
            child.signal(SIGKILL)
            let output = await MessagingHarness.wait(child)
            #expect(output.status == 9 || output.status == SIGKILL, "killed, not failed: \(output.stderr)")
            runs.append(consumed(output))
        }
        let output = await MessagingHarness.wait(try startConsumer(last: total))
        #expect(output.status == 0, "\(output.stderr)")
        runs.append(consumed(output))
        if ProcessInfo.processInfo.environment["JOURNAL_TEST_VERBOSE"] != nil {
            print("consumer runs:", runs.map { ($0.first?.sequence ?? 0, $0.count, $0.filter(\.redelivery).count) })
        }
        var seen = Set<UInt64>()
        var highest: UInt64 = 0
        for (index, run) in runs.enumerated() {
            if let first = run.first {
                #expect(
                    run.map(\.sequence) == Array(first.sequence...(first.sequence + UInt64(run.count) - 1)),
                    "run \(index) in order")
                #expect(
                    first.sequence <= highest + 1,
                    "run \(index) skipped nothing: starts at \(first.sequence) after \(highest)")
            }
            var again = 0
            for record in run {
                #expect(record.message == "{\"n\":\(record.sequence - 1)}")
                if seen.contains(record.sequence) {
                    again += 1
                    #expect(record.redelivery, "record \(record.sequence) delivered again without the flag")
                }
                seen.insert(record.sequence)
            }
            #expect(again <= JournalConsumerCore.batchSize, "run \(index): \(again) records again")
            highest = max(highest, run.last?.sequence ?? 0)
        }
        #expect(seen == Set(1...total))
    }

    @Test("a durable consumer that exits normally mid-batch stores its cursor through the records it handled")
    func consumerExitsMidBatch() async throws {
        // exit() while the handler works through a batch: the exit hook waits for the running
        // handler call and stores the cursor through the last record handled, so the next start
        // delivers exactly the records after it (before: the batch's first record again).
        let journal = try fixture.wormhole().journal("events")
        let total: UInt64 = 1000
        try journal.append(contentsOf: (0..<Int(total)).map { ["n": $0] })
        let first = try startConsumer(last: 0)
        _ = try await next(1, from: first.stdoutLines, "a consumed line")
        first.closeInput()  // the peer calls exit(0) on the end of its input
        let firstOutput = await MessagingHarness.wait(first)
        #expect(firstOutput.status == 0, "\(firstOutput.stderr)")
        let handled = consumed(firstOutput)
        let lastHandled = try #require(handled.last?.sequence)
        #expect(handled.map(\.sequence) == Array(1...lastHandled), "in order, none twice")
        #expect(try journal.status().consumers["indexer"] == lastHandled, "the cursor is where the handler got to")

        let second = await MessagingHarness.wait(try startConsumer(last: total))
        #expect(second.status == 0, "\(second.stderr)")
        let rest = consumed(second)
        if lastHandled < total {
            #expect(rest.first?.sequence == lastHandled + 1, "nothing handled is delivered again")
            #expect(
                rest.map(\.sequence) == Array((lastHandled + 1)...total),
                "\(rest.count) records, from \(rest.first?.sequence ?? 0)")
            // Flagged: at most the batch that was being delivered (and one more fetched just before the exit).
            let flagged = rest.prefix { $0.redelivery }.count
            #expect(rest.filter(\.redelivery).count == flagged, "the flagged records come first")
            #expect(flagged <= 2 * JournalConsumerCore.batchSize)
        } else {
            #expect(rest.isEmpty)
        }
    }

    @Test("a full disk stops appends with an error; nothing appended before is lost and no partial frame remains")
    func fullDisk() async throws {
        let output = try await MessagingHarness.run(
            try peer,
            ["journal-fill", fixture.root.path, fixture.group, "events", "50000", fixture.bus.address.rawValue],
            environment: environment)
        #expect(output.status == 0, "\(output.stderr)")
        let fields = output.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" })
        let last = UInt64(fields.first ?? "") ?? 0
        #expect(fields.count == 2 && fields[1] == "io", "\(output.stdout)")
        #expect(last > 10)
        let records = try everyRecord()
        #expect(records.map(\.sequence) == Array(1...last))
        let segment = try location().path + "/" + JournalFormat.segmentName(1)
        let frame = JournalFormat.frameOverhead + records[0].payload.count
        #expect(try fileSize(segment) == JournalFormat.headerSize + Int(last) * frame, "no partial frame")
        #expect(try fixture.wormhole().journal("events").append(["after": true]) == last + 1)
    }

    @Test(
        "the Python reader of docs/journal-format.md reads what Swift wrote",
        .enabled(if: pythonPath != nil, "python3 is not installed: the Python reader cannot be run"))
    func pythonReader() async throws {
        let writer = JournalWriter(location: try location(), options: Journal.Options(segmentSize: 4096))
        var expected: [[String: Any]] = []
        for n in 0..<120 {
            let message: [String: Any] = [
                "n": n, "text": "é✓ \"quoted\" \(String(repeating: "x", count: n))", "list": [n, nil, true] as [Any?],
            ]
            let data = try JSONSerialization.data(withJSONObject: message)
            _ = try writer.append([data])
            expected.append(message)
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: try location().path).filter { $0.hasSuffix(".seg") }
                .count > 3)
        let output = try await MessagingHarness.run(
            pythonPath!, [repositoryRoot.path + "/Tests/journal-reader.py", try location().path])
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n")
        #expect(lines.count == 120)
        for (index, line) in lines.enumerated() {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect((object?["sequence"] as? Int) == index + 1)
            let message = object?["message"] as? NSDictionary
            #expect(message == expected[index] as NSDictionary, "record \(index + 1)")
        }
        // Damage: the Python reader refuses it too, naming the segment.
        try flipByte(at: JournalFormat.headerSize + 25, in: try location().path + "/" + JournalFormat.segmentName(1))
        let damaged = try await MessagingHarness.run(
            pythonPath!, [repositoryRoot.path + "/Tests/journal-reader.py", try location().path])
        #expect(damaged.status == 1 && damaged.stderr.contains(JournalFormat.segmentName(1)))
    }
}

// `wormholectl send --journal`, `listen --journal` and `journal stat|trim` as scripts use them
// (contract §6), run as child processes against a private bus with a fresh container root.

import Dispatch
import Foundation
import Logging
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// One test's world: its suite's bus, an application group of its own (so that tests sharing the
/// bus never hear each other), an empty container root, an empty runtime directory.
private final class JournalCLIWorld: Sendable {
    let group = uniqueName("group.com.example.journal-cli")

    let bus: TestBus
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory

    init() throws {
        bus = try TestBus.shared()
        root = try TemporaryDirectory("journal-cli-root")
        runtime = try TemporaryDirectory("journal-cli-runtime")
    }

    var environment: [String: String] { ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path] }

    func arguments(_ command: [String], _ rest: [String]) -> [String] {
        command + ["--group", group, "--bus-address", bus.address.rawValue] + rest
    }

    /// Runs `wormholectl` to completion on a Dispatch thread.
    func wormhole(_ command: String..., rest: [String], input: String? = nil) async throws -> ProcessOutput {
        try await wormhole(command, rest: rest, input: input)
    }

    /// Runs `wormholectl` to completion on a Dispatch thread (never blocking Swift's cooperative pool).
    func wormhole(_ command: [String], rest: [String], input: String? = nil) async throws -> ProcessOutput {
        let executable = try productPath("wormholectl")
        let arguments = arguments(command, rest)
        let environment = environment
        return try await within("wormholectl \(command.joined(separator: " "))") {
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(
                        with: Result { try run(executable, arguments, input: input, environment: environment) })
                }
            }
        }
    }

    /// Starts `wormholectl listen --journal …` and returns once it has written `ready`.
    func listen(_ rest: [String]) async throws -> ChildProcess {
        let child = try ChildProcess(
            try productPath("wormholectl"), arguments(["listen", "--journal"], rest), environment: environment)
        let first = try await next(1, from: child.stderrLines, "ready from wormholectl listen --journal")
        guard first == ["ready"] else { throw TestFailure("wormholectl listen wrote \(first) before 'ready'") }
        return child
    }

    func wait(_ child: ChildProcess) async throws -> ProcessOutput {
        try await within("the child to exit") {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
            }
        }
    }

    /// The journal in this process, on the same bus and root.
    func journal(_ identifier: String = "events") throws -> Journal {
        var logger = Logger(label: "journal-cli-tests")
        logger.logLevel = .error
        return try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root.path, busAddress: bus.address,
            sharedStateDirectory: runtime.path + "/wormhole", logger: logger
        ).journal(MessageIdentifier(identifier))
    }

    func line(_ sequence: Int, _ message: String, identifier: String = "events") -> String {
        #"{"identifier":"\#(identifier)","sequence":\#(sequence),"message":\#(message)}"#
    }
}

/// The tests share the suite's bus, each in a group of its own.
@Suite("wormholectl send/listen --journal, journal stat/trim", .sharedBus)
struct JournalCLITests {
    private let world: JournalCLIWorld
    init() throws { world = try JournalCLIWorld() }

    @Test("listen --journal prints the contract's line for each record appended by send --journal, in order")
    func sendAndListen() async throws {
        let child = try await world.listen(["events", "--count", "3", "--timeout", "120"])
        for message in [#"{"n": 1}"#, #"[1, "two" ,3]"#, #""a/b \"q\" é""#] {
            let sent = try await world.wormhole("send", "--journal", rest: ["events", message])
            #expect(sent.status == 0 && sent.stdout == "" && sent.stderr == "", "\(sent.stderr)")
        }
        let output = try await world.wait(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stderr == "ready\n")
        #expect(
            output.stdout
                == [world.line(1, #"{"n":1}"#), world.line(2, #"[1,"two",3]"#), world.line(3, #""a/b \"q\" é""#)]
                .joined(separator: "\n") + "\n")
        // The mailbox is untouched.
        let read = try await world.wormhole("read", rest: ["events"])
        #expect(read.status == 1)
        // Standard input works too.
        let piped = try await world.wormhole("send", "--journal", rest: ["events"], input: "{\"piped\":true}\n")
        #expect(piped.status == 0)
        #expect(try world.journal().status().last == 4)
    }

    @Test("--from start, --from SEQ, and the default --from end")
    func startPositions() async throws {
        let journal = try world.journal()
        try journal.append(contentsOf: (1...5).map { ["n": $0] })
        let fromStart = try await world.wormhole(
            "listen", "--journal", rest: ["events", "--from", "start", "--count", "5", "--timeout", "30"])
        #expect(fromStart.status == 0)
        #expect(
            fromStart.stdout.split(separator: "\n").map(String.init) == (1...5).map { world.line($0, "{\"n\":\($0)}") })
        let fromFour = try await world.wormhole(
            "listen", "--journal", rest: ["events", "--from", "4", "--count", "2", "--timeout", "30"])
        #expect(
            fromFour.stdout.split(separator: "\n").map(String.init) == [
                world.line(4, #"{"n":4}"#), world.line(5, #"{"n":5}"#),
            ])
        let child = try await world.listen(["events", "--count", "1", "--timeout", "120"])
        try journal.append(["n": 6])
        let atEnd = try await world.wait(child)
        #expect(atEnd.stdout == world.line(6, #"{"n":6}"#) + "\n")
        let future = try await world.wormhole(
            "listen", "--journal", rest: ["events", "--from", "9", "--count", "1", "--timeout", "30"])
        #expect(future.status == 64 && future.stderr.contains("9"), "\(future.stderr)")
    }

    @Test("a durable consumer starts after the last record it printed")
    func durableConsumer() async throws {
        let journal = try world.journal()
        try journal.append(contentsOf: (1...5).map { ["n": $0] })
        let first = try await world.wormhole(
            "listen", "--journal",
            rest: ["events", "--consumer", "printer", "--from", "start", "--count", "2", "--timeout", "30"])
        #expect(
            first.stdout.split(separator: "\n").map(String.init) == [
                world.line(1, #"{"n":1}"#), world.line(2, #"{"n":2}"#),
            ])
        let second = try await world.wormhole(
            "listen", "--journal", rest: ["events", "--consumer", "printer", "--count", "3", "--timeout", "30"])
        #expect(
            second.stdout.split(separator: "\n").map(String.init) == (3...5).map { world.line($0, "{\"n\":\($0)}") })
        let stat = try await world.wormhole("journal", "stat", rest: ["events"])
        #expect(stat.status == 0)
        #expect(stat.stdout.contains(#""consumers":{"printer":5}"#), "\(stat.stdout)")
        // A consumer with no new records waits, then times out (exit 124 with --count).
        let waiting = try await world.wormhole(
            "listen", "--journal", rest: ["events", "--consumer", "printer", "--count", "1", "--timeout", "0.5"])
        #expect(waiting.status == 124 && waiting.stdout == "")
    }

    @Test("a durable consumer in use by another listen is refused with exit 1, naming it")
    func consumerInUse() async throws {
        // The first holds the consumer's lock before it writes `ready`; the second is refused when
        // it opens the consumer, before it waits for anything, so no time limit decides the
        // outcome. Each --timeout only bounds a process that would otherwise wait for ever (if
        // the second were wrongly let in, it would wait for a record appended only after it
        // exits, and fail the test by timing out). A timer starts with the process, so a short
        // one fired before the second even reached the lock on a loaded machine (exit 124).
        let first = try await world.listen(["events", "--consumer", "busy", "--count", "1", "--timeout", "120"])
        let second = try await world.wormhole(
            "listen", "--journal", rest: ["events", "--consumer", "busy", "--count", "1", "--timeout", "120"])
        #expect(second.status == 1, "\(second.stderr)")
        #expect(second.stderr.contains("'busy'") && second.stderr.contains("in use"), "\(second.stderr)")
        try world.journal().append(["n": 1])
        let output = try await world.wait(first)
        #expect(
            output.status == 0 && output.stdout == world.line(1, #"{"n":1}"#) + "\n",
            "the first listen: status \(output.status), \(output.stdout.debugDescription), \(output.stderr.debugDescription)"
        )
    }

    @Test("journal stat prints first, last, records, bytes, segments and consumers; trim removes old segments")
    func statAndTrim() async throws {
        let empty = try await world.wormhole("journal", "stat", rest: ["events"])
        #expect(empty.status == 0)
        #expect(
            empty.stdout
                == #"{"identifier":"events","first":1,"last":0,"records":0,"bytes":0,"segments":0,"consumers":{},"damaged":[]}"#
                + "\n")
        let journal = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(world.group), containerRoot: world.root.path,
            busAddress: world.bus.address,
            sharedStateDirectory: world.runtime.path + "/wormhole"
        ).journal("events", options: Journal.Options(segmentSize: 4096))
        for n in 0..<200 { try journal.append(["n": String(n), "pad": String(repeating: "p", count: 60)]) }
        let status = try journal.status()
        let stat = try await world.wormhole("journal", "stat", rest: ["events"])
        #expect(
            stat.stdout
                == #"{"identifier":"events","first":1,"last":200,"records":200,"bytes":\#(status.bytes),"segments":\#(status.segments.count),"consumers":{},"damaged":[]}"#
                + "\n")
        #expect(status.segments.count > 3)
        let trimmed = try await world.wormhole("journal", "trim", rest: ["events", "--max-records", "50"])
        #expect(trimmed.status == 0, "\(trimmed.stderr)")
        let after = try journal.status()
        #expect(after.first > 1 && after.first <= 151 && after.last == 200)
        #expect(trimmed.stdout.contains(#""first":\#(after.first),"last":200"#))
        #expect(trimmed.stdout.contains(#""removed":["00000000000000000001.seg""#), "\(trimmed.stdout)")
        // A durable consumer behind the trim gets one gap line, then the first available record.
        let gap = try await world.wormhole(
            "listen", "--journal", rest: ["events", "--from", "2", "--count", "1", "--timeout", "30"])
        #expect(gap.status == 0)
        #expect(
            gap.stderr.contains("removed by retention") && gap.stderr.contains("going on at \(after.first)"),
            "\(gap.stderr)")
        #expect(gap.stdout.hasPrefix(#"{"identifier":"events","sequence":\#(after.first),"#))
        let noLimit = try await world.wormhole("journal", "trim", rest: ["events"])
        #expect(noLimit.status == 64)
    }

    /// The damage of contract §6 v1.2 in the second of 4 segments (records 5…8 of 14):
    /// `listen --journal --from start` prints every record outside the damaged range, one
    /// `wormhole: records A..B` line for it, and `journal check` exits 1 listing exactly it.
    @Test(
        "damage in a middle segment: every intact record, one range line, journal check exits 1", .serialized,
        arguments: [
            ("truncate", 6, 8, "truncated"), ("remove", 5, 8, "missing"), ("fifo", 5, 8, "foreign"),
            ("headerless", 5, 8, "foreign"), ("directory", 5, 8, "foreign"), ("flip", 6, 6, "checksum"),
        ])
    func damageIsReportedAndReadPast(kind: String, from: Int, to: Int, reason: String) async throws {
        var logger = Logger(label: "journal-cli-tests")
        logger.logLevel = .critical
        let journal = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(world.group), containerRoot: world.root.path,
            busAddress: world.bus.address,
            sharedStateDirectory: world.runtime.path + "/wormhole", logger: logger
        ).journal("events", options: Journal.Options(segmentSize: 4096))
        let pad = String(repeating: "p", count: 1000)
        for n in 1...14 { try journal.append(["n": String(n), "pad": pad]) }
        #expect(try journal.status().segments.count == 4)
        let segment = journal.path + "/00000000000000000005.seg"
        let frame = 24 + 1000 + #"{"n":"5","pad":""}"#.utf8.count
        switch kind {
        case "truncate": #expect(truncate(segment, off_t(16 + frame + frame / 2)) == 0)
        case "remove": try FileManager.default.removeItem(atPath: segment)
        case "fifo":
            try FileManager.default.removeItem(atPath: segment)
            #expect(mkfifo(segment, 0o600) == 0)
        case "headerless": try Data(repeating: 0x41, count: 5000).write(to: URL(fileURLWithPath: segment))
        case "directory":
            try FileManager.default.removeItem(atPath: segment)
            try FileManager.default.createDirectory(atPath: segment, withIntermediateDirectories: false)
        default:
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: segment))
            try handle.seek(toOffset: UInt64(16 + frame + 40))
            try handle.write(contentsOf: Data("X".utf8))
            try handle.close()
        }
        let expected = (1...14).filter { $0 < from || $0 > to }
        let listened = try await world.wormhole(
            "listen", "--journal",
            rest: ["events", "--from", "start", "--count", String(expected.count), "--timeout", "60"])
        #expect(listened.status == 0, "\(listened.stderr)")
        let numbers = listened.stdout.split(separator: "\n").compactMap { line -> Int? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                return nil
            }
            return object["sequence"] as? Int
        }
        #expect(numbers == expected)
        let ranges = listened.stderr.split(separator: "\n").filter { $0.hasPrefix("wormhole: records ") }
        #expect(ranges.count == 1, "\(listened.stderr)")
        #expect(ranges.first?.hasPrefix("wormhole: records \(from)..\(to) ") == true, "\(listened.stderr)")
        #expect(ranges.first?.contains(reason) == true && ranges.first?.contains("00000000000000000005.seg") == true)
        let check = try await world.wormhole("journal", "check", rest: ["events"])
        #expect(check.status == 1, "\(check.stderr)")
        #expect(
            check.stdout.contains(
                #""damaged":[{"from":\#(from),"to":\#(to),"file":"00000000000000000005.seg","reason":"\#(reason)","#),
            "\(check.stdout)")
        #expect(check.stdout.components(separatedBy: #""from":"#).count == 2, "one range: \(check.stdout)")
        let stat = try await world.wormhole("journal", "stat", rest: ["events"])
        #expect(stat.status == 0 && stat.stdout.contains(#""reason":"\#(reason)""#), "\(stat.stdout)")
        // A whole journal checks clean.
        let clean = try await world.wormhole("journal", "check", rest: ["other"])
        #expect(clean.status == 0 && clean.stdout.contains(#""damaged":[]"#), "\(clean.stdout) \(clean.stderr)")
    }

    @Test("a bad cursor file is reported for that consumer alone")
    func badCursorIsThatConsumersAlone() async throws {
        let journal = try world.journal()
        try journal.append(["n": 1])
        let good = try await world.wormhole(
            "listen", "--journal",
            rest: ["events", "--consumer", "good", "--from", "start", "--count", "1", "--timeout", "30"])
        #expect(good.status == 0)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: journal.path + "/bad.cursor"))
        let stat = try await world.wormhole("journal", "stat", rest: ["events"])
        #expect(stat.status == 0, "\(stat.stderr)")
        #expect(
            stat.stdout.contains(#""consumers":{"good":1}"#) && stat.stdout.contains(#""badConsumers":{"bad":"#),
            "\(stat.stdout)")
        let bad = try await world.wormhole(
            "listen", "--journal", rest: ["events", "--consumer", "bad", "--count", "1", "--timeout", "30"])
        #expect(bad.status != 0 && bad.stderr.contains("bad.cursor"), "\(bad.stderr)")
    }

    @Test(arguments: [
        (["listen", "--journal"], ["events", "--from", "0"], "--from"),
        (["listen", "--journal"], ["events", "--from", "later"], "later"),
        (["listen", "--journal"], ["a", "b"], "exactly one identifier"),
        (["listen", "--journal"], ["events", "--consumer", "a/b"], "a/b"),
        (["listen"], ["events", "--consumer", "c"], "--consumer"),
        (["send", "--journal"], ["bad/id", "1"], "bad/id"),
        (["send", "--journal"], ["events", "{"], "events"),
    ])
    func badInputExits64NamingIt(command: [String], rest: [String], named: String) async throws {
        let output = try await world.wormhole(command, rest: rest)
        #expect(output.status == 64, "\(output.stderr)")
        // The first line names the bad value (the argument parser may add its usage below it).
        #expect(output.stderr.split(separator: "\n").first?.contains(named) == true, "\(output.stderr)")
        #expect(try world.journal().status().last == 0, "nothing appended")
    }

    @Test("a record over the maximum size is refused, exit 64, nothing appended")
    func tooLarge() async throws {
        let big = "\"" + String(repeating: "x", count: Journal.maximumRecordSize) + "\""
        let output = try await world.wormhole("send", "--journal", rest: ["events"], input: big)
        #expect(output.status == 64 && output.stderr.contains("maximum record size"), "\(output.stderr)")
        #expect(try world.journal().status().last == 0)
    }
}

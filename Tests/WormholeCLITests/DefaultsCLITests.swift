// `wormholectl defaults read|write|delete|observe` as scripts use them (contract §5), run as child
// processes against a private bus with a fresh container root and runtime directory.

import Dispatch
import Foundation
import Logging
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// A counter shared by Dispatch threads.
private final class ManagedAtomicCounter: @unchecked Sendable {
    // @unchecked: every access holds the lock.
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// One test's world: its suite's bus, an application group of its own (so that tests sharing the
/// bus never hear each other), an empty container root and runtime directory.
private final class DefaultsCLIWorld: Sendable {
    let group = uniqueName("group.com.example.cli-defaults")

    let bus: TestBus
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory

    init() throws {
        bus = try TestBus.shared()
        root = try TemporaryDirectory("cli-defaults-root")
        runtime = try TemporaryDirectory("cli-defaults-runtime")
    }

    var environment: [String: String] { ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path] }

    func arguments(_ rest: [String]) -> [String] {
        ["defaults"] + rest + ["--group", group, "--bus-address", bus.address.rawValue]
    }

    /// Runs `wormholectl defaults …` to completion on a Dispatch thread.
    func run(_ rest: [String], input: String? = nil) async throws -> ProcessOutput {
        let executable = try productPath("wormholectl")
        let arguments = arguments(rest)
        let environment = environment
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        try WormholeTestSupport.run(executable, arguments, input: input, environment: environment)
                    })
            }
        }
    }

    /// Starts `wormholectl defaults observe …` and returns once it wrote `ready`.
    func observe(_ rest: [String]) async throws -> ChildProcess {
        let child = try ChildProcess(
            try productPath("wormholectl"), arguments(["observe"] + rest), environment: environment)
        let first = try await next(1, from: child.stderrLines, "ready from wormholectl defaults observe")
        guard first == ["ready"] else { throw TestFailure("observe wrote \(first) before 'ready'") }
        return child
    }

    /// The suite in this process, on the same bus and root.
    func inProcess() throws -> GroupDefaults {
        var logger = Logger(label: "wormhole.cli-defaults-tests")
        logger.logLevel = .error
        return try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root.path, busAddress: bus.address,
            sharedStateDirectory: runtime.path + "/wormhole", logger: logger)
    }

    var suitePath: String { "\(root.path)/\(group)/Preferences/\(group).json" }
}

@Suite(.sharedBus) struct DefaultsCLITests {
    /// 4 processes × 10 `defaults increment` of one key lose nothing (the hand-run figure,
    /// 8 × 200, is in Tests/faults.sh damage).
    @Test func concurrentIncrementsLoseNothing() async throws {
        let world = try DefaultsCLIWorld()
        let executable = try productPath("wormholectl")
        let arguments = world.arguments(["increment", "counter"])
        let environment = world.environment
        let failures = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            DispatchQueue.global().async {
                let failed = ManagedAtomicCounter()
                DispatchQueue.concurrentPerform(iterations: 4) { _ in
                    for _ in 0..<10 {
                        let output = try? WormholeTestSupport.run(executable, arguments, environment: environment)
                        if output?.status != 0 { failed.add() }
                    }
                }
                continuation.resume(returning: failed.value)
            }
        }
        #expect(failures == 0)
        let read = try await world.run(["read", "counter"])
        #expect(read.stdout == "40\n")
        let by = try await world.run(["increment", "counter", "--by", "-41"])
        #expect(by.status == 0 && by.stdout == "-1\n", "\(by.stderr)")
        _ = try await world.run(["write", "ratio", "2.0"])
        let notInteger = try await world.run(["increment", "ratio"])
        #expect(
            notInteger.status == 1 && notInteger.stderr.contains("'ratio'") && notInteger.stderr.contains("a Double"))
    }

    @Test func compareAndSetLoadKeysRepairAndLimits() async throws {
        let world = try DefaultsCLIWorld()
        // --expect-absent, then --expect with a typed value (1 is not 1.0).
        #expect(try await world.run(["write", "k", "1", "--expect-absent"]).status == 0)
        let again = try await world.run(["write", "k", "2", "--expect-absent"])
        #expect(again.status == 3 && again.stderr.hasPrefix("1\n"), "\(again.stderr)")
        let typed = try await world.run(["write", "k", "2", "--expect", "1.0"])
        #expect(typed.status == 3 && typed.stderr.hasPrefix("1\n"), "\(typed.stderr)")
        #expect(try await world.run(["write", "k", "2", "--expect", "1"]).status == 0)
        #expect(try await world.run(["read", "k"]).stdout == "2\n")
        // null is refused by write and load.
        let null = try await world.run(["write", "k", "null"])
        #expect(null.status == 64 && null.stderr.contains("null"), "\(null.stderr)")
        let nullLoad = try await world.run(["load"], input: #"{"a":1,"b":null}"#)
        #expect(nullLoad.status == 64 && nullLoad.stderr.contains("'b'"), "\(nullLoad.stderr)")
        // load: one object, one write; --replace removes the others.
        let load = try await world.run(["load"], input: #"{"a":1,"b":"two","a":3}"#)
        #expect(load.status == 0, "\(load.stderr)")
        #expect(try await world.run(["read"]).stdout == #"{"a":3,"b":"two","k":2}"# + "\n")
        let keys = try await world.run(["read", "--keys"])
        #expect(keys.stdout == "\"a\"\n\"b\"\n\"k\"\n")
        #expect(try await world.run(["load", "--replace"], input: #"{"b":"two"}"#).status == 0)
        #expect(try await world.run(["read"]).stdout == #"{"b":"two"}"# + "\n")
        #expect(try await world.run(["load"], input: "[1]").status == 64)
        // The limit: refused naming size and limit, the suite unchanged.
        let before = FileManager.default.contents(atPath: world.suitePath)
        let big = try await world.run([
            "write", "big", "\"" + String(repeating: "x", count: 2000) + "\"", "--max-bytes", "1K",
        ])
        #expect(big.status == 1 && big.stderr.contains("1024"), "\(big.stderr)")
        #expect(FileManager.default.contents(atPath: world.suitePath) == before)
        // Unknown values: read prints them as stored; writers keep them; reads never move the file.
        try Data(#"{"b":"two","x":{"$future":1}}"#.utf8).write(to: URL(fileURLWithPath: world.suitePath))
        #expect(try await world.run(["read", "x"]).stdout == #"{"$future":1}"# + "\n")
        #expect(try await world.run(["write", "c", "3"]).status == 0)
        #expect(try await world.run(["read"]).stdout == #"{"b":"two","c":3,"x":{"$future":1}}"# + "\n")
        // A file that is not one object: read and write fail naming repair; repair moves it aside.
        try Data("{oops".utf8).write(to: URL(fileURLWithPath: world.suitePath))
        let read = try await world.run(["read", "b"])
        #expect(
            read.status == 1 && read.stderr.contains("at byte 1") && read.stderr.contains("defaults repair"),
            "\(read.stderr)")
        let write = try await world.run(["write", "b", "1"])
        #expect(write.status == 1 && write.stderr.contains("nothing was written"))
        #expect(FileManager.default.contents(atPath: world.suitePath) == Data("{oops".utf8))
        let repair = try await world.run(["repair"])
        #expect(repair.status == 0 && repair.stdout.contains(".corrupt-1"), "\(repair.stderr)")
        #expect(FileManager.default.contents(atPath: world.suitePath + ".corrupt-1") == Data("{oops".utf8))
        let clean = try await world.run(["repair"])
        #expect(clean.status == 0 && clean.stdout.isEmpty)
        #expect(try await world.run(["read"]).stdout == "{}\n")
    }
    @Test func writeReadDeleteRoundTrip() async throws {
        let world = try DefaultsCLIWorld()
        for (key, json) in [
            ("int", "1"), ("double", "1.0"), ("text", #""Grüße/\"x\"""#), ("date", #"{"$date":1700000000.5}"#),
            ("a key/with.dots 'and' spaces", #"[1,{"$data":"AAE="}]"#),
        ] {
            let write = try await world.run(["write", key, json])
            #expect(write.status == 0 && write.stderr.isEmpty, "\(write.stderr)")
            let read = try await world.run(["read", key])
            #expect(read.status == 0)
            #expect(read.stdout == json + "\n")
        }
        // From standard input, pretty-printed JSON is accepted and stored compact.
        #expect(try await world.run(["write", "stdin"], input: "{\n  \"b\": 2,\n  \"a\": [true]\n}\n").status == 0)
        #expect(try await world.run(["read", "stdin"]).stdout == #"{"a":[true],"b":2}"# + "\n")
        let all = try await world.run(["read"])
        #expect(all.stdout.hasPrefix(#"{"a key/with.dots 'and' spaces":[1,{"$data":"AAE="}],"date":"#))
        #expect(all.stdout.split(separator: "\n").count == 1)
        #expect(try (world.inProcess().value(forKey: "double")?.doubleValue ?? 0) == 1.0)
        #expect(try world.inProcess().value(forKey: "int") == .integer(1))

        #expect(try await world.run(["delete", "int"]).status == 0)
        let absent = try await world.run(["read", "int"])
        #expect(absent.status == 1 && absent.stdout.isEmpty && absent.stderr.contains("'int'"))
        #expect(try await world.run(["delete", "int"]).status == 0)
    }

    @Test func badInputExits64NamingItAndWritesNothing() async throws {
        let world = try DefaultsCLIWorld()
        #expect(try await world.run(["write", "kept", "1"]).status == 0)
        let before = FileManager.default.contents(atPath: world.suitePath)
        for (arguments, named) in [
            (["write", "k", "null"], "'k'"), (["write", "k", "{\"a\":"], "'k'"), (["write", "k", "01"], "'k'"),
            (["write", "k", #"{"$bogus":1}"#], "$bogus"), (["write", "", "1"], "key ''"),
            (["write", "a\u{1}", "[null]"], "'a"),
            (["write", "--suite", "bad/suite", "k", "1"], "'bad/suite'"),
            (["read", "--suite", ".hidden"], "'.hidden'"),
        ] {
            let output = try await world.run(arguments)
            #expect(output.status == 64, "\(arguments): \(output.status) \(output.stderr)")
            #expect(
                output.stderr.split(separator: "\n").count == 1 && output.stderr.contains(named), "\(output.stderr)")
        }
        let badGroup = try WormholeTestSupport.run(
            try productPath("wormholectl"), ["defaults", "read", "--group", "no/slash"], environment: world.environment)
        #expect(badGroup.status == 64 && badGroup.stderr.contains("'no/slash'"))
        #expect(FileManager.default.contents(atPath: world.suitePath) == before)
    }

    /// One line per change, only for the observed keys (or every key without KEY), each seen
    /// before the next write is made.
    @Test func observePrintsOneLinePerChange() async throws {
        let world = try DefaultsCLIWorld()
        let observer = try await world.observe(["watched", "it's", "--count", "3"])
        let suite = try await world.observe(["--count", "4"])
        let defaults = try world.inProcess()
        let steps: [(String, PropertyListValue?, String?)] = [
            ("unwatched", .integer(1), nil),
            ("watched", .double(1.5), #"{"key":"watched","value":1.5}"#),
            ("it's", .array([.string("x")]), #"{"key":"it's","value":["x"]}"#),
            ("watched", nil, #"{"key":"watched","value":null,"removed":true}"#),
        ]
        for (key, value, line) in steps {
            try defaults.set(value, forKey: key)
            let all = try await next(1, from: suite.stdoutLines, "the suite observer's line for \(key)")
            #expect(all == [#"{"key":"\#(key)","value":\#(value?.jsonText ?? #"null,"removed":true"#)}"#])
            if let line { #expect(try await next(1, from: observer.stdoutLines, "the line for \(key)") == [line]) }
        }
        for child in [observer, suite] {
            let output = await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
            }
            #expect(output.status == 0 && output.stderr == "ready\n", "\(output.stderr)")
        }
    }

    @Test func observeWakesOnAWriteByAnotherCLIProcessAndTimesOut() async throws {
        let world = try DefaultsCLIWorld()
        let observer = try await world.observe(["k", "--count", "1"])
        #expect(try await world.run(["write", "k", #"{"$url":"https://example.com"}"#]).status == 0)
        let output = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: observer.wait()) }
        }
        #expect(output.stdout == #"{"key":"k","value":{"$url":"https://example.com"}}"# + "\n")
        let timedOut = try await world.run(["observe", "k", "--count", "1", "--timeout", "0.2"])
        #expect(timedOut.status == 124)
    }
}

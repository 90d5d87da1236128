// `wormhole defaults read|write|delete|observe` as scripts use them (contract §5), run as child
// processes against a private bus with a fresh container root and runtime directory.

import Dispatch
import Foundation
import Logging
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

private final class DefaultsCLIWorld: Sendable {
    static let group = "group.com.example.cli-defaults"

    let bus: TestBus
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory

    init() throws {
        bus = try TestBus()
        root = try TemporaryDirectory("cli-defaults-root")
        runtime = try TemporaryDirectory("cli-defaults-runtime")
    }

    var environment: [String: String] { ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path] }

    func arguments(_ rest: [String]) -> [String] {
        ["defaults"] + rest + ["--group", Self.group, "--bus-address", bus.address.rawValue]
    }

    /// Runs `wormhole defaults …` to completion on a Dispatch thread.
    func run(_ rest: [String], input: String? = nil) async throws -> ProcessOutput {
        let executable = try productPath("wormhole")
        let arguments = arguments(rest)
        let environment = environment
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result { try WormholeTestSupport.run(executable, arguments, input: input, environment: environment) })
            }
        }
    }

    /// Starts `wormhole defaults observe …` and returns once it wrote `ready`.
    func observe(_ rest: [String]) async throws -> ChildProcess {
        let child = try ChildProcess(try productPath("wormhole"), arguments(["observe"] + rest), environment: environment)
        let first = try await next(1, from: child.stderrLines, "ready from wormhole defaults observe")
        guard first == ["ready"] else { throw TestFailure("observe wrote \(first) before 'ready'") }
        return child
    }

    /// The suite in this process, on the same bus and root.
    func inProcess() throws -> GroupDefaults {
        var logger = Logger(label: "wormhole.cli-defaults-tests")
        logger.logLevel = .error
        return try GroupDefaults(
            applicationGroupIdentifier: Self.group, containerRoot: root.path, busAddress: bus.address,
            sharedStateDirectory: runtime.path + "/wormhole", logger: logger)
    }

    var suitePath: String { "\(root.path)/\(Self.group)/Preferences/\(Self.group).json" }
}

@Suite struct DefaultsCLITests {
    @Test func writeReadDeleteRoundTrip() async throws {
        let world = try DefaultsCLIWorld()
        for (key, json) in [("int", "1"), ("double", "1.0"), ("text", #""Grüße/\"x\"""#), ("date", #"{"$date":1700000000.5}"#),
                            ("a key/with.dots 'and' spaces", #"[1,{"$data":"AAE="}]"#)] {
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
        #expect(try world.inProcess().double(forKey: "double") == 1.0)
        #expect(try world.inProcess().object(forKey: "int") as? Int == 1)

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
            (["write", "k", #"{"$bogus":1}"#], "$bogus"), (["write", "", "1"], "key ''"), (["write", "a\u{1}", "[null]"], "'a"),
            (["write", "--suite", "bad/suite", "k", "1"], "'bad/suite'"), (["read", "--suite", ".hidden"], "'.hidden'"),
        ] {
            let output = try await world.run(arguments)
            #expect(output.status == 64, "\(arguments): \(output.status) \(output.stderr)")
            #expect(output.stderr.split(separator: "\n").count == 1 && output.stderr.contains(named), "\(output.stderr)")
        }
        let badGroup = try WormholeTestSupport.run(
            try productPath("wormhole"), ["defaults", "read", "--group", "no/slash"], environment: world.environment)
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

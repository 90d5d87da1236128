// `wormholectl send --transient` and `wormholectl listen` (contract §7), hand-typed `Message` signals
// from dbus-send, and the consecutive-duplicate rule of `listen` with concurrent writer processes.

import Dispatch
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// Runs a command to completion on a thread of its own: never on Swift's cooperative pool, and
/// not on Dispatch's global queues, whose few threads (about one per core) the other suites'
/// waits share; eight writers blocking there would starve them.
func runOnOwnThread(
    _ executable: String, _ arguments: [String], input: String? = nil, environment: [String: String]? = nil
) async throws -> ProcessOutput {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(
                with: Result { try run(executable, arguments, input: input, environment: environment) })
        }
        thread.start()
    }
}

/// Waits for a child on a thread of its own.
func waitOnOwnThread(_ child: ChildProcess) async throws -> ProcessOutput {
    try await WormholeTestSupport.within("the child to exit", seconds: waitGuardSeconds) {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: child.wait()) }.start()
        }
    }
}

extension CLIWorld {
    /// `dbus-send --bus=ADDRESS --type=signal /org/wormhole/Notify1 MEMBER ARGS...` (another process).
    func dbusSignal(_ member: String, _ arguments: [String]) async throws {
        let command = ["dbus-send", "--bus=\(bus.address.rawValue)", "--type=signal", "/org/wormhole/Notify1", member]
        let output = try await runOnOwnThread("/usr/bin/env", command + arguments)
        if output.status != 0 { throw TestFailure("dbus-send failed: \(output.stderr)") }
    }

    /// Runs `wormhole-test-peer ARGS...` to completion.
    func peer(_ arguments: [String]) async throws -> ProcessOutput {
        try await runOnOwnThread(
            try productPath("wormhole-test-peer"), arguments, environment: ["XDG_RUNTIME_DIR": runtime.path])
    }

    /// Runs `wormholectl COMMAND --group G --bus-address A REST...` to completion.
    func tool(_ command: String, _ rest: [String], input: String? = nil) async throws -> ProcessOutput {
        try await runOnOwnThread(
            try productPath("wormholectl"), arguments(command, rest), input: input, environment: environment)
    }
}

/// The tests share the suite's bus, each in a group of its own.
@Suite("wormholectl send --transient and listen across processes", .sharedBus)
struct TransientCLITests {
    private let world: CLIWorld
    init() throws { world = try CLIWorld() }

    private var name: String { "\(world.group)/wormhole/live" }

    @Test("send --transient reaches wormholectl listen as a delivery line; nothing is stored")
    func sendToListen() async throws {
        let child = try await world.listen(["live", "--count", "2", "--timeout", "120"])
        let sent = try await world.tool("send", ["--transient", "live", #"{ "a" : [1, 2], "s": "x y" }"#])
        #expect(sent.status == 0 && sent.stdout == "" && sent.stderr == "", "\(sent.stderr)")
        let piped = try await world.tool("send", ["--transient", "live"], input: "\"piped\"\n")
        #expect(piped.status == 0, "\(piped.stderr)")
        let output = try await waitOnOwnThread(child)
        #expect(output.status == 0)
        #expect(
            ListenLine.bases(of: output.stdout) == #"{"identifier":"live","message":{"a":[1,2],"s":"x y"}}"# + "\n"
                + #"{"identifier":"live","message":"piped"}"# + "\n")
        #expect(output.stderr == "ready\n")
        #expect(!FileManager.default.fileExists(atPath: world.messagePath("live")))
        let read = try await world.tool("read", ["live"])
        #expect(read.status == 1, "nothing is stored: \(read.stdout)")
    }

    @Test("send --transient reaches a listener in this process as a .transient delivery")
    func sendToLibrary() async throws {
        let receiver = try world.inProcess()
        let (deliveries, continuation) = AsyncStream<MessageDelivery<CLICounter>>.makeStream()
        let listener = try receiver.listen(identifier: "live", as: CLICounter.self, on: .ioThread) {
            continuation.yield($0)
        }
        defer { listener.cancel() }
        let sent = try await world.tool("send", ["--transient", "live", #"{"n":7}"#])
        #expect(sent.status == 0, "\(sent.stderr)")
        let received = try await CLIWait.next(1, from: deliveries, "the transient message")
        #expect(received.map { try? $0.result.get() } == [CLICounter(n: 7)])
        #expect(received.map(\.reason) == [.transient])
    }

    @Test("send --transient over 64 KiB exits 64 naming the size and the limit, and sends nothing")
    func sizeLimit() async throws {
        let child = try await world.listen(["live", "--count", "1", "--timeout", "120"])
        let limit = MessageCenter.transientMessageLimit
        let tooLarge = "\"" + String(repeating: "y", count: limit - 1) + "\""
        let refused = try await world.tool("send", ["--transient", "live"], input: tooLarge)
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("65537 bytes") && refused.stderr.contains("65536"), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1)
        // Exactly the limit is accepted; the listener's only line is that one.
        let largest = "\"" + String(repeating: "z", count: limit - 2) + "\""
        let accepted = try await world.tool("send", ["--transient", "live"], input: largest)
        #expect(accepted.status == 0, "\(accepted.stderr)")
        let output = try await waitOnOwnThread(child)
        #expect(output.status == 0)
        #expect(ListenLine.bases(of: output.stdout) == #"{"identifier":"live","message":"# + largest + "}\n")
    }

    @Test("send --transient exits 1 with one clear line when the bus cannot be reached")
    func busUnreachable() async throws {
        let executable = try productPath("wormholectl")
        let output = try await runOnOwnThread(
            executable,
            [
                "send", "--transient", "--group", world.group, "--bus-address", "unix:path=/nonexistent/bus", "live",
                "1",
            ],
            environment: world.environment)
        #expect(output.status == 1)
        #expect(output.stderr.hasPrefix("wormhole: cannot send transient message for 'live'"), "\(output.stderr)")
        #expect(output.stderr.contains("not stored"))
        #expect(output.stderr.split(separator: "\n").count == 1)
    }

    @Test("malformed Message signals from dbus-send are dropped with a line each; the hand-typed interface works")
    func malformedAndHandTyped() async throws {
        let child = try await world.listen(["live", "--count", "2", "--timeout", "120"])
        let plain = "org.wormhole.Notify1.Message"
        let bucket = NotifyContract.bucketInterface(for: name) + ".Message"
        try await world.dbusSignal(plain, ["string:\(name)", "int32:5"])
        try await world.dbusSignal(plain, ["string:\(name)"])
        try await world.dbusSignal(bucket, ["string:\(name)", "string:{bad"])
        try await world.dbusSignal(plain, ["int32:5", #"string:{"n":0}"#])
        try await world.dbusSignal(plain, ["string:\(name)", "string:" + String(repeating: "1", count: 70_000)])
        try await world.dbusSignal(plain, ["string:\(name)", #"string:{"n": 1}"#, "uint64:9"])
        try await world.dbusSignal(bucket, ["string:\(name)", #"string:{"n":2}"#])
        let output = try await waitOnOwnThread(child)
        #expect(output.status == 0, "the listener survived: \(output.stderr)")
        #expect(
            ListenLine.bases(of: output.stdout) == #"{"identifier":"live","message":{"n":1}}"# + "\n"
                + #"{"identifier":"live","message":{"n":2}}"# + "\n")
        let errors = output.stderr.split(separator: "\n").dropFirst()
        #expect(output.stderr.hasPrefix("ready\n"))
        #expect(errors.count == 4, "one line per malformed signal that names the identifier: \(errors)")
        #expect(errors.allSatisfy { $0.hasPrefix("wormhole: live: transient message for") }, "\(errors)")
        #expect(errors.first?.contains("'si', expected 'ss'") == true)
        #expect(errors.dropFirst().first?.contains("'s', expected 'ss'") == true)
        #expect(errors.dropFirst(2).first?.contains("not a JSON document") == true)
        #expect(errors.last?.contains("70000 bytes") == true)
    }

    @Test("8 writer processes with distinct messages: listen prints no line twice in a row, and the latest last")
    func noConsecutiveDuplicates() async throws {
        let child = try await world.listen(["--all"])
        let writers = 8
        let perWriter = 100
        let address = world.bus.address.rawValue
        try await withThrowingTaskGroup(of: ProcessOutput.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    try await world.peer([
                        "send-many", world.root.path, world.group, "dup", "\(perWriter)", address, "w\(writer)",
                    ])
                }
            }
            for try await output in group { #expect(output.status == 0, "\(output.stderr)") }
        }
        try world.inProcess().passMessage(CLICounter(n: -1), identifier: "sentinel")
        let lines = try await CLIWait.until(child.stdoutLines, "the sentinel line") { $0.contains(#""sentinel""#) }
        child.signal(SIGTERM)
        let deliveries = ListenLine.bases(lines.dropLast())
        #expect(!deliveries.isEmpty)
        var duplicates = 0
        for (previous, line) in zip(deliveries, deliveries.dropFirst()) where previous == line { duplicates += 1 }
        #expect(duplicates == 0, "\(duplicates) of \(deliveries.count) lines repeat the line before")
        let stored = try await world.tool("read", ["dup"])
        let latest = stored.stdout.trimmingCharacters(in: .newlines)
        #expect(
            deliveries.last == #"{"identifier":"dup","message":"# + latest + "}",
            "the last line is the latest stored message")
    }
}

import Dispatch
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// `wormholectl post` and `wormholectl observe`, run as the built binary against a private bus.
/// Every child gets its own `XDG_RUNTIME_DIR` (a fresh 0700 directory), so no two tests share
/// a notification table and none touches the user's.
/// The tests share the suite's bus, each observing names no other test posts; those that kill
/// the bus or observe every post on it have a bus of their own (``ownBus()``).
@Suite("wormholectl post / observe", .sharedBus, .tags(.contractCLI))
struct NotifyCLITests {
    let bus: TestBus
    let runtime: RuntimeDirectory
    init() throws {
        try self.init(bus: TestBus.shared())
    }

    init(bus: TestBus) throws {
        self.bus = bus
        runtime = try RuntimeDirectory()
    }

    /// This harness on a bus of its own, for a test that kills the bus or observes all of it.
    static func ownBus() throws -> NotifyCLITests { try NotifyCLITests(bus: TestBus()) }

    // MARK: Harness

    /// A fresh `mkdtemp` directory (mode 0700) for `XDG_RUNTIME_DIR`, removed on release.
    final class RuntimeDirectory: Sendable {
        let path: String
        init() throws {
            var template = Array("/tmp/wormhole-cli-XXXXXX".utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } }
            guard let made else { throw TestFailure("mkdtemp failed: errno \(errno)") }
            path = made
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static let guardSeconds: Double = 10

    var busArguments: [String] { ["--bus-address", bus.address.rawValue] }
    var environment: [String: String] { ["XDG_RUNTIME_DIR": runtime.path] }

    func wormhole(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(try productPath("wormholectl"), arguments, environment: environment)
    }

    /// A poster in this process, with its table in the children's runtime directory.
    func center() throws -> DarwinNotificationCenter {
        try DarwinNotificationCenter(busAddress: bus.address, sharedStateDirectory: runtime.path + "/wormhole")
    }

    /// Waits (as an event, with a bounded guard) for the first standard-error line, which must be `ready`.
    func ready(_ child: ChildProcess) async throws {
        let first = try await Self.within("ready") { await child.stderrLines.firstLine { _ in true } }
        #expect(first == "ready", "nothing comes before ready on standard error")
        if first != "ready" { throw TestFailure("observe did not get ready: \(child.outputSoFar)") }
    }

    /// Waits for the child to exit; kills it (and so fails the test) if it has not after the guard.
    func finish(_ child: ChildProcess) async -> ProcessOutput {
        let killer = Task {
            try? await Task.sleep(for: .seconds(Self.guardSeconds))
            if !Task.isCancelled { child.signal(SIGKILL) }
        }
        defer { killer.cancel() }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
        }
    }

    /// Runs a command to completion (off Swift's cooperative pool).
    func runToEnd(_ arguments: [String]) async throws -> ProcessOutput {
        await finish(try wormhole(arguments))
    }

    static func within<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T
    {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(guardSeconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw TestFailure("timed out after \(guardSeconds) s waiting for \(what)")
            }
            return value
        }
    }

    static func next<S: AsyncSequence & Sendable>(_ count: Int, from sequence: S) async throws -> [S.Element]
    where S.Element: Sendable, S.Failure == Never {
        try await within("\(count) deliveries") {
            var result: [S.Element] = []
            for await element in sequence {
                result.append(element)
                if result.count == count { break }
            }
            return result
        }
    }

    func dbusSend(interface: String, _ arguments: [String]) async throws {
        let output = await finish(
            try ChildProcess(
                "/usr/bin/env",
                [
                    "dbus-send", "--bus=\(bus.address.rawValue)", "--type=signal", NotifyContract.objectPath,
                    interface + ".Posted",
                ] + arguments))
        #expect(output.status == 0, "dbus-send: \(output.stderr)")
    }

    /// The exact line `observe` prints.
    /// The line `observe` prints: the name as a JSON string with `/` not escaped (as
    /// `JSONEncoder` with `.withoutEscapingSlashes` writes it).
    static func line(_ name: String, _ state: UInt64?) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        let encoded = String(decoding: try encoder.encode(name), as: UTF8.self)
        return "{\"name\":\(encoded),\"state\":\(state.map(String.init) ?? "null"),\"reason\":\"posted\"}"
    }

    static func lines(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    /// A failure: the given status, exactly one line on standard error naming `value`, nothing
    /// on standard output.
    static func expectOneLineFailure(_ output: ProcessOutput, status: Int32, naming value: String) {
        #expect(output.status == status, "\(output.stderr)")
        #expect(output.stdout.isEmpty)
        #expect(lines(output.stderr).count == 1, "one line on standard error, not \(output.stderr.debugDescription)")
        #expect(output.stderr.hasSuffix("\n"))
        #expect(output.stderr.contains(value), "\(output.stderr.debugDescription) names \(value.debugDescription)")
    }

    /// A usage error found by the argument parser: status 64, nothing on standard output, the
    /// first line names `value`, and the lines after it are ArgumentParser's usage and help hint.
    static func expectUsageFailure(_ output: ProcessOutput, naming value: String) {
        #expect(output.status == 64, "\(output.stderr)")
        #expect(output.stdout.isEmpty)
        let lines = lines(output.stderr)
        #expect(lines.first?.contains(value) == true, "the first line names \(value): \(output.stderr)")
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("Usage: ") || $0.hasPrefix("  See ") }, "\(output.stderr)")
    }

    // MARK: Tests

    @Test(
        "a post made here reaches `wormholectl observe` in another process",
        arguments: [
            // Not the dbus-send test's name: the tests share the bus.
            ("com.example.app.reload", UInt64(42)), ("group.com.example.lines/wormhole/clip", UInt64.max),
        ])
    func postReachesObserver(name: String, state: UInt64) async throws {
        let child = try wormhole(["observe", name, "--count", "1"] + busArguments)
        try await ready(child)
        let poster = try center()
        try poster.post(NotificationName(name + ".other"), state: 1)
        try poster.post(NotificationName(name), state: state)
        let output = await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout == (try Self.line(name, state)) + "\n")
        #expect(output.stderr == "ready\n")
    }

    @Test("dbus-send triggers on the plain interface (no state) and on the bucket reach observe")
    func dbusSendReachesObserver() async throws {
        let name = "com.example.app.refresh"
        let child = try wormhole(["observe", name, "--count", "2"] + busArguments)
        try await ready(child)
        try await dbusSend(interface: "org.wormhole.Notify1", ["string:\(name)"])
        try await dbusSend(interface: "org.wormhole.Notify1.BE6A2", ["string:\(name)", "uint64:7"])
        let output = await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(
            Self.lines(output.stdout) == [
                #"{"name":"com.example.app.refresh","state":null,"reason":"posted"}"#,
                #"{"name":"com.example.app.refresh","state":7,"reason":"posted"}"#,
            ])
    }

    static let awkwardNames = [
        "it's", #"back\slash"#, "with space", "dots.and/slashes/x", #"both '\' mixed''"#, "ünïcode/名前",
        "quote\"d", "-starts-with-dash",
    ]

    @Test("awkward names reach `observe` from here, and `post` reaches observers here")
    func awkwardNamesBothWays() async throws {
        let names = Self.awkwardNames
        // `--` so that a name starting with '-' is not read as an option.
        let child = try wormhole(["observe", "--count", "\(names.count)"] + busArguments + ["--"] + names)
        try await ready(child)
        let poster = try center()
        for (index, name) in names.enumerated() {
            try poster.post(NotificationName(name + "x"), state: 0)
            try poster.post(NotificationName(name), state: UInt64(index + 1))
        }
        let output = await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(Self.lines(output.stdout) == (try names.enumerated().map { try Self.line($1, UInt64($0 + 1)) }))

        let observing = try center()
        var streams: [NotificationStream] = []
        for name in names { streams.append(try await observing.notifications(name: NotificationName(name))) }
        for (index, name) in names.enumerated() {
            let posted = try await runToEnd(["post", "--state", "\(index + 10)"] + busArguments + ["--", name])
            #expect(posted.status == 0, "post \(name): \(posted.stderr)")
            #expect(posted.stdout.isEmpty && posted.stderr.isEmpty)
        }
        for (index, stream) in streams.enumerated() {
            let delivered = try await Self.next(1, from: stream)
            #expect(delivered.map(\.name.rawValue) == [names[index]])
            #expect(delivered.map(\.state) == [UInt64(index + 10)])
        }
    }

    @Test(
        "a 900-byte name works from `post` to `observe`")
    func longestName() async throws {
        let name = "it's/" + String(repeating: "é", count: 447) + "x"
        #expect(name.utf8.count == 900)
        let child = try wormhole(["observe", name, "--count", "1"] + busArguments)
        try await ready(child)
        let posted = try await runToEnd(["post", name, "--state", "900"] + busArguments)
        #expect(posted.status == 0, "\(posted.stderr)")
        let output = await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout == (try Self.line(name, 900)) + "\n")
    }

    @Test(
        "names that are too long or empty are refused by post and observe with exit 64",
        arguments: [
            (String(repeating: "n", count: 901), "901 bytes"),
            (String(repeating: "é", count: 450) + "n", "901 bytes"),
            ("", "empty"),
        ])
    func invalidNames(name: String, problem: String) async throws {
        Self.expectOneLineFailure(try await runToEnd(["post", name] + busArguments), status: 64, naming: problem)
        Self.expectOneLineFailure(try await runToEnd(["observe", name] + busArguments), status: 64, naming: problem)
        Self.expectOneLineFailure(
            try await runToEnd(["observe", "ok/name", name, "--count", "1"] + busArguments), status: 64, naming: problem
        )
    }

    @Test(
        "an argument that is not UTF-8 is refused with exit 64",
        .swiftToolOnly(
            "the Swift tool's own wording for raw argv bytes (argument N (bytes …)); wormhole-py names the value"),
        arguments: ["post", "observe"])
    func notUTF8(command: String) async throws {
        // Process takes Swift strings, which cannot hold invalid UTF-8: let bash build the byte.
        let script = #"exec "$0" "$1" $'a\xffb' --bus-address "$2""#
        let output = await finish(
            try ChildProcess(
                "/usr/bin/env", ["bash", "-c", script, try productPath("wormholectl"), command, bus.address.rawValue],
                environment: environment))
        Self.expectOneLineFailure(output, status: 64, naming: "not valid UTF-8")
        #expect(output.stderr.contains("61 ff 62"), "the bad bytes are shown: \(output.stderr)")
    }

    @Test("observe --prefix delivers the family and nothing else")
    func prefixFamily() async throws {
        let child = try wormhole(["observe", "--prefix", "group/box/", "--count", "3"] + busArguments)
        try await ready(child)
        let poster = try center()
        for stranger in ["group/boxer", "group/other/a", "group/box", "group/", "box/a"] {
            try poster.post(NotificationName(stranger), state: 0)
        }
        try poster.post(NotificationName("group/box/a"), state: 1)
        try poster.post(NotificationName("group/box/deep/b"), state: 2)
        try poster.post(NotificationName("group/box/z"), state: 3)
        let output = await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(
            Self.lines(output.stdout) == [
                try Self.line("group/box/a", 1), try Self.line("group/box/deep/b", 2), try Self.line("group/box/z", 3),
            ])
    }

    @Test("observe --prefix refuses a prefix without a trailing '/' with exit 64")
    func prefixWithoutSlash() async throws {
        Self.expectOneLineFailure(
            try await runToEnd(["observe", "--prefix", "group/box"] + busArguments), status: 64, naming: "'group/box'")
    }

    @Test(
        "malformed Posted signals do not stop observe, which prints the next good post",
        .swiftToolOnly(
            "wormhole-py's observe prints a Posted signal sent from another object path (/elsewhere): the Python library does not check the path (follow-up)"
        ))
    func malformedSignals() async throws {
        // Not the prefix test's family: the tests share the bus.
        let name = "malformed/box/a"
        let child = try wormhole(["observe", name, "--count", "1"] + busArguments)
        let prefixChild = try wormhole(["observe", "--prefix", "malformed/box/", "--count", "1"] + busArguments)
        try await ready(child)
        try await ready(prefixChild)
        let sender = try BusConnection(address: bus.address)
        let posted = try MemberName("Posted")
        let notify = try ObjectPath(NotifyContract.objectPath)
        let plain = try InterfaceName(NotifyContract.plainInterface)
        let wrongBucket = try InterfaceName(NotifyContract.bucketInterface(for: "another name"))
        for (path, interface, arguments): (ObjectPath, InterfaceName, [DBusValue]) in [
            (notify, plain, []), (notify, plain, [.int32(1)]), (notify, wrongBucket, [.string(name), .uint64(2)]),
            (try ObjectPath("/elsewhere"), plain, [.string(name), .uint64(3)]),
            (notify, try InterfaceName("org.example.Other"), [.string(name), .uint64(4)]),
        ] {
            try sender.emit(Signal(path: path, interface: interface, member: posted, arguments: arguments))
        }
        try await dbusSend(
            interface: NotifyContract.bucketInterface(for: name), ["string:\(name)", "uint64:5", "string:extra"])
        for output in [await finish(child), await finish(prefixChild)] {
            #expect(output.status == 0, "\(output.stderr)")
            #expect(output.stdout == (try Self.line(name, 5)) + "\n")
        }
    }

    @Test("observe --count 2 exits 0 after two lines")
    func countTwo() async throws {
        let child = try wormhole(["observe", "count/a", "count/b", "--count", "2"] + busArguments)
        try await ready(child)
        let poster = try center()
        try poster.post(NotificationName("count/b"), state: 1)
        try poster.post(NotificationName("count/a"), state: 2)
        let output = await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(Self.lines(output.stdout) == [try Self.line("count/b", 1), try Self.line("count/a", 2)])
        #expect(output.stderr == "ready\n")
    }

    @Test("observe exits 0 quietly when the reader of its output has gone (EPIPE)")
    func closedPipe() async throws {
        // The reader closes its end of the pipe and says so on standard error; observe's next
        // line then meets EPIPE. bash reports observe's exit status once the pipeline is done.
        let executable = try productPath("wormholectl")
        let script =
            "\"$0\" observe pipe/a --bus-address \"$1\" | (exec 0<&-; echo closed >&2); "
            + "echo \"observe exited ${PIPESTATUS[0]}\""
        let child = try ChildProcess(
            "/usr/bin/env", ["bash", "-c", script, executable, bus.address.rawValue], environment: environment)
        let announced = try await Self.within("ready and closed") {
            var lines: [String] = []
            for await line in child.stderrLines {
                lines.append(line)
                if lines.count == 2 { break }
            }
            return lines
        }
        #expect(Set(announced) == ["ready", "closed"])
        try center().post(NotificationName("pipe/a"), state: 1)
        let output = await finish(child)
        #expect(output.stdout == "observe exited 0\n")
        #expect(Set(output.stderr.split(separator: "\n")) == ["ready", "closed"], "no error line: \(output.stderr)")
    }

    @Test("observe --timeout exits 124 with --count and 0 without")
    func timeouts() async throws {
        let counted = try wormhole(["observe", "never/posted", "--count", "1", "--timeout", "0.5"] + busArguments)
        let uncounted = try wormhole(["observe", "never/posted", "--timeout", "0.5"] + busArguments)
        async let countedOutput = finish(counted)
        async let uncountedOutput = finish(uncounted)
        let (withCount, withoutCount) = await (countedOutput, uncountedOutput)
        #expect(withCount.status == 124, "\(withCount.stderr)")
        #expect(withCount.stdout.isEmpty)
        #expect(Self.lines(withCount.stderr).first == "ready")
        #expect(withoutCount.status == 0, "\(withoutCount.stderr)")
        #expect(withoutCount.stdout.isEmpty)
        #expect(withoutCount.stderr == "ready\n")
    }

    @Test(
        "--timeout bounds the whole command: a bus that accepts and never answers cannot hold observe or listen past it",
        arguments: [["observe", "some.name"], ["listen", "--group", "group.cli", "id"]])
    func timeoutCoversConnecting(command: [String]) async throws {
        let silent = try SilentSocket()
        let address = "unix:path=\(silent.path)"
        // The connect deadline (5 s) is longer than the command's timeout: the timeout wins.
        let counted = try wormhole(command + ["--count", "1", "--timeout", "0.5", "--bus-address", address])
        let output = await finish(counted)
        #expect(output.status == 124, "\(output.stderr)")
        #expect(output.stdout.isEmpty)
        #expect(
            Self.lines(output.stderr) == [
                "wormhole: timed out after 0.5 s before listening started (the bus did not answer in time)"
            ])
    }

    // observe and listen wait for an unreachable bus instead (ReliabilityCLITests).
    @Test("an unreachable bus exits 1 with one line naming the address", arguments: ["post"])
    func unreachableBus(command: String) async throws {
        let output = try await runToEnd([command, "some.name", "--bus-address", "unix:path=/nonexistent"])
        Self.expectOneLineFailure(output, status: 1, naming: "unix:path=/nonexistent")
    }

    @Test(
        "an error line cuts a very long value with an ellipsis and its length",
        .swiftToolOnly("wormhole-py prints long values whole (follow-up)"))
    func longValueInError() async throws {
        let address = "unix:path=/nonexistent/" + String(repeating: "a", count: 10_000)
        let output = try await runToEnd(["post", "some.name", "--bus-address", address])
        #expect(output.status == 1)
        #expect(output.stderr.split(separator: "\n").count == 1)
        #expect(output.stderr.utf8.count < 600, "\(output.stderr.utf8.count) bytes: \(output.stderr.prefix(300))")
        #expect(output.stderr.contains("'unix:path=/nonexistent/aaaa"), "\(output.stderr.prefix(300))")
        #expect(output.stderr.contains("(10023 bytes)"), "\(output.stderr.prefix(300))")
    }

    @Test("a bad --bus-address value exits 64 naming it", arguments: ["post", "observe"])
    func badBusAddress(command: String) async throws {
        let output = try await runToEnd([command, "some.name", "--bus-address", "no-colon-here"])
        Self.expectOneLineFailure(output, status: 64, naming: "no-colon-here")
    }

    @Test(
        "post --state carries a 64-bit state; a bad state is a usage error",
        .swiftToolOnly(
            "checks the Swift tool's shared state table (notify-state-v1), which the contract does not describe"))
    func postState() async throws {
        let observing = try center()
        let stream = try await observing.notifications(name: NotificationName("state/cli"))
        let posted = try await runToEnd(["post", "state/cli", "--state", "18446744073709551615"] + busArguments)
        #expect(posted.status == 0, "\(posted.stderr)")
        #expect(try await Self.next(1, from: stream).map(\.state) == [.max])
        #expect(
            observing.sharedState(of: "state/cli") == .max, "the child wrote the shared table")
        let bad = try await runToEnd(["post", "state/cli", "--state", "18446744073709551616"] + busArguments)
        Self.expectUsageFailure(bad, naming: "'18446744073709551616'")
    }

    // MARK: Interop and reporting

    @Test(
        "a state sent as any integer type of 0 or more is read; a negative or non-integer one is no state, with the reason logged",
        .swiftToolOnly("checks the Swift library's log lines")
    )
    func stateTypes() async throws {
        let name = "com.example.types"
        let cases: [(argument: String, state: UInt64?)] = [
            ("uint64:5", 5), ("int32:5", 5), ("int64:5", 5), ("uint32:5", 5), ("uint16:5", 5), ("int16:5", 5),
            ("byte:5", 5), ("int32:2147483647", 2_147_483_647), ("int32:-1", nil), ("int64:-1", nil),
            ("int16:-7", nil), ("string:5", nil), ("double:5", nil), ("boolean:true", nil),
        ]
        let child = try ChildProcess(
            try productPath("wormholectl"), ["observe", name, "--count", "\(cases.count)"] + busArguments,
            environment: environment.merging(["WORMHOLE_LOG": "debug"]) { $1 })
        _ = try await Self.within("ready") { await child.stderrLines.firstLine { $0 == "ready" } }
        // Sent one after another (each dbus-send has exited before the next starts), on the plain
        // interface as dbus-python and hand-typed triggers send them.
        for (argument, _) in cases {
            try await dbusSend(interface: NotifyContract.plainInterface, ["string:\(name)", argument])
        }
        let output = await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(Self.lines(output.stdout) == (try cases.map { try Self.line(name, $0.state) }))
        for shown in ["int32 -1", "int64 -1", "int16 -7", "string '5'", "double 5.0", "boolean true"] {
            #expect(
                output.stderr.contains("carried the state \(shown), not an integer of 0 or more"),
                "the log names \(shown): \(output.stderr)")
        }
    }

    @Test(
        "observe --all sees every post whatever its name: Wormhole's on their buckets and hand-typed ones",
        .swiftToolOnly("wormhole-py's observe --all differs on hand-typed posts (follow-up)"))
    func observeAll() async throws {
        // It observes every post on the bus: a bus of its own, not the suite's.
        let this = try Self.ownBus()
        let child = try this.wormhole(["observe", "--all", "--count", "3"] + this.busArguments)
        try await this.ready(child)
        let poster = try this.center()
        try poster.post(NotificationName("nobody.observes/this"), state: 1)
        // A Posted on another name's bucket is not a valid post: dropped, as observers drop it.
        try await this.dbusSend(
            interface: NotifyContract.bucketInterface(for: "other"), ["string:wrong/bucket", "uint64:9"])
        try await this.dbusSend(interface: NotifyContract.plainInterface, ["string:typed.by/hand"])
        try poster.post(NotificationName("it's"), state: 3)
        let output = await this.finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(
            Self.lines(output.stdout) == [
                try Self.line("nobody.observes/this", 1), try Self.line("typed.by/hand", nil), try Self.line("it's", 3),
            ])
        #expect(output.stderr == "ready\n")
    }

    @Test("observe --all refuses names and --prefix with exit 64", arguments: [["some.name"], ["--prefix"]])
    func observeAllConflicts(extra: [String]) async throws {
        Self.expectUsageFailure(try await runToEnd(["observe", "--all"] + extra + busArguments), naming: "--all")
    }

    @Test("observe says on standard error when the bus is lost and when it is back, then prints posts again")
    func observeReportsBus() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let this = try Self.ownBus()
        let child = try this.wormhole(["observe", "back/again", "--count", "1"] + this.busArguments)
        try await this.ready(child)
        this.bus.kill()
        let lost = try await Self.within("the lost line") { await child.stderrLines.firstLine { _ in true } }
        #expect(lost == "wormhole: lost the bus at '\(this.bus.address.rawValue)'; waiting for it to come back")
        try this.bus.start()
        let back = try await Self.within("the back line") { await child.stderrLines.firstLine { _ in true } }
        #expect(
            back
                == "wormhole: back on the bus at '\(this.bus.address.rawValue)'; posts made while it was away were missed"
        )
        try this.center().post(NotificationName("back/again"), state: 2)
        let output = await this.finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout == (try Self.line("back/again", 2)) + "\n", "the catch-up itself is not a line")
    }
}

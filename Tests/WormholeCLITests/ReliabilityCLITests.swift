// Hostile input and faults as the `wormholectl` tool meets them: messages over the size limit
// (planted sparse files far larger than memory), and a listener started while no bus is there.

import Dispatch
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// One test's world: its suite's bus (or a bus of its own), an application group of its own (so
/// that tests sharing the bus never hear each other), an empty container root and runtime
/// directory.
private final class ReliabilityWorld: Sendable {
    let group = uniqueName("group.com.example.reliability")

    let bus: TestBus
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory

    /// A world on the suite's shared bus, or on `bus` (a test that kills its bus passes one of its
    /// own: `ReliabilityWorld(bus: TestBus())`).
    init(bus: TestBus? = nil) throws {
        self.bus = try bus ?? TestBus.shared()
        root = try TemporaryDirectory("reliability-root")
        runtime = try TemporaryDirectory("reliability-runtime")
    }

    var environment: [String: String] { ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path] }

    /// `command` may name a subcommand too (`defaults observe`).
    func arguments(_ command: String, _ rest: [String]) -> [String] {
        command.split(separator: " ").map(String.init) + ["--group", group, "--bus-address", bus.address.rawValue]
            + rest
    }

    /// Runs `wormholectl` to completion on a Dispatch thread.
    func wormhole(_ command: String, _ rest: [String], input: String? = nil) async throws -> ProcessOutput {
        let executable = try productPath("wormholectl")
        let arguments = arguments(command, rest)
        let environment = environment
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result { try run(executable, arguments, input: input, environment: environment) })
            }
        }
    }

    func start(_ command: String, _ rest: [String]) throws -> ChildProcess {
        try ChildProcess(try productPath("wormholectl"), arguments(command, rest), environment: environment)
    }

    var directoryPath: String { "\(root.path)/\(group)/wormhole" }

    func makeDirectory() throws {
        for path in ["\(root.path)/\(group)", directoryPath] where mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw TestFailure("mkdir \(path): errno \(errno)")
        }
    }

    /// A sparse `ID.json` of `size` bytes.
    func plantSparse(_ identifier: String, size: Int) throws {
        try makeDirectory()
        let path = "\(directoryPath)/\(identifier).json"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { close(fd) }
        guard ftruncate(fd, off_t(size)) == 0 else { throw TestFailure("ftruncate \(path): errno \(errno)") }
    }

    /// Runs `wormholectl` with `arguments` (no bus address) and exactly `environment`, on a Dispatch thread.
    static func runWithoutBus(_ arguments: [String], environment: [String: String]) async throws -> ProcessOutput {
        let executable = try productPath("wormholectl")
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try run(executable, arguments, environment: environment) })
            }
        }
    }

    static func wait(_ child: ChildProcess) async throws -> ProcessOutput {
        try await within("the child to exit") {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
            }
        }
    }
}

/// The tests share the suite's bus, each in a group of its own; those that kill the bus have a bus
/// of their own.
@Suite("wormholectl under hostile input and faults", .sharedBus)
struct ReliabilityCLITests {
    private let world: ReliabilityWorld
    init() throws { world = try ReliabilityWorld() }

    /// 64 GiB, sparse: reading it would exhaust memory, so a passing test proves it was not read.
    static let huge = 64 << 30

    @Test("read refuses a planted huge file from its size, naming identifier, size and limit")
    func readRefusesHugeFile() async throws {
        try world.plantSparse("huge", size: Self.huge)
        let output = try await world.wormhole("read", ["huge"])
        #expect(output.status == 1)
        #expect(output.stdout == "")
        #expect(output.stderr.contains("'huge'") && output.stderr.contains("\(Self.huge) bytes"), "\(output.stderr)")
        #expect(output.stderr.contains("limit of 67108864 bytes"), "\(output.stderr)")
        #expect(output.stderr.split(separator: "\n").count == 1)
        // --max-size changes the limit both ways.
        try world.plantSparse("kilo", size: 1500)
        let refused = try await world.wormhole("read", ["kilo", "--max-size", "1K"])
        #expect(refused.status == 1 && refused.stderr.contains("limit of 1024 bytes"), "\(refused.stderr)")
        let allowed = try await world.wormhole("read", ["kilo", "--max-size", "2K"])
        #expect(allowed.status == 1 && allowed.stderr.contains("not a JSON document"), "\(allowed.stderr)")
        let bad = try await world.wormhole("read", ["kilo", "--max-size", "12Q"])
        #expect(bad.status == 64 && bad.stderr.contains("12Q"), "\(bad.stderr)")
    }

    @Test("listen reports a planted huge file (stored and posted) and goes on")
    func listenReportsHugeFile() async throws {
        try world.plantSparse("huge", size: Self.huge)
        let child = try world.start("listen", ["huge", "--stored", "--count", "1", "--timeout", "120"])
        let first = try await next(2, from: child.stderrLines, "ready, then the start-up error")
        #expect(first.first == "ready")
        #expect(
            first.last?.contains("huge: message 'huge'") == true && first.last?.contains("\(Self.huge) bytes") == true)
        let wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(world.group), containerRoot: world.root.path,
            busAddress: world.bus.address, sharedStateDirectory: world.runtime.path)
        wormhole.passMessage(identifier: "huge")
        let second = try await next(1, from: child.stderrLines, "the posted error")
        #expect(second.first?.contains("over the limit of 67108864 bytes") == true, "\(second)")
        try wormhole.passMessage(["fits": 1], identifier: "huge")
        let output = try await ReliabilityWorld.wait(child)
        #expect(output.status == 0)
        #expect(ListenLine.bases(of: output.stdout) == #"{"identifier":"huge","message":{"fits":1}}"# + "\n")
    }

    @Test(
        "listen catches a message whose sender died before its signal (a rename with no post): delivered as a catch-up")
    func listenCatchesAWriteWithoutSignal() async throws {
        try world.makeDirectory()
        let child = try world.start("listen", ["inbox", "--count", "2", "--timeout", "120"])
        #expect(try await next(1, from: child.stderrLines, "the ready line") == ["ready"])
        // The contract's atomic replace, from a shell, with no post: a sender killed between the two.
        let script = "printf '%s' \"$1\" > \"$2/.inbox.1-1.tmp\" && mv \"$2/.inbox.1-1.tmp\" \"$2/inbox.json\""
        let shell = try run("/bin/sh", ["-c", script, "sh", #"{"orphan":1}"#, world.directoryPath])
        #expect(shell.status == 0, "\(shell.stderr)")
        let orphan = try await next(1, from: child.stdoutLines, "the message stored without a signal")
        #expect(
            orphan.first?.contains(#""message":{"orphan":1},"reason":"catchUp","sentAt":null"#) == true, "\(orphan)")
        let sent = try await world.wormhole("send", ["inbox", #"{"posted":2}"#])
        #expect(sent.status == 0, "\(sent.stderr)")
        let posted = try await next(1, from: child.stdoutLines, "the posted message, delivered once after the orphan")
        #expect(posted.first?.contains(#""message":{"posted":2},"reason":"posted""#) == true, "\(posted)")
        let output = try await ReliabilityWorld.wait(child)
        #expect(output.status == 0, "\(output.stderr)")
    }

    @Test("send refuses a message over --max-size from an argument, a file and a pipe; nothing is stored")
    func sendRefusesOversize() async throws {
        let big = "[" + String(repeating: "1,", count: 1100) + "1]"  // 2,203 bytes
        let fromArgument = try await world.wormhole("send", ["m", "--max-size", "2K", big])
        #expect(fromArgument.status == 1)
        #expect(
            fromArgument.stderr.contains("'m'") && fromArgument.stderr.contains("2203 bytes"), "\(fromArgument.stderr)")
        #expect(fromArgument.stderr.contains("limit of 2048 bytes"))
        let fromPipe = try await world.wormhole("send", ["m", "--max-size", "1K"], input: big)
        #expect(fromPipe.status == 1 && fromPipe.stderr.contains("more than 1024 bytes"), "\(fromPipe.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(world.directoryPath)/m.json"))
        // Within the limit it is stored, without the white space around it.
        let fits = try await world.wormhole("send", ["m", "--max-size", "3K"], input: "\n  " + big + "\n\n")
        #expect(fits.status == 0, "\(fits.stderr)")
        let read = try await world.wormhole("read", ["m", "--max-size", "3K"])
        #expect(read.stdout == big + "\n")
    }

    @Test(
        "listen started while the bus is down prints ready, says it listens through the directory, delivers, then moves to the bus"
    )
    func listenStartedBeforeTheBus() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let world = try ReliabilityWorld(bus: TestBus())
        world.bus.kill()
        let child = try world.start("listen", ["late", "--timeout", "120"])
        let lines = try await next(2, from: child.stderrLines, "ready, then where it listens")
        #expect(lines.first == "ready")
        #expect(
            lines.last
                == "wormhole: cannot connect to the bus at '\(world.bus.address.rawValue)': Failed to connect to socket "
                + "\(world.bus.address.rawValue.dropFirst("unix:path=".count)): No such file or directory; listening through the "
                + "wormhole directory (inotify) until the bus can be reached", "\(lines)")
        let sent = try await world.wormhole("send", ["late", #"{"n":1}"#])
        #expect(sent.status == 0)
        #expect(
            try await next(1, from: child.stdoutLines, "the line") == [
                #"{"identifier":"late","message":{"n":1},"reason":"posted","sentAt":null}"#
            ])
        try world.bus.start()
        let back = try await next(1, from: child.stderrLines, "the line saying it is on the bus")
        #expect(back.first?.hasPrefix("wormhole: back on the bus at") == true, "\(back)")
        child.signal(SIGTERM)
        _ = try await ReliabilityWorld.wait(child)
    }

    @Test(
        "listen --journal and defaults observe started while the bus is down: ready, where they listen, deliver, then the bus",
        arguments: ["journal", "defaults"])
    func filesBackedSubscriptionsStartBeforeTheBus(kind: String) async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let world = try ReliabilityWorld(bus: TestBus())
        world.bus.kill()
        let (command, arguments, directory): (String, [String], String) =
            kind == "journal"
            ? ("listen", ["--journal", "log", "--timeout", "120"], "the journal directory")
            : ("defaults observe", ["key", "--timeout", "120"], "the Preferences directory")
        let write: (Int) -> (String, [String]) = { n in
            kind == "journal" ? ("send", ["--journal", "log", "\(n)"]) : ("defaults write", ["key", "\(n)"])
        }
        let expected: (Int) -> String = { n in kind == "journal" ? #""message":\#(n)}"# : #""value":\#(n)}"# }
        let child = try world.start(command, arguments)
        let lines = try await next(2, from: child.stderrLines, "ready, then where it listens")
        #expect(lines.first == "ready")
        #expect(lines.last?.hasPrefix("wormhole: cannot connect to the bus at") == true, "\(lines)")
        #expect(
            lines.last?.hasSuffix("listening through \(directory) (inotify) until the bus can be reached") == true,
            "\(lines)")
        let (first, firstArguments) = write(1)
        #expect(try await world.wormhole(first, firstArguments).status == 0)
        let line = try await next(1, from: child.stdoutLines, "the change without a bus")
        #expect(line.first?.hasSuffix(expected(1)) == true, "\(line)")
        try world.bus.start()
        let back = try await next(1, from: child.stderrLines, "the line saying it is on the bus")
        #expect(back.first?.hasPrefix("wormhole: back on the bus at") == true, "\(back)")
        let (second, secondArguments) = write(2)
        #expect(try await world.wormhole(second, secondArguments).status == 0)
        let onBus = try await next(1, from: child.stdoutLines, "the change on the bus")
        #expect(onBus.first?.hasSuffix(expected(2)) == true, "\(onBus)")
        child.signal(SIGTERM)
        _ = try await ReliabilityWorld.wait(child)
    }

    @Test(
        "with no session bus at all (no DBUS_SESSION_BUS_ADDRESS, no --bus-address) listen works through the directory")
    func listenWithNoSessionBus() async throws {
        // Set and empty counts as not set (the test support otherwise gives children an address
        // that leads nowhere, so that none finds the user's own bus).
        var environment = world.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = ""
        let child = try ChildProcess(
            try productPath("wormholectl"),
            ["listen", "--group", world.group, "solo", "--count", "2", "--timeout", "120"],
            environment: environment)
        let lines = try await next(2, from: child.stderrLines, "ready, then where it listens")
        #expect(lines.first == "ready")
        #expect(lines.last?.contains("DBUS_SESSION_BUS_ADDRESS is not set") == true, "\(lines)")
        for n in 1...2 {
            let sent = try await ReliabilityWorld.runWithoutBus(
                ["send", "--group", world.group, "solo", "{\"n\":\(n)}"], environment: environment)
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(try await next(1, from: child.stdoutLines, "line \(n)").first?.contains("\"n\":\(n)") == true)
        }
        let output = try await ReliabilityWorld.wait(child)
        #expect(output.status == 0, "\(output.stderr)")
    }

    @Test(
        "listen --require-bus and observe started while the bus is down say so, wait, then print ready and deliver",
        arguments: ["listen", "observe"])
    func startedBeforeTheBus(command: String) async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let world = try ReliabilityWorld(bus: TestBus())
        world.bus.kill()
        let name = "\(world.group)/wormhole/late"
        let child =
            command == "listen"
            ? try world.start("listen", ["late", "--count", "1", "--timeout", "120", "--require-bus"])
            : try ChildProcess(
                try productPath("wormholectl"),
                ["observe", name, "--count", "1", "--timeout", "120", "--bus-address", world.bus.address.rawValue],
                environment: world.environment)
        let waiting = try await next(1, from: child.stderrLines, "the line saying the bus is unreachable")
        #expect(
            waiting.first?.contains("cannot connect to the bus at '\(world.bus.address.rawValue)'") == true,
            "\(waiting)")
        #expect(waiting.first?.contains("still trying") == true, "\(waiting)")
        try world.bus.start()
        let ready = try await next(1, from: child.stderrLines, "ready once the bus is back")
        #expect(ready == ["ready"])
        let wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(world.group), containerRoot: world.root.path,
            busAddress: world.bus.address, sharedStateDirectory: world.runtime.path)
        let report = try wormhole.passMessage(["late": true], identifier: "late")
        #expect(report.notified)
        wormhole.flush()
        let output = try await ReliabilityWorld.wait(child)
        #expect(output.status == 0, "\(output.stderr)")
        if command == "listen" {
            #expect(ListenLine.bases(of: output.stdout) == #"{"identifier":"late","message":{"late":true}}"# + "\n")
        } else {
            #expect(output.stdout.hasPrefix(#"{"name":"\#(name)","state":"#), "\(output.stdout)")
        }
    }

    @Test("with the bus never coming back, --timeout still ends listen --require-bus (124 with --count)")
    func timeoutWhileWaitingForTheBus() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let world = try ReliabilityWorld(bus: TestBus())
        world.bus.kill()
        let child = try world.start("listen", ["never", "--count", "1", "--timeout", "1", "--require-bus"])
        let output = try await ReliabilityWorld.wait(child)
        #expect(output.status == 124)
        let lines = output.stderr.split(separator: "\n")
        #expect(
            lines.count == 2 && lines[0].contains("still trying") && lines[1].contains("timed out after 1.0 s"),
            "\(lines)")
    }
}

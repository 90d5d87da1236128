// What the `wormholectl` tool says about itself and about mistakes: --version, unknown commands,
// ArgumentParser's suggestions and usage, --state and --rounds errors, log settings, `list`, and
// `read` of something that is not there.

import Dispatch
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

@Suite("wormholectl --version, list, errors and log settings", .tags(.contractCLI))
struct CommandLineTests {
    static let group = "group.com.example.cli"
    /// No bus: `send` stores and exits 0 with a warning, and the other commands tested here fail
    /// before they connect. The one test that needs a bus starts its own, so the many small
    /// cases here start no daemon.
    static let noBus = "unix:path=/nonexistent/wormhole-cli-tests-no-bus"
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory
    init() throws {
        root = try TemporaryDirectory("cli-list-root")
        runtime = try TemporaryDirectory("cli-list-runtime")
    }

    var environment: [String: String] { ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path] }

    func wormhole(_ arguments: [String], environment extra: [String: String] = [:], input: String? = nil) async throws
        -> ProcessOutput
    {
        let executable = try productPath("wormholectl")
        let environment = environment.merging(extra) { $1 }
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result { try run(executable, arguments, input: input, environment: environment) })
            }
        }
    }

    func send(_ identifier: String, _ json: String, directory: String = "wormhole") async throws {
        let output = try await wormhole(
            ["send", "--group", Self.group, "--directory", directory, "--bus-address", Self.noBus, identifier, json])
        #expect(output.status == 0, "\(output.stderr)")
    }

    static func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    // MARK: Version and commands

    @Test(
        "--version prints the one version constant, for wormhole and wormholectl bench",
        .swiftToolOnly("the version line is the Swift package's, and bench is in the Swift tool only"))
    func version() async throws {
        let tool = try await wormhole(["--version"])
        #expect(tool.status == 0)
        #expect(tool.stdout == "wormholectl \(WormholeVersion.description)\n")
        let bench = try await wormhole(["bench", "--version"])
        #expect(bench.status == 0, "\(bench.stderr)")
        #expect(bench.stdout == "wormhole-bench \(WormholeVersion.description)\n")
    }

    @Test(
        "an unknown command is an error with exit 64 and the nearest command, also after `help`",
        arguments: [
            (["sned"], "' has no command 'sned'. Did you mean 'send'?"),
            (["help", "sned"], "' has no command 'sned'. Did you mean 'send'?"),
            (["help", "defaults", "wrte"], "defaults' has no command 'wrte'. Did you mean 'write'?"),
            (["defaults", "wrte"], "Did you mean 'write'?"),
        ])
    func unknownCommand(arguments: [String], expected: String) async throws {
        let output = try await wormhole(arguments)
        #expect(output.status == 64)
        #expect(output.stdout.isEmpty)
        #expect(output.stderr.hasPrefix("wormhole: "), "\(output.stderr)")
        #expect(output.stderr.contains(expected), "\(output.stderr)")
    }

    @Test(
        "help of a real command still works", .swiftToolOnly("checks ArgumentParser's help layout"),
        arguments: [["help", "send"], ["help", "defaults", "write"], ["list", "--help"]])
    func helpWorks(arguments: [String]) async throws {
        let output = try await wormhole(arguments)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains("USAGE: wormhole"))
    }

    @Test(
        "ArgumentParser's own error text is kept: the error on the first line, then its suggestion and the usage",
        .swiftToolOnly("ArgumentParser's own wording"))
    func parserTextKept() async throws {
        let output = try await wormhole(["observe", "some.name", "--cont", "2"])
        #expect(output.status == 64)
        let lines = Self.lines(output.stderr)
        #expect(lines.first == "wormhole: Unknown option '--cont'. Did you mean '--count'?", "\(output.stderr)")
        #expect(lines.contains { $0.hasPrefix("Usage: wormholectl observe") }, "\(output.stderr)")
        #expect(lines.contains { $0.contains("See 'wormholectl observe --help'") }, "\(output.stderr)")
    }

    @Test(
        "--state refuses a negative or non-integer value naming it, and takes 2^64-1",
        arguments: [
            ("-1", "--state must be 0 or more, not '-1'"),
            ("abc", "--state must be an integer from 0 to 2^64-1, not 'abc'"),
            ("18446744073709551616", "not '18446744073709551616'"),
        ])
    func stateErrors(value: String, expected: String) async throws {
        let output = try await wormhole(["post", "some.name", "--state", value, "--bus-address", Self.noBus])
        #expect(output.status == 64)
        #expect(
            Self.lines(output.stderr).first == "wormhole: " + expected || output.stderr.contains(expected),
            "\(output.stderr)")
    }

    @Test("bench --rounds 0 names --rounds", .swiftToolOnly("bench is in the Swift tool only"))
    func benchRounds() async throws {
        let output = try await wormhole(["bench", "--rounds", "0"])
        #expect(output.status == 64)
        #expect(
            Self.lines(output.stderr).first?.contains("--rounds must be at least 1, not 0") == true, "\(output.stderr)")
    }

    @Test(
        "--generate-completion-script writes a completion script for bash, zsh and fish",
        .swiftToolOnly("completion scripts are ArgumentParser's; wormhole-py has none"),
        arguments: ["bash", "zsh", "fish"])
    func completionScripts(shell: String) async throws {
        let output = try await wormhole(["--generate-completion-script", shell])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(
            output.stdout.contains("list") && output.stdout.contains("observe") && output.stdout.contains("log-level"))
        if shell == "bash" {
            let script = try TemporaryDirectory("completion")
            try output.stdout.write(toFile: script.path + "/wormholectl.bash", atomically: true, encoding: .utf8)
            let sourced = try run(
                "/usr/bin/env",
                ["bash", "-c", "source \"$0\" && complete -p wormholectl", script.path + "/wormholectl.bash"])
            #expect(sourced.status == 0, "\(sourced.stderr)")
            #expect(sourced.stdout.contains("-F _wormholectl wormholectl"), "\(sourced.stdout)")
        }
    }

    // MARK: Logging

    @Test(
        "WORMHOLE_LOG and --log-level take any case; an unknown WORMHOLE_LOG is one line and logging stays off",
        .swiftToolOnly("wormhole-py writes no library log (--log-level is accepted only)"))
    func logSettings() async throws {
        let name = "com.example.log"
        let bus = try TestBus()
        for (variable, option) in [("DeBuG", [String]()), ("Loud", ["--log-level", "DEBUG"]), ("loud", [])] {
            let child = try ChildProcess(
                try productPath("wormholectl"),
                ["observe", name, "--count", "1", "--bus-address", bus.address.rawValue] + option,
                environment: environment.merging(["WORMHOLE_LOG": variable]) { $1 })
            _ = try await within("ready") { await child.stderrLines.firstLine { $0 == "ready" } }
            let sent = try run(
                "/usr/bin/env",
                [
                    "dbus-send", "--bus=\(bus.address.rawValue)", "--type=signal", NotifyContract.objectPath,
                    NotifyContract.plainInterface + ".Posted", "string:\(name)", "int32:-1",
                ])
            #expect(sent.status == 0)
            let output = try await within("observe to exit") {
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
                }
            }
            #expect(output.status == 0, "\(output.stderr)")
            let warned = output.stderr.contains("wormhole: WORMHOLE_LOG=\(variable) is not a log level")
            #expect(warned == (variable.lowercased() == "loud"), "\(variable): \(output.stderr)")
            let logged = output.stderr.contains("not an integer of 0 or more")
            #expect(logged == (variable == "DeBuG" || !option.isEmpty), "\(variable) \(option): \(output.stderr)")
        }
        let bad = try await wormhole(["post", "x", "--log-level", "loud", "--bus-address", Self.noBus])
        #expect(bad.status == 64)
        #expect(
            Self.lines(bad.stderr).first
                == "wormhole: --log-level 'loud' is not a log level (trace, debug, info, notice, warning, error, critical)"
        )
    }

    // MARK: list and read

    @Test("list prints identifiers, sizes and ages, sorted; --json one object per line")
    func list() async throws {
        // Times around the writes (a loaded machine may take long between the steps).
        let before = UInt64(Date().timeIntervalSince1970 * 1e9) - 1_000_000_000
        try await send("zeta", #"{"n":1}"#)
        try await send("alpha", #"{"text":"hello"}"#)
        let output = try await wormhole(["list", "--group", Self.group])
        #expect(output.status == 0, "\(output.stderr)")
        let lines = Self.lines(output.stdout)
        #expect(lines.count == 2)
        #expect(lines.first?.hasPrefix("alpha  16 B  ") == true, "\(output.stdout)")
        #expect(lines.last?.hasPrefix("zeta    7 B  ") == true, "\(output.stdout)")
        #expect(lines.allSatisfy { $0.hasSuffix(" s") || $0.hasSuffix(" min") }, "short ages: \(output.stdout)")

        let json = try await wormhole(["list", "--group", Self.group, "--json"])
        #expect(json.status == 0)
        let objects = try Self.lines(json.stdout).map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
        #expect(objects.map { $0["identifier"] as? String } == ["alpha", "zeta"])
        #expect(objects.map { $0["bytes"] as? Int } == [16, 7])
        let after = UInt64(Date().timeIntervalSince1970 * 1e9) + 1_000_000_000
        for object in objects {
            let modified = (object["modifiedAt"] as? NSNumber)?.uint64Value ?? 0
            #expect(modified >= before && modified <= after, "written during the test: \(object)")
        }
    }

    @Test("list of an empty wormhole prints nothing; of a missing group or directory, says which and the nearest")
    func listMissing() async throws {
        try await send("clip", "1")
        try await send("other", "2", directory: "inbox")
        try await send("gone", "3", directory: "empty")
        let removed = try await wormhole([
            "clear", "--group", Self.group, "--directory", "empty", "--all", "--bus-address", Self.noBus,
        ])
        #expect(removed.status == 0, "\(removed.stderr)")
        let empty = try await wormhole(["list", "--group", Self.group, "--directory", "empty"])
        #expect(empty.status == 0 && empty.stdout.isEmpty && empty.stderr.isEmpty, "\(empty)")

        let group = try await wormhole(["list", "--group", "group.com.example.clj"])
        #expect(group.status == 1)
        #expect(
            group.stderr.contains("the group container \(root.path)/group.com.example.clj does not exist"),
            "\(group.stderr)")
        #expect(group.stderr.contains("did you mean --group \(Self.group)?"), "\(group.stderr)")
        #expect(Self.lines(group.stderr).count == 1)

        let directory = try await wormhole(["list", "--group", Self.group, "--directory", "inbx"])
        #expect(directory.status == 1)
        #expect(
            directory.stderr.contains("the directory \(root.path)/\(Self.group)/inbx does not exist"),
            "\(directory.stderr)")
        #expect(directory.stderr.contains("did you mean --directory inbox?"), "\(directory.stderr)")
    }

    @Test("read of a missing identifier suggests the nearest stored one; of a missing group or directory, says which")
    func readMissing() async throws {
        try await send("clipboard", #"{"n":1}"#)
        let typo = try await wormhole(["read", "--group", Self.group, "clipbaord"])
        #expect(typo.status == 1)
        #expect(Self.lines(typo.stderr).count == 1)
        #expect(typo.stderr.hasPrefix("wormhole: no message is stored for 'clipbaord'"), "\(typo.stderr)")
        #expect(typo.stderr.contains("did you mean 'clipboard'?"), "\(typo.stderr)")

        let far = try await wormhole(["read", "--group", Self.group, "unrelated"])
        #expect(far.stderr.contains("1 identifier is stored: wormholectl list --group \(Self.group)"), "\(far.stderr)")

        let group = try await wormhole(["read", "--group", "group.other", "clipboard"])
        #expect(group.status == 1)
        #expect(group.stderr.contains("the group container \(root.path)/group.other does not exist"), "\(group.stderr)")

        let directory = try await wormhole(["read", "--group", Self.group, "--directory", "wormhol", "clipboard"])
        #expect(
            directory.stderr.contains("does not exist")
                && directory.stderr.contains("did you mean --directory wormhole?"),
            "\(directory.stderr)")
    }
}

import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import Wormhole

/// The `wormholectl` command: app-group messaging and Darwin-style notifications from the shell.
@main
struct WormholeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wormholectl",
        abstract: "App-group messaging and Darwin-style notifications over D-Bus.",
        discussion: """
            Exit status: 0 success; 1 failure (bus unreachable or not answering, no message); \
            64 bad input (the first line on standard error names the bad value; nothing is written \
            or posted); 124 when --timeout passed before --count deliveries. --timeout bounds the whole \
            command, connecting included; connecting gives up after 5 s when the bus does not answer.

            Environment: DBUS_SESSION_BUS_ADDRESS (the bus, unless --bus-address); \
            WORMHOLE_CONTAINER_ROOT, else XDG_DATA_HOME/group-containers, else \
            HOME/.local/share/group-containers (the group containers); XDG_RUNTIME_DIR (the check-token \
            table); WORMHOLE_LOG=trace|debug|info|notice|warning|error|critical, in any case (the \
            library's log on standard error; --log-level overrides it).
            """,
        version: "wormholectl " + WormholeVersion.description,
        subcommands: [
            PostCommand.self, ObserveCommand.self, SendCommand.self, ReadCommand.self, ListenCommand.self,
            ListCommand.self, ClearCommand.self, DefaultsCommand.self, JournalCommand.self, BenchLauncher.self,
            DoctorCommand.self, MonitorCommand.self,
        ]
    )

    /// Parses and runs, writing any error as one line on standard error.
    static func main() {
        // The tool reports problems itself, one line each; library logs only on request
        // (WORMHOLE_LOG or --log-level), so nothing precedes `ready`.
        LogSettings.readEnvironment()
        LogSettings.bootstrap()
        if let bad = firstNonUTF8Argument() {
            failUsage("argument \(bad) is not valid UTF-8")
        }
        // `wormholectl help NAME`: ArgumentParser shows the root help for an unknown NAME; it is a mistake.
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "help", arguments.count > 1,
            let unknown = unknownCommand(in: Array(arguments.dropFirst()))
        {
            failUsage(unknown)
        }
        if arguments.first != "help", let unknown = unknownCommand(in: arguments) {
            failUsage(unknown)
        }
        do {
            // `wormholectl bench …` hands every argument (--help too) to wormhole-bench unparsed.
            if CommandLine.arguments.count > 1 && CommandLine.arguments[1] == "bench" {
                try BenchLauncher.execute(Array(CommandLine.arguments.dropFirst(2)))
            }
            var command = try parseAsRoot()
            try command.run()
        } catch let error as CLIFailure {
            writeError("wormhole: \(error.message)")
            Glibc.exit(error.status)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            // ArgumentParser's own text, whole: the error (naming the bad value) on the first
            // line, then its suggestion ("Did you mean…") and the usage.
            var message = fullMessage(for: error)
            if message.hasPrefix("Error: ") { message.removeFirst("Error: ".count) }
            while message.hasSuffix("\n") { message.removeLast() }
            writeError("wormhole: " + message)
            Glibc.exit(code == .validationFailure ? 64 : code.rawValue)
        }
    }

    /// An error for the first of `path` (command names, as after `wormholectl` or `wormholectl help`)
    /// that is not a command, with the nearest command; `nil` when every name is a command (or
    /// an option is reached).
    static func unknownCommand(in path: [String]) -> String? {
        var command: any ParsableCommand.Type = WormholeCommand.self
        var walked = "wormholectl"
        for name in path {
            if name.hasPrefix("-") { return nil }
            let subcommands = command.configuration.subcommands
            if subcommands.isEmpty { return nil }
            let names = subcommands.map { $0._commandName }
            guard let index = names.firstIndex(of: name) else {
                let hint = nearest(to: name, in: names).map { " Did you mean '\($0)'?" } ?? ""
                return "'\(walked)' has no command '\(name)'.\(hint) Commands: \(names.joined(separator: ", ")).\n"
                    + "  See '\(walked) --help' for more information."
            }
            command = subcommands[index]
            walked += " " + name
        }
        return nil
    }

    /// Scans the raw argument bytes: Swift would silently repair invalid UTF-8.
    static func firstNonUTF8Argument() -> String? {
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index] else { continue }
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self),
                count: strlen(pointer))
            if String(validating: bytes, as: UTF8.self) == nil {
                return "\(index) (bytes "
                    + bytes.map { ($0 < 0x10 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ") + ")"
            }
        }
        return nil
    }
}

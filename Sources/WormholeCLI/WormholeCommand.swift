import ArgumentParser
import Foundation
import Logging

/// The `wormhole` command: app-group messaging and Darwin-style notifications from the shell.
@main
struct WormholeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wormhole",
        abstract: "App-group messaging and Darwin-style notifications over D-Bus.",
        discussion: """
            Exit status: 0 success; 1 failure (bus unreachable or not answering, no message); \
            64 bad input (one line on standard error naming the bad value; nothing is written or \
            posted); 124 when --timeout passed before --count deliveries. --timeout bounds the whole \
            command, connecting included; connecting gives up after 5 s when the bus does not answer.

            Environment: DBUS_SESSION_BUS_ADDRESS (the bus, unless --bus-address); \
            WORMHOLE_CONTAINER_ROOT, else XDG_DATA_HOME/group-containers, else \
            HOME/.local/share/group-containers (the group containers); XDG_RUNTIME_DIR (the check-token \
            table); WORMHOLE_LOG=debug|info|notice|warning|error (the library's log on standard error).
            """,
        subcommands: [
            PostCommand.self, ObserveCommand.self, SendCommand.self, ReadCommand.self, ListenCommand.self,
            ClearCommand.self, DefaultsCommand.self, JournalCommand.self, BenchLauncher.self, DoctorCommand.self,
            MonitorCommand.self,
        ]
    )

    /// Parses and runs, writing any error as one line on standard error.
    static func main() {
        // The tool reports problems itself, one line each; library logs only on request
        // (WORMHOLE_LOG=debug|info|notice|warning|error), so nothing precedes `ready`.
        let level = ProcessInfo.processInfo.environment["WORMHOLE_LOG"].flatMap(Logger.Level.init(rawValue:))
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level ?? .critical
            return handler
        }
        if let bad = firstNonUTF8Argument() {
            failUsage("argument \(bad) is not valid UTF-8")
        }
        do {
            // `wormhole bench …` hands every argument (--help too) to wormhole-bench unparsed.
            if CommandLine.arguments.count > 1 && CommandLine.arguments[1] == "bench" {
                try BenchLauncher.execute(Array(CommandLine.arguments.dropFirst(2)))
            }
            var command = try parseAsRoot()
            try command.run()
        } catch let error as CLIFailure {
            writeError("wormhole: \(error.message)")
            Foundation.exit(error.status)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            let message = fullMessage(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            writeError("wormhole: " + message.replacingOccurrences(of: "Error: ", with: ""))
            Foundation.exit(code == .validationFailure ? 64 : code.rawValue)
        }
    }

    /// Scans the raw argument bytes: Swift would silently repair invalid UTF-8.
    static func firstNonUTF8Argument() -> String? {
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index] else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self),
                                            count: strlen(pointer))
            if String(validating: bytes, as: UTF8.self) == nil {
                return "\(index) (bytes " + bytes.map { String(format: "%02x", $0) }.joined(separator: " ") + ")"
            }
        }
        return nil
    }
}

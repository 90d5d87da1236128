// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// The library's log level for this run: `--log-level`, else `WORMHOLE_LOG`, else off.
enum LogSettings {
    /// The level as `Logger.Level`'s raw value index, or -1 for off (only critical messages).
    private static let level = Atomic<Int>(-1)
    static let levels = Logger.Level.allCases

    /// The level loggers made from now on use.
    static var current: Logger.Level {
        let index = level.load(ordering: .relaxed)
        return index < 0 ? .critical : levels[index]
    }

    static func set(_ value: Logger.Level) { level.store(levels.firstIndex(of: value) ?? -1, ordering: .relaxed) }

    /// A level name in any case (`DEBUG`, `Debug`, `debug`), or `nil`.
    static func parse(_ text: String) -> Logger.Level? { Logger.Level(rawValue: text.lowercased()) }

    static var names: String { levels.map(\.rawValue).joined(separator: ", ") }

    /// Reads `WORMHOLE_LOG`; an unknown value is said on standard error (one line) and ignored.
    static func readEnvironment() {
        guard let text = ProcessInfo.processInfo.environment["WORMHOLE_LOG"], !text.isEmpty else { return }
        if let value = parse(text) {
            set(value)
        } else {
            writeError("wormhole: WORMHOLE_LOG=\(text) is not a log level (\(names)); the library's log stays off")
        }
    }

    /// Routes every logger to standard error, at the level current when the logger is made.
    static func bootstrap() {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = current
            return handler
        }
    }
}

/// `--log-level`, taken by every command that uses the library (through ``BusOptions``).
struct LogOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Show the library's log on standard error from this level up: trace, debug, info, notice, warning, error or critical (overrides WORMHOLE_LOG).",
            valueName: "level"))
    var logLevel: String?

    /// Checks the level and applies it: commands make their loggers after parsing.
    mutating func validate() throws {
        guard let logLevel else { return }
        guard let value = LogSettings.parse(logLevel) else {
            throw ValidationError("--log-level '\(logLevel)' is not a log level (\(LogSettings.names))")
        }
        LogSettings.set(value)
    }
}

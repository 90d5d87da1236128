import ArgumentParser
import Foundation
import Wormhole
import WormholeDBus

/// `wormhole defaults read|write|delete|observe --group G [--suite S] …` (contract §5).
struct DefaultsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "defaults",
        abstract: "Read, write and observe the app group's shared defaults suite.",
        discussion: """
            Values are JSON in the suite file's format: 1 is an Int, 1.0 a Double, \
            {"$date":SECONDS}, {"$data":"BASE64"} and {"$url":"URL"} tag the other types.
            """,
        subcommands: [DefaultsReadCommand.self, DefaultsWriteCommand.self, DefaultsDeleteCommand.self,
                      DefaultsObserveCommand.self])
}

/// `--group`, `--suite` and `--bus-address`, checked before anything touches the disk or the bus.
struct DefaultsOptions: ParsableArguments {
    @Option(help: "The application group identifier, such as group.com.example.lines.")
    var group: String

    @Option(help: "The suite (default: the group identifier).")
    var suite: String?

    @OptionGroup var bus: BusOptions

    /// The suite, with the group, the suite and `keys` validated first.
    func defaults(keys: [String] = []) throws -> GroupDefaults {
        try withCLIErrors {
            let defaults = try GroupDefaults(
                applicationGroupIdentifier: group, suiteName: suite, busAddress: bus.busAddress.map(BusAddress.init))
            for key in keys { _ = try defaults.notificationName(forKey: key) }
            return defaults
        }
    }
}

/// `wormhole defaults read --group G [--suite S] [KEY]`.
struct DefaultsReadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Print a value as one line of compact JSON (the whole suite as an object without KEY).",
        discussion: "Exits 1 with a message when the key has no value.")

    @Argument(help: "The key (any UTF-8 text without NUL).")
    var key: String?

    @OptionGroup var options: DefaultsOptions

    func run() throws {
        let defaults = try options.defaults(keys: key.map { [$0] } ?? [])
        guard let key else {
            writeOutput(try withCLIErrors { try defaults.jsonText() })
            return
        }
        guard let value = try withCLIErrors({ try defaults.value(forKey: key) }) else {
            throw CLIFailure(message: "no value for key '\(key)' in suite '\(defaults.suite)' (\(defaults.path))")
        }
        writeOutput(value.jsonText)
    }
}

/// `wormhole defaults write --group G [--suite S] KEY [JSON]`.
struct DefaultsWriteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Store a JSON value for a key and notify observers.",
        discussion: """
            The value is the JSON argument, or standard input when it is absent, in the suite \
            file's format; it is checked before anything is written. Exits 0 once stored.
            """)

    @Argument(help: "The key.")
    var key: String

    @Argument(help: "The JSON value (default: read standard input).")
    var json: String?

    @OptionGroup var options: DefaultsOptions

    func run() throws {
        let defaults = try options.defaults(keys: [key])
        let text = json ?? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        let report = try withCLIErrors {
            try defaults.set(try propertyListArgument(text, key: key, argument: json), forKey: key)
        }
        if let error = report.notificationError {
            writeError("wormhole: warning: value stored, but observers were not notified: \(error)")
        }
        defaults.flush()
    }
}

/// `wormhole defaults delete --group G [--suite S] KEY`.
struct DefaultsDeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Remove a key and notify observers (nothing happens when it has no value).")

    @Argument(help: "The key.")
    var key: String

    @OptionGroup var options: DefaultsOptions

    func run() throws {
        let defaults = try options.defaults(keys: [key])
        let report = try withCLIErrors { try defaults.removeObject(forKey: key) }
        if let error = report.notificationError {
            writeError("wormhole: warning: key removed, but observers were not notified: \(error)")
        }
        defaults.flush()
    }
}

/// `wormhole defaults observe --group G [--suite S] [KEY...] [--count N] [--timeout S]`.
struct DefaultsObserveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "observe",
        abstract: "Print one JSON line per change of the keys (every key of the suite without KEY).",
        discussion: """
            Writes `ready` to standard error once observing, then {"key":K,"value":V} per change \
            ("value":null when the key was removed).
            """)

    @Argument(help: "Keys to observe (default: every key of the suite).")
    var keys: [String] = []

    @Option(help: "Exit 0 after this many changes.")
    var count: Int?

    @Option(help: "Give up after this many seconds: exit 124 if --count was given, 0 if not.")
    var timeout: Double?

    @OptionGroup var options: DefaultsOptions

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1, not \(count)") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() throws {
        armTimeout(timeout, countGiven: count != nil)
        var seen = Set<String>()
        let unique = keys.filter { seen.insert($0).inserted }
        let defaults = try options.defaults(keys: unique)
        let writer = LineWriter()
        let counter = DeliveryCounter(limit: count)
        // On the I/O thread: read, build and write the line where the signal was read.
        let handler: @Sendable (GroupDefaults.Change) -> Void = { change in
            writer.writeLine { line in
                line.raw(#"{"key":"#)
                line.string(change.key)
                line.raw(#","value":"#)
                if let value = change.value { line.bytes.append(contentsOf: value.jsonBytes) } else { line.raw("null") }
                line.raw("}")
            }
            counter.delivered()
        }
        let observers = try withCLIErrors {
            if unique.isEmpty { return [try defaults.observeSuite(on: .ioThread, handler: handler)] }
            return try unique.map { try defaults.observe($0, on: .ioThread, handler: handler) }
        }
        announceReadyAndServe(keeping: (defaults, observers))
    }
}

// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus

/// `wormholectl defaults read|write|delete|observe --group G [--suite S] …` (contract §5).
struct DefaultsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "defaults",
        abstract: "Read, write and observe the app group's shared defaults suite.",
        discussion: """
            Values are JSON in the suite file's format: 1 is an Int, 1.0 a Double, \
            {"$date":SECONDS}, {"$data":"BASE64"} and {"$url":"URL"} tag the other types.
            """,
        subcommands: [
            DefaultsReadCommand.self, DefaultsWriteCommand.self, DefaultsDeleteCommand.self,
            DefaultsIncrementCommand.self, DefaultsLoadCommand.self, DefaultsRepairCommand.self,
            DefaultsObserveCommand.self,
        ])
}

/// `--group`, `--suite` and `--bus-address`, checked before anything touches the disk or the bus.
struct DefaultsOptions: ParsableArguments {
    @Option(help: "The application group identifier, such as group.com.example.lines.")
    var group: String

    @Option(help: "The suite (default: the group identifier).")
    var suite: String?

    @OptionGroup var bus: BusOptions

    /// The suite, with the group, the suite and `keys` validated first.
    func defaults(keys: [String] = [], maximumBytes: Int = GroupDefaults.defaultMaximumSuiteBytes) throws
        -> GroupDefaults
    {
        try withCLIErrors {
            let defaults = try GroupDefaults(
                applicationGroupIdentifier: GroupIdentifier(group), suiteName: suite.map { try SuiteName($0) },
                busAddress: bus.busAddress.map(BusAddress.init),
                maximumSuiteBytes: maximumBytes)
            for key in keys { _ = try defaults.notificationName(forKey: key) }
            return defaults
        }
    }
}

/// `--max-bytes` and the suite's options, taken by the writing commands: the suite with its limit
/// (contract §5, v1.2).
struct SuiteWriteOptions: ParsableArguments {
    @Option(
        name: .customLong("max-bytes"),
        help: ArgumentHelp(
            "Refuse a write that leaves the suite larger than this: bytes, or a number with K, M or G.",
            valueName: "size"))
    var maxBytes = ByteCount(GroupDefaults.defaultMaximumSuiteBytes)

    @OptionGroup var suite: DefaultsOptions

    /// The suite with this limit, the group, the suite and `keys` validated first.
    func defaults(keys: [String] = []) throws -> GroupDefaults {
        try suite.defaults(keys: keys, maximumBytes: maxBytes.bytes)
    }
}

/// One write of a suite: the one-shot watchdog armed for `what`, the write, the warning when
/// its notification was not sent, then the wait for its posts (`done` names the outcome).
private func write(
    _ defaults: GroupDefaults, _ what: String, done: String, _ body: () throws -> GroupDefaults.WriteReport
) throws {
    OneShot.arm(what, done: done)
    let report = try withCLIErrors(body)
    if let error = report.notificationError {
        writeError("wormhole: warning: \(done), but observers were not notified: \(error)")
    }
    OneShot.confirm(done, alreadyReported: report.notificationError != nil) { defaults.flush(timeout: $0) }
}

/// `wormholectl defaults read --group G [--suite S] [KEY]`.
struct DefaultsReadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Print a value as one line of compact JSON (the whole suite as an object without KEY).",
        discussion: """
            Exits 1 with a message when the key has no value. A value this version does not \
            understand (an unknown {"$tag":…}) is printed as it is stored. Reading never changes \
            the disk.
            """)

    @Argument(help: "The key (any UTF-8 text without NUL).")
    var key: String?

    @Flag(help: "Print the suite's keys, one JSON string per line, sorted (no KEY).")
    var keys = false

    @OptionGroup var options: DefaultsOptions

    func validate() throws {
        if keys && key != nil { throw ValidationError("--keys lists every key; give no KEY with it") }
    }

    func run() throws {
        let defaults = try options.defaults(keys: key.map { [$0] } ?? [])
        if keys {
            for name in try withCLIErrors({ try defaults.keys() }) {
                var line = JSONLine(bytes: [])
                line.string(name)
                writeOutput(String(decoding: line.bytes, as: UTF8.self))
            }
            return
        }
        guard let key else {
            writeOutput(try withCLIErrors { try defaults.jsonText() })
            return
        }
        guard let json = try withCLIErrors({ try defaults.storedJSON(forKey: key) }) else {
            throw CLIFailure(message: "no value for key '\(key)' in suite '\(defaults.suite)' (\(defaults.path))")
        }
        writeOutput(json)
    }
}

/// `wormholectl defaults write --group G [--suite S] KEY [JSON]`.
struct DefaultsWriteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Store a JSON value for a key and notify observers.",
        discussion: """
            The value is the JSON argument, or standard input when it is absent, in the suite \
            file's format; it is checked before anything is written (null is refused: use \
            delete). Exits 0 once stored. With --expect JSON (or --expect-absent) the value is \
            written only if the stored one equals JSON as a typed value (1 is not 1.0), or is \
            absent; otherwise exit 3 with the stored value on standard error, nothing changed.
            """)

    @Argument(help: "The key.")
    var key: String

    @Argument(help: "The JSON value (default: read standard input).")
    var json: String?

    @Option(help: ArgumentHelp("Write only if the stored value equals this JSON value.", valueName: "json"))
    var expect: String?

    @Flag(help: "Write only if the key has no value.")
    var expectAbsent = false

    @OptionGroup var options: SuiteWriteOptions

    func validate() throws {
        if expect != nil && expectAbsent { throw ValidationError("--expect and --expect-absent exclude each other") }
    }

    /// The compare-and-set found another value: exit 3.
    private struct Mismatch: Error {
        var stored: PropertyListValue?
    }

    func run() throws {
        let defaults = try options.defaults(keys: [key])
        let expected = try withCLIErrors { try expect.map { try PropertyListValue(jsonText: $0, key: key) } }
        let text =
            try json ?? String(decoding: readStandardInput(limit: .max, identifier: "standard input"), as: UTF8.self)
        let value = try withCLIErrors { try propertyListArgument(text, key: key, argument: json) }
        try write(defaults, "the value of '\(key)'", done: "value stored") {
            if expected == nil && !expectAbsent { return try defaults.set(value, forKey: key) }
            do {
                return try defaults.update(forKey: key) { stored in
                    guard stored == expected else { throw Mismatch(stored: stored) }
                    return value
                }
            } catch let mismatch as Mismatch {
                writeError(mismatch.stored?.jsonText ?? "null")
                throw CLIFailure(
                    message: mismatch.stored == nil
                        ? "key '\(key)' has no value, not the one expected; nothing was written"
                        : "key '\(key)' holds another value than the one expected (above); nothing was written",
                    status: 3)
            }
        }
    }
}

/// `wormholectl defaults increment --group G [--suite S] KEY [--by N]`.
struct DefaultsIncrementCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "increment",
        abstract: "Add N (default 1) to an integer under the suite's lock and print the new value.",
        discussion: """
            An absent key counts as 0. A value that is not an integer (1.0 is a Double), or an \
            overflow, is an error naming the key and its type, and nothing changes. Any number of \
            processes incrementing at once lose nothing.
            """)

    @Argument(help: "The key.")
    var key: String

    @Option(parsing: .unconditional, help: "The amount to add (may be negative: --by -3).")
    var by = 1

    @OptionGroup var options: SuiteWriteOptions

    func run() throws {
        let defaults = try options.defaults(keys: [key])
        OneShot.arm("the increment of '\(key)'", done: "value stored")
        let value = try withCLIErrors { try defaults.increment(forKey: key, by: by) }
        writeOutput(String(value))
        OneShot.confirm("value stored", alreadyReported: false) { defaults.flush(timeout: $0) }
    }
}

/// `wormholectl defaults load --group G [--suite S] [--replace]`.
struct DefaultsLoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Write every key of one JSON object read on standard input in one atomic write.",
        discussion: """
            One rename, one post per changed key. With --replace, the keys the object does not \
            name are removed too. {} changes nothing (with --replace: empties the suite). \
            Anything but an object, null, or an invalid key is refused and nothing changes. \
            `defaults read` without KEY prints the matching dump.
            """)

    @Flag(help: "Also remove every key the object does not name.")
    var replace = false

    @OptionGroup var options: SuiteWriteOptions

    func run() throws {
        let defaults = try options.defaults()
        let input = try readStandardInput(limit: .max, identifier: "standard input")
        let values = try withCLIErrors { try PropertyListValue.values(suiteJSON: input) }
        try write(defaults, "the suite", done: "suite written") {
            try defaults.setValues(values, replacingAll: replace)
        }
    }
}

/// `wormholectl defaults repair --group G [--suite S]`.
struct DefaultsRepairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Move a suite file that is not one JSON object aside and start an empty suite.",
        discussion: """
            The file is renamed to <suite>.json.corrupt-<n> (never deleted) and the path is \
            printed. On a suite that reads, or none, nothing changes and nothing is printed; \
            exit 0 either way. Reads and writes never move a suite aside.
            """)

    @OptionGroup var options: DefaultsOptions

    func run() throws {
        let defaults = try options.defaults()
        if let aside = try withCLIErrors({ try defaults.repair() }) {
            writeError("wormhole: '\(defaults.path)' was not one JSON object; moved aside to '\(aside)'")
            var line = JSONLine(bytes: [])
            line.raw(#"{"movedTo":"#)
            line.string(aside)
            line.raw("}")
            writeOutput(String(decoding: line.bytes, as: UTF8.self))
        }
    }
}

/// `wormholectl defaults delete --group G [--suite S] KEY`.
struct DefaultsDeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Remove a key and notify observers (nothing happens when it has no value).")

    @Argument(help: "The key.")
    var key: String

    @OptionGroup var options: DefaultsOptions

    func run() throws {
        let defaults = try options.defaults(keys: [key])
        try write(defaults, "the removal of '\(key)'", done: "key removed") { try defaults.removeObject(forKey: key) }
    }
}

/// `wormholectl defaults observe --group G [--suite S] [KEY...] [--count N] [--timeout S]`.
struct DefaultsObserveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "observe",
        abstract: "Print one JSON line per change of the keys (every key of the suite without KEY).",
        discussion: """
            Writes `ready` to standard error once observing, then {"key":K,"value":V} per change \
            ({"key":K,"value":null,"removed":true} when the key was removed).
            """)

    @Argument(help: "Keys to observe (default: every key of the suite).")
    var keys: [String] = []

    @OptionGroup var limits: ServingLimits

    @OptionGroup var options: DefaultsOptions

    func run() throws {
        let counter = limits.start()
        var seen = Set<String>()
        let unique = keys.filter { seen.insert($0).inserted }
        let defaults = try options.defaults(keys: unique)
        let writer = LineWriter()
        let reports = BusReports(.defaults, address: try options.bus.addressIfAny())
        // On the I/O thread: read, build and write the line where the signal was read.
        let handler: @Sendable (GroupDefaults.Change) -> Void = { change in
            if change.reason == .catchUp { reports.caughtUpOne() }
            writer.writeLine { line in
                line.raw(#"{"key":"#)
                line.string(change.key)
                line.raw(#","value":"#)
                if let value = change.value {
                    line.bytes.append(contentsOf: value.jsonBytes)
                } else {
                    line.raw(#"null,"removed":true"#)
                }
                line.raw("}")
            }
            counter.delivered()
        }
        let observers = try withCLIErrors {
            if unique.isEmpty { return [try defaults.listen(on: .ioThread, handler: handler)] }
            return try unique.map { try defaults.listen(forKey: $0, on: .ioThread, handler: handler) }
        }
        // After the observers: on the bus's return their catch-up lines are written before this one.
        // Without a bus the observers are woken through the Preferences directory meanwhile.
        let watching = reports.watch(defaults)
        announceReadyAndServe(keeping: (defaults, observers, watching)) { reports.sayWhereListening(defaults) }
    }
}

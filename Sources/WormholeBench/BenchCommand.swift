// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import Logging
import Wormhole
import WormholeDBus

/// `wormhole-bench` (also run as `wormholectl bench`): latency and post rate of Wormhole against
/// the raw libdbus floor, measured in one run with alternating rounds.
@main
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wormholectl bench",
        abstract: "Measure Wormhole's latency and post rate against the raw libdbus floor.",
        discussion: """
            Without --bus-address, starts a private dbus-daemon (or dbus-broker, --daemon broker) from --config. Every row is compared \
            with a floor measured in the same run, in alternating rounds (floor, ours, floor, ours…), \
            so drift on a noisy machine hits both alike.

            Suites (--suite, several separated by commas):
              notify   two-process ping-pong: floor, handlers on the I/O thread,
                       handlers on a queue, the doorbell; a post until wormholectl
                       observe's line (doorbell on) against C to C; then with
                       --other-names names observed
              message  100 B, 10 KB and 1 MB messages (Codable, raw JSONDocument, the
                       JSON codec alone) against files plus signals; 100 B transient
                       messages (Codable, JSONDocument) against notifications only
              cli      wormholectl observe / listen writing to a pipe against
                       wormhole-floor observe / listen, from the post to the line read
              rate     posts/s from 1 and --post-threads threads against
                       wormhole-floor blast; one post call (doorbell on, no
                       endpoints, then one observer rung) against wormhole-floor
                       post-call (send + flush)
              routes   ping-pong with 1 route and with --routes more in the pinger; time to
                       ready of one listen on --routes identifiers
              fanout   one post woken in --fanout-observers wormholectl observe processes
                       against as many wormhole-floor observe: until the first and the last line
              journal  the journal: records lost, corrupt or duplicated across SIGKILLs of
                       appenders and durable consumers, 8 appenders x 8 consumers,
                       appends/s from 1 and 8 processes with and without fdatasync,
                       a single durable appender against a bare write + fdatasync
                       loop, append -> consumer against passMessage -> listener
              defaults shared defaults: lost updates and lost keys against Foundation's
                       UserDefaults, writers SIGKILLed at random instants, set ->
                       observer against passMessage -> listener, the cached get cost
                       and sets/s from 4 processes on tmpfs
              all      every suite (the default)

            Progress goes to standard error (a line per round and per finished row); tables and a \
            summary of ratios with PASS/MISS to standard output. --json FILE writes every row (with a stable \
            id, its value, goal and PASS/MISS) and the summary's goals, with the machine's description, for \
            Tests/bench-compare.sh; --csv FILE every row, --percentiles DIR each latency row's percentile distribution (HdrHistogram's .hgrm \
            text), --plot FILE.svg every latency row and its floor on one chart (latency by percentile).
            """,
        version: "wormhole-bench " + WormholeVersion.description
    )

    /// The processes the bench starts (`wormhole-bench _bench-echo …`): hidden, and not
    /// subcommands, so the usage line stays that of the bench.
    static let helpers: [any ParsableCommand.Type] = [
        BenchEchoCommand.self, BenchPingCommand.self, BenchLoadCommand.self, BenchMessageEchoCommand.self,
        BenchDefaultsCommand.self,
        BenchJournalCommand.self, BenchPostCallCommand.self,
    ]

    static let suites = ["notify", "message", "cli", "fanout", "rate", "routes", "defaults", "journal", "fallback"]
    static let defaultConfig = "dbus/wormhole-session.conf"
    static let journalParts = ["kills", "fanout", "rates", "durable", "latency"]

    @Option(help: "What to measure: \(suites.joined(separator: ", ")) or all; several separated by commas.")
    var suite = "all"

    @Option(help: "Round trips (posts, for the cli suite) per latency row.")
    var roundTrips = 10_000

    @Option(help: "Unmeasured round trips before each round.")
    var warmup = 1_000

    @Option(help: "Alternating rounds per row: floor and ours take turns, so drift on a noisy machine hits both alike.")
    var rounds = 10

    @Option(help: "Names observed by a third process in the loaded notify run (0 skips it).")
    var otherNames = 10_000

    @Option(
        help: ArgumentHelp(
            "Microseconds the notify suite's spaced rows wait after each pong before the next ping, and its "
                + "post-to-line rows after each line (0 skips both), and the rate suite's post-call rows after each "
                + "post (0: back to back)."))
    var spacingUs = 500

    @Option(help: "Round trips per message-size row (the 1 MB row runs a tenth of them).")
    var messageRoundTrips = 2_000

    @Option(help: "Message sizes in bytes of the message suite, separated by commas.")
    var messageSizes = "100,10000,1000000"

    @Option(help: "Posts per round of the rate suite.")
    var posts = 200_000

    @Option(help: "Threads posting at once in the rate suite's second row.")
    var postThreads = 8

    @Option(help: "Rounds of the rate suite (each runs the floor and both of ours).")
    var rateRounds = 5

    @Option(help: "Extra routes (observed names) held by the pinging process in the routes suite.")
    var routes = 10_000

    @Option(help: "Observer processes woken by each post in the fanout suite.")
    var fanoutObservers = 32

    @Option(help: "Timed posts per round of the fanout suite.")
    var fanoutPosts = 200

    @Option(help: "Alternating rounds of the fanout suite (fresh observers each round).")
    var fanoutRounds = 4

    @Option(help: "Processes at once in the defaults suite's lost-update and lost-key runs.")
    var defaultsProcesses = 8

    @Option(help: "update increments of one key per process (defaults suite).")
    var defaultsIncrements = 1_000

    @Option(help: "Distinct keys set per process (defaults suite).")
    var defaultsKeys = 500

    @Option(help: "SIGKILLs of a writer at random instants (defaults suite; 0 skips them).")
    var defaultsKills = 1_000

    @Option(help: "Round trips of the defaults suite's set -> observer and passMessage rows.")
    var defaultsRoundTrips = 2_000

    @Option(help: "Cached reads timed for the defaults suite's get cost.")
    var defaultsReads = 100_000

    @Option(help: "Rounds of each row of the defaults suite's size-limit table (a 4 MiB suite; 0 skips it).")
    var defaultsLimitRounds = 20

    @Option(help: "sets per process (4 processes) for the defaults suite's rate.")
    var defaultsSets = 5_000

    @Option(help: "SIGKILLs of appenders, and as many of durable consumers (journal suite; 0 skips them).")
    var journalKills = 1_000

    @Option(help: "Records appended by 8 processes and read by 8 consumers (journal suite).")
    var journalRecords = 100_000

    @Option(help: "Appends per process in the journal suite's rate rows (a twentieth with fdatasync).")
    var journalAppends = 50_000

    @Option(
        help: ArgumentHelp(
            "Which parts of the journal suite to run: \(journalParts.joined(separator: ", ")) or all; several separated by commas.",
            discussion:
                "kills: the appender and consumer SIGKILLs; fanout: 8 appenders x 8 consumers; rates: appends/s "
                + "without fsync; durable: appends/s with fdatasync and the single durable appender; latency: append -> "
                + "consumer."))
    var journalRows = "all"

    @Option(help: "Write every row (label, count, p50, p90, p99, p99.9, max, ratio, target) to this JSON file.")
    var json: String?

    @Option(help: "Write every row to this CSV file (the columns of --json).")
    var csv: String?

    @Option(
        help:
            "Write each latency row's percentile distribution (HdrHistogram .hgrm text, one-way µs) into this directory."
    )
    var percentiles: String?

    @Option(help: "Draw every latency row and its floor (latency by percentile, log scales) into this SVG file.")
    var plot: String?

    @Option(
        help: ArgumentHelp(
            "Bus configuration for the private daemon.",
            discussion: "Default: dbus/wormhole-session.conf in the current directory or a directory above the "
                + "executable (a build inside the repository), then PREFIX/share/wormhole/wormhole-session.conf "
                + "beside an installed executable (PREFIX/bin), /usr/local/share/wormhole and /usr/share/wormhole."))
    var config = BenchCommand.defaultConfig

    @Option(help: "The private bus daemon: dbus-daemon or broker (dbus-broker-launch; needs the dbus-broker package).")
    var daemon = BusDaemonKind.dbusDaemon

    @Flag(
        help:
            "Also measure post -> wormholectl observe with both ends behind xdg-dbus-proxy, the observer in bwrap (cli suite; needs bubblewrap and xdg-dbus-proxy)."
    )
    var sandboxed = false

    @OptionGroup var bus: BusOptions

    /// The suites to run, in order.
    var selectedSuites: [String] {
        let asked = suite.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        return asked.contains("all") ? Self.suites : Self.suites.filter(asked.contains)
    }

    /// The parts of the journal suite `--journal-rows` asks for.
    var selectedJournalParts: Set<String> {
        let asked = journalRows.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        return Set(asked.contains("all") ? Self.journalParts : asked)
    }

    /// The sizes of `--message-sizes`, each at least 30 bytes (the payload's own fields).
    var messageSizeList: [Int] {
        messageSizes.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.filter {
            $0 >= 30 && $0 <= 100_000_000
        }
    }

    func validate() throws {
        let asked = suite.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if let bad = asked.first(where: { $0 != "all" && !Self.suites.contains($0) }) ?? (asked.isEmpty ? "" : nil) {
            throw ValidationError("--suite takes \(Self.suites.joined(separator: ", ")) or all, not '\(bad)'")
        }
        if rounds < 1 { throw ValidationError("--rounds must be at least 1, not \(rounds)") }
        if roundTrips < rounds {
            throw ValidationError("--round-trips (\(roundTrips)) must be at least --rounds (\(rounds))")
        }
        if warmup < 0 || otherNames < 0 || routes < 0 {
            throw ValidationError("--warmup, --other-names and --routes cannot be negative")
        }
        if spacingUs < 0 || spacingUs > 1_000_000 {
            throw ValidationError("--spacing-us takes 0 to 1000000 microseconds, not \(spacingUs)")
        }
        if messageRoundTrips < rounds * 10 {
            throw ValidationError("--message-round-trips must be at least 10 x --rounds")
        }
        if messageSizeList.isEmpty || messageSizeList.count != messageSizes.split(separator: ",").count {
            throw ValidationError(
                "--message-sizes takes sizes in bytes (at least 30) separated by commas, not '\(messageSizes)'")
        }
        if postThreads < 1 || posts < postThreads {
            throw ValidationError("--posts must be at least --post-threads, which must be at least 1")
        }
        if rateRounds < 1 { throw ValidationError("--rate-rounds must be at least 1") }
        if fanoutObservers < 1 || fanoutObservers > 1000 || fanoutPosts < 1 || fanoutRounds < 1 {
            throw ValidationError(
                "--fanout-observers takes 1 to 1000 (not \(fanoutObservers)), --fanout-posts and --fanout-rounds at "
                    + "least 1 (not \(fanoutPosts), \(fanoutRounds))")
        }
        let journalAsked = journalRows.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if let bad = journalAsked.first(where: { $0 != "all" && !Self.journalParts.contains($0) }) {
            throw ValidationError(
                "--journal-rows takes \(Self.journalParts.joined(separator: ", ")) or all, not '\(bad)'")
        }
        if journalKills < 0 || journalRecords < 8 || journalAppends < 20 {
            throw ValidationError("--journal-kills must be at least 0, --journal-records 8, --journal-appends 20")
        }
        if defaultsProcesses < 1 || defaultsIncrements < 1 || defaultsKeys < 1 || defaultsReads < 1
            || defaultsSets < 1 || defaultsKills < 0 || defaultsRoundTrips < rounds || defaultsLimitRounds < 0
        {
            throw ValidationError(
                "--defaults-processes, -increments, -keys, -reads and -sets must be at least 1, --defaults-kills "
                    + "at least 0, --defaults-round-trips at least --rounds")
        }
        // Found out now, not after minutes of measuring.
        for (option, file) in [("--json", json), ("--csv", csv), ("--plot", plot)] {
            guard let file else { continue }
            let directory = URL(fileURLWithPath: file).deletingLastPathComponent().path
            if !FileManager.default.isWritableFile(atPath: directory) {
                throw ValidationError("\(option) \(file): cannot write in \(directory)")
            }
        }
        if let percentiles {
            var isDirectory: ObjCBool = false
            if !FileManager.default.fileExists(atPath: percentiles, isDirectory: &isDirectory) || !isDirectory.boolValue
                || !FileManager.default.isWritableFile(atPath: percentiles)
            {
                throw ValidationError("--percentiles \(percentiles): not a writable directory")
            }
        }
    }

    /// Parses and runs; an error is one line on standard error.
    static func main() {
        // Library logs only on request (WORMHOLE_LOG=debug…), so helpers write nothing before `ready`.
        let level = ProcessInfo.processInfo.environment["WORMHOLE_LOG"].flatMap(Logger.Level.init(rawValue:))
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level ?? .critical
            return handler
        }
        do {
            let arguments = Array(CommandLine.arguments.dropFirst())
            if let first = arguments.first, let helper = helpers.first(where: { $0.configuration.commandName == first })
            {
                var command = try helper.parseAsRoot(Array(arguments.dropFirst()))
                try command.run()
                return
            }
            var command = try parseAsRoot()
            try command.run()
            ChildReaper.holdIfInterrupted()
        } catch let failure as BenchFailure {
            ChildReaper.holdIfInterrupted()
            Console.progress("wormhole-bench: \(failure.message)")
            Foundation.exit(failure.status)
        } catch let error as WormholeDBus.BusError {
            ChildReaper.holdIfInterrupted()
            Console.progress("wormhole-bench: \(error.message)")
            Foundation.exit(1)
        } catch {
            ChildReaper.holdIfInterrupted()
            exit(withError: error)
        }
    }

    func run() throws {
        // Before the daemon starts: an interrupt from here on stops every child and removes
        // every scratch directory.
        ChildReaper.install()
        // Every row measures what it measured before the doorbell (the bus path), in this process
        // and its helpers, whether or not this session has `$XDG_RUNTIME_DIR`; the notify suite's
        // doorbell row turns it on for its two processes only (`DoorbellPingPong`).
        setenv("WORMHOLE_DOORBELL", "off", 1)
        let started = MonotonicClock.now()
        let privateDaemon =
            try bus.address() == nil
            ? try PrivateDaemon(
                config: Executables.busConfiguration(config, isDefault: config == Self.defaultConfig), kind: self.daemon
            )
            : nil
        if let privateDaemon {
            Console.progress(
                "wormhole-bench: private \(daemon == .broker ? "dbus-broker" : "dbus-daemon") from \(privateDaemon.config)"
            )
        }
        guard let address = try privateDaemon?.address ?? bus.address() else { throw BenchFailure("no bus") }
        let report = BenchReport()
        let context = BenchContext(address: address, options: self, report: report)
        Console.output(
            "wormholectl bench: \(rounds) alternating rounds per row (+ up to \(warmup) warm-up round trips each), "
                + "bus \(address.rawValue)\(privateDaemon == nil ? "" : " (\(daemon.rawValue))")"
        )
        Console.output("one-way latency in microseconds (round trip / 2 unless the table says otherwise)")
        for suite in selectedSuites {
            Console.progress("== \(suite)")
            switch suite {
            case "notify": try NotifySuite(context: context).run()
            case "message": try MessageSuite(context: context).run()
            case "fallback": try FallbackSuite(context: context).run()
            case "cli": try CLISuite(context: context).run()
            case "fanout": try FanoutSuite(context: context).run()
            case "rate": try RateSuite(context: context).run()
            case "defaults": try DefaultsSuite(context: context).run()
            case "journal": try JournalSuite(context: context).run()
            default: try RouteSuite(context: context).run()
            }
        }
        report.printSummary()
        let seconds = Double(MonotonicClock.now() - started) / 1e9
        Console.progress(String(format: "wormhole-bench: done in %.0f s", seconds))
        if let json {
            try report.writeJSON(
                to: json,
                context: [
                    "suites": selectedSuites.joined(separator: ","), "rounds": "\(rounds)",
                    "roundTrips": "\(roundTrips)",
                    "warmup": "\(warmup)", "posts": "\(posts)", "postThreads": "\(postThreads)", "routes": "\(routes)",
                    "defaults":
                        "\(defaultsProcesses)x\(defaultsIncrements) increments, \(defaultsProcesses)x\(defaultsKeys) keys, "
                        + "\(defaultsKills) kills, \(defaultsRoundTrips) round trips, \(defaultsReads) reads, 4x\(defaultsSets) sets",
                    "seconds": String(format: "%.1f", seconds),
                    "date": ISO8601DateFormatter().string(from: Date()),
                ],
                machine: MachineDescription.current(daemon: privateDaemon == nil ? nil : daemon))
        }
        if let csv { try report.writeCSV(to: csv) }
        if let percentiles {
            let names = try report.writePercentiles(to: percentiles)
            Console.progress("wormhole-bench: \(names.count) percentile files in \(percentiles)")
        }
        if let plot {
            let title =
                "wormholectl bench --suite \(selectedSuites.joined(separator: ",")): one-way latency by percentile"
            try BenchReport.write(
                Data(BenchPlot(title: title, rows: report.latencyRows).svg().utf8), to: plot, option: "--plot")
        }
        withExtendedLifetime(privateDaemon) {}
    }
}

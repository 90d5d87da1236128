import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// `wormholectl bench` (which runs `wormhole-bench`) and the C floor's command-line modes, run as
/// the built binaries against a private bus.
/// The tests share the suite's bus: every bench measurement posts names of its own
/// (`org.wormhole.bench.<random tag>.…`).
@Suite("wormholectl bench / wormhole-floor", .sharedBus)
struct BenchCLITests {
    let bus: TestBus
    let runtime: NotifyCLITests.RuntimeDirectory
    init() throws {
        bus = try TestBus.shared()
        runtime = try NotifyCLITests.RuntimeDirectory()
    }

    var environment: [String: String] { ["XDG_RUNTIME_DIR": runtime.path] }

    /// How long a whole bench run (a debug build, tiny counts) may take before its test fails
    /// instead of hanging: a guard, not a timing. Runs take 2-8 s alone; with the suite's other
    /// tests and two more builds on 2 cores, three of them passed 10 s.
    static let benchBound: Double = 120

    func waitForReady(_ child: ChildProcess) async throws {
        let first = try await NotifyCLITests.within("ready") { await child.stderrLines.firstLine { _ in true } }
        if first != "ready" {
            throw TestFailure(
                "\(child.name) did not get ready: \(child.outputSoFar)")
        }
    }

    /// Waits for the child's first `count` standard-output lines.
    func lines(_ count: Int, of child: ChildProcess) async throws -> [String] {
        try await NotifyCLITests.next(count, from: child.stdoutLines)
    }

    @Test(
        "`wormholectl bench --suite cli` prints the CLI rows against the floor and a summary, and writes --json"
    )
    func benchCLISuite() async throws {
        let json = runtime.path + "/bench.json"
        let child = try ChildProcess(
            try productPath("wormholectl"),
            [
                "bench", "--suite", "cli", "--round-trips", "40", "--rounds", "2", "--warmup", "5", "--json", json,
                "--bus-address", bus.address.rawValue,
            ],
            environment: environment)
        let output = try await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        for row in ["wormhole-floor observe", "wormhole observe", "wormhole-floor listen", "wormhole listen"] {
            #expect(
                output.stdout.split(separator: "\n").contains { $0.hasPrefix(row + " ") },
                "row \(row) in \(output.stdout)")
        }
        #expect(output.stdout.contains("summary:"))
        #expect(output.stdout.contains("wormhole observe p50 / floor p50"))
        #expect(output.stdout.contains("wormhole listen p50 / floor p50"))
        #expect(output.stderr.contains("round 2/2"), "progress goes to standard error")

        let document =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any]
        #expect(document?["format"] as? Int == 2)
        let machine = document?["machine"] as? [String: Any] ?? [:]
        #expect((machine["cores"] as? Int ?? 0) >= 1, "\(machine)")
        for key in ["cpu", "kernel", "swift", "busDaemon", "system", "wormhole"] {
            #expect(!(machine[key] as? String ?? "").isEmpty, "\(key) in \(machine)")
        }
        let all = document?["rows"] as? [[String: Any]] ?? []
        let rows = all.filter { $0["kind"] as? String == "latency" }
        let goals = all.filter { $0["kind"] as? String == "goal" }
        #expect(rows.count == 4)
        for row in rows {
            #expect(row["count"] as? Int == 40)
            for key in ["label", "p50", "p90", "p99", "p99.9", "max", "ratio", "target", "floor", "status"] {
                #expect(row.keys.contains(key), "\(key) in \(row)")
            }
            #expect(row["value"] as? Double == row["p50"] as? Double && row["unit"] as? String == "us", "\(row)")
        }
        #expect(Set(all.compactMap { $0["id"] as? String }).count == all.count, "ids are unique")
        let observe = rows.first { $0["id"] as? String == "cli-wormhole-observe" }
        #expect(observe?["floor"] as? String == "cli-wormhole-floor-observe", "\(rows)")
        #expect(["PASS", "MISS"].contains(observe?["status"] as? String ?? ""), "\(rows)")
        #expect(goals.count == 3 && goals.allSatisfy { ["PASS", "MISS"].contains($0["status"] as? String ?? "") })

        // Two runs compared by the script: the same file against itself changes nothing.
        let compare = try ChildProcess(repositoryRoot.path + "/Tests/bench-compare.sh", [json, json]).wait()
        #expect(compare.status == 0, "\(compare.stderr)")
        #expect(compare.stdout.contains("cli-wormhole-observe "), "\(compare.stdout)")
        #expect(!compare.stdout.contains("better") && !compare.stdout.contains("worse"), "\(compare.stdout)")
        // README's summary from it, written into a copy with the markers.
        let readme = runtime.path + "/README.md"
        try "intro\n<!-- bench-summary:begin -->\nold\n<!-- bench-summary:end -->\nafter\n".write(
            toFile: readme, atomically: true, encoding: .utf8)
        let summary = try ChildProcess(
            repositoryRoot.path + "/scripts/bench/readme-summary.sh", [json, readme]
        ).wait()
        #expect(summary.status == 0, "\(summary.stderr)")
        let written = try String(contentsOfFile: readme, encoding: .utf8)
        #expect(
            written.hasPrefix("intro\n<!-- bench-summary:begin -->\n")
                && written.hasSuffix("<!-- bench-summary:end -->\nafter\n"))
        #expect(written.contains("| cli | ") && !written.contains("\nold\n"), "\(written)")
    }

    @Test("`wormholectl bench --suite defaults` with tiny counts prints every defaults row and exits 0")
    func benchDefaultsSuite() async throws {
        let json = runtime.path + "/defaults.json"
        let child = try ChildProcess(
            try productPath("wormholectl"),
            [
                "bench", "--suite", "defaults", "--defaults-processes", "2", "--defaults-increments", "20",
                "--defaults-keys", "10", "--defaults-kills", "3", "--defaults-round-trips", "20", "--rounds", "2",
                "--warmup", "2", "--defaults-reads", "1000", "--defaults-sets", "50", "--defaults-limit-rounds", "0",
                "--json", json,
                "--bus-address", bus.address.rawValue,
            ],
            environment: environment)
        let output = try await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        for row in [
            "lost updates: 2 processes x 20 increments of one key, expected 40: GroupDefaults.update 40, UserDefaults ",
            "lost keys: 2 processes x 10 distinct keys, expected 20: GroupDefaults.set 20, UserDefaults ",
            "kills: 3 SIGKILLs of a writer", "passMessage -> listener, 100 B ", "set -> observer ",
            "cached unchanged get ", "sets/s: 4 processes x 50 sets",
        ] {
            #expect(
                output.stdout.split(separator: "\n").contains { $0.hasPrefix(row) }, "row \(row) in \(output.stdout)")
        }
        for goal in [
            "GroupDefaults.update: increments lost of 40", "GroupDefaults.set: keys lost of 20",
            "kills: unreadable, wiped or moved-aside suites", "kills: acknowledged writes lost",
        ] {
            let line = output.stdout.split(separator: "\n").first { $0.hasPrefix(goal) }
            #expect(line?.hasSuffix("PASS") == true, "\(goal) in \(output.stdout)")
        }
        #expect(output.stdout.contains("summary:"))
        let document =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any]
        let rows = document?["rows"] as? [[String: Any]] ?? []
        #expect(rows.contains { $0["label"] as? String == "set -> observer" && $0["ratio"] is Double })
        #expect(rows.contains { $0["unit"] as? String == "sets/s" && $0["atLeast"] as? Bool == true })
    }

    @Test(
        "`wormholectl bench --suite rate` with tiny counts prints the post-call rows against the floor, with their goal"
    )
    func benchRatePostCall() async throws {
        let json = runtime.path + "/rate.json"
        let child = try ChildProcess(
            try productPath("wormholectl"),
            [
                "bench", "--suite", "rate", "--posts", "200", "--rate-rounds", "1", "--round-trips", "40",
                "--rounds", "2", "--warmup", "5", "--spacing-us", "50", "--json", json,
                "--bus-address", bus.address.rawValue,
            ],
            environment: environment)
        let output = try await finish(child)
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n")
        for row in ["raw libdbus send + flush ", "center.post, no doorbell endpoints "] {
            #expect(lines.contains { $0.hasPrefix(row) }, "row \(row) in \(output.stdout)")
        }
        let goal = lines.first { $0.hasPrefix("center.post call p50 / send + flush p50") }
        #expect(goal?.contains("<= 1.100") == true, "\(output.stdout)")
        let document =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any]
        let rows = document?["rows"] as? [[String: Any]] ?? []
        // 2 rounds of 20 posts each side: every post timed, none lost.
        let posted = rows.first { $0["label"] as? String == "center.post, no doorbell endpoints" }
        #expect(posted?["count"] as? Int == 40, "\(rows)")
        #expect(posted?["ratio"] is Double)
    }

    @Test("a missing wormhole-bench is a clear error naming its path")
    func missingBench() async throws {
        // A hard link to `wormholectl` in a directory without `wormhole-bench` next to it, beside the
        // build products (same file system). A link, not a copy: a copy's write descriptor can be
        // inherited by a child another test forks meanwhile, and exec then fails with ETXTBSY.
        var template = Array(
            productsDirectory.deletingLastPathComponent().appendingPathComponent("bench-test-XXXXXX").path.utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } }
        guard let directory = made else { throw TestFailure("mkdtemp failed: errno \(errno)") }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let linked = directory + "/wormholectl"
        guard link(try productPath("wormholectl"), linked) == 0 else {
            throw TestFailure("link failed: errno \(errno)")
        }
        let output = try run(linked, ["bench", "--suite", "cli"])
        #expect(output.status == 1)
        #expect(output.stderr.contains(directory + "/wormhole-bench"), "\(output.stderr)")
        #expect(output.stdout.isEmpty)
    }

    @Test("`wormhole-floor observe` prints exactly the bytes `wormholectl observe` prints for the same posts")
    func floorObserveMatchesCLI() async throws {
        // No '/': the tool's JSON encoder writes it as "\/" today; the floor does not escape it.
        let name = "com.example.it's \"quoted\" back\\slash\ttab\nline\u{1}\u{8}\u{c}\u{1f}\u{7f} ünï\u{2028}"
        let ours = try ChildProcess(
            try productPath("wormholectl"),
            ["observe", "--count", "2", "--bus-address", bus.address.rawValue, "--", name],
            environment: environment)
        let floor = try ChildProcess(try productPath("wormhole-floor"), ["observe", bus.address.rawValue, name])
        defer { floor.signal(SIGKILL) }
        try await waitForReady(ours)
        try await waitForReady(floor)
        let poster = try DarwinNotificationCenter(
            busAddress: bus.address, sharedStateDirectory: runtime.path + "/wormhole")
        try poster.post(NotificationName(name + "x"), state: 1)
        try poster.post(NotificationName(name), state: 42)
        // Without a state, as a hand-typed trigger on the plain interface sends it.
        try poster.connection.emit(
            Signal(
                path: ObjectPath(NotifyContract.objectPath), interface: InterfaceName(NotifyContract.plainInterface),
                member: MemberName(NotifyContract.member), arguments: [.string(name)]))
        poster.flush()
        let floorLines = try await lines(2, of: floor)
        let ourLines = try await lines(2, of: ours)
        #expect(floorLines == ourLines)
        #expect(ourLines == [try NotifyCLITests.line(name, 42), try NotifyCLITests.line(name, nil)])
    }

    /// Runs `child` to its end off Swift's cooperative threads, within the guard.
    func finish(_ child: ChildProcess) async throws -> ProcessOutput {
        try await within("the bench", seconds: Self.benchBound) {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
            }
        }
    }

    /// The children of `pid` (every thread's), from /proc, with their start times.
    static func children(of pid: pid_t) -> [(pid: pid_t, start: String)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var found: [(pid: pid_t, start: String)] = []
        for task in tasks {
            let list = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
            for child in list.split(separator: " ").compactMap({ pid_t($0) }) {
                if let start = processStart(child) { found.append((child, start)) }
            }
        }
        return found
    }

    /// Field 22 of /proc/PID/stat (start time) of a live, not-zombie process; nil when gone.
    static func processStart(_ pid: pid_t) -> String? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is the state (field 3), so the start time (field 22) is fields[19].
        guard fields.count > 19, fields[0] != "Z", fields[0] != "X" else { return nil }
        return String(fields[19])
    }

    @Test(
        "SIGINT during `wormholectl bench` stops its children and its private dbus-daemon and removes its temporary files"
    )
    func interruptCleansUp() async throws {
        let temporary = try TemporaryDirectory("bench-tmp")
        // A private daemon (no --bus-address) and far more round trips than run before the signal.
        let child = try ChildProcess(
            try productPath("wormholectl"),
            [
                "bench", "--suite", "notify", "--other-names", "0", "--round-trips", "100000000", "--rounds", "2",
                "--warmup", "0",
            ],
            environment: environment.merging(["TMPDIR": temporary.path]) { $1 })
        let pid = child.pid
        // The first round runs: the daemon and the ping-pong processes are up.
        let line = try await within("the first round", seconds: Self.benchBound) {
            await child.stderrLines.firstLine { $0.contains("round 1/2") }
        }
        #expect(line != nil, "\(child.outputSoFar)")
        let children = Self.children(of: pid)
        let names = children.compactMap {
            try? String(contentsOfFile: "/proc/\($0.pid)/comm", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
        }
        #expect(names.contains("dbus-daemon"), "children: \(names)")
        #expect(children.count >= 3, "the daemon and the ping-pong processes: \(names)")
        #expect(try !temporary.contents().isEmpty, "the daemon's socket directory is in TMPDIR")

        child.signal(SIGINT)
        let output = try await finish(child)
        #expect(output.status != 0)
        #expect(output.stderr.contains("interrupted (signal 2)"), "\(output.stderr)")
        let survivors = children.filter { Self.processStart($0.pid) == $0.start }
        #expect(survivors.isEmpty, "still running after the bench exited: \(survivors.map(\.pid))")
        let left = try temporary.contents()
        #expect(left.isEmpty, "left in TMPDIR: \(left)")
    }

    @Test(
        "--csv, --percentiles and --plot write every message row (Codable, raw JSONDocument, codec alone, raw on the bus only, transient, floors)"
    )
    func benchOutputs() async throws {
        let output = runtime.path + "/out"
        try FileManager.default.createDirectory(atPath: output + "/percentiles", withIntermediateDirectories: true)
        let child = try ChildProcess(
            try productPath("wormholectl"),
            [
                "bench", "--suite", "message", "--message-sizes", "100", "--message-round-trips", "20", "--rounds", "2",
                "--warmup", "2", "--csv", output + "/rows.csv", "--percentiles", output + "/percentiles", "--plot",
                output + "/plot.svg", "--bus-address", bus.address.rawValue,
            ],
            environment: environment)
        let result = try await finish(child)
        #expect(result.status == 0, "\(result.stderr)")
        let labels = [
            "floor, 100 B files", "Wormhole, 100 B JSON", "Wormhole, 100 B raw JSONDocument", "JSON codec alone, 100 B",
            "Wormhole, 100 B raw, bus only", "floor, notification only", "transient, 100 B Codable",
            "transient, 100 B JSONDocument", "mailbox, 100 B Codable",
        ]
        for label in labels {
            #expect(result.stdout.split(separator: "\n").contains { $0.hasPrefix(label + " ") }, "row \(label)")
            #expect(result.stderr.contains("row done: \(label): p50 "), "progress line of \(label)")
        }
        for goal in [
            "raw JSONDocument 100 B p50 / floor p50", "Wormhole 100 B JSON p50 - codec p50, / floor p50",
            "transient 100 B p50 / notification floor p50", "transient JSONDocument p50 / notification floor p50",
            "raw 100 B p50 / raw on the bus only p50",
        ] {
            #expect(result.stdout.contains(goal), "\(goal)")
        }

        let csv = try String(contentsOfFile: output + "/rows.csv", encoding: .utf8)
        let lines = csv.split(separator: "\r\n")
        #expect(
            lines.first
                == "suite,label,count,p50,p90,p99,p99.9,max,postsPerSecond,postsPerSecondLoop,ratio,target,value,unit,atLeast"
        )
        #expect(lines.count == 1 + labels.count, "\(csv)")
        #expect(
            lines.contains { $0.hasPrefix("message,\"Wormhole, 100 B raw JSONDocument\",20,") && $0.contains(",1.5,") },
            "\(csv)")

        let files = try FileManager.default.contentsOfDirectory(atPath: output + "/percentiles").sorted()
        #expect(
            files == [
                "message-floor-100-b-files.hgrm", "message-floor-notification-only.hgrm",
                "message-json-codec-alone-100-b.hgrm", "message-mailbox-100-b-codable.hgrm",
                "message-transient-100-b-codable.hgrm", "message-transient-100-b-jsondocument.hgrm",
                "message-wormhole-100-b-json.hgrm", "message-wormhole-100-b-raw-bus-only.hgrm",
                "message-wormhole-100-b-raw-jsondocument.hgrm",
            ])
        let distribution = try String(
            contentsOfFile: output + "/percentiles/message-wormhole-100-b-json.hgrm", encoding: .utf8)
        #expect(distribution.contains("Percentile") && distribution.contains("#[Mean"), "\(distribution)")

        let svg = try String(contentsOfFile: output + "/plot.svg", encoding: .utf8)
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.hasSuffix("</svg>\n"))
        for label in labels { #expect(svg.contains(">\(label)</text>"), "legend \(label)") }
        #expect(svg.components(separatedBy: "<path ").count - 1 == labels.count, "one line per row")
        #expect(svg.contains(">99%</text>"))
    }

    @Test(
        "bad --percentiles, --plot, --csv, --message-sizes and --journal-rows are refused before anything runs, naming the value"
    )
    func badOutputOptions() async throws {
        for (arguments, expected) in [
            (
                ["--percentiles", "/nonexistent/wormhole-dir"],
                "--percentiles /nonexistent/wormhole-dir: not a writable directory"
            ),
            (
                ["--plot", "/nonexistent/dir/plot.svg"],
                "--plot /nonexistent/dir/plot.svg: cannot write in /nonexistent/dir"
            ),
            (
                ["--csv", "/nonexistent/dir/rows.csv"],
                "--csv /nonexistent/dir/rows.csv: cannot write in /nonexistent/dir"
            ),
            (["--message-sizes", "100,big"], "not '100,big'"),
            (
                ["--journal-rows", "rates,speed"],
                "--journal-rows takes kills, fanout, rates, durable, latency or all, not 'speed'"
            ),
        ] {
            let output = try await runInBackground(
                try productPath("wormholectl"), ["bench", "--suite", "message"] + arguments)
            #expect(output.status != 0)
            #expect(output.stderr.contains(expected), "\(output.stderr)")
            #expect(output.stdout.isEmpty)
        }
    }

    @Test("installed as PREFIX/bin/wormhole-bench, the bench finds PREFIX/share/wormhole/wormhole-session.conf")
    func installedConfig() async throws {
        let prefix = try TemporaryDirectory("bench-prefix")
        try FileManager.default.createDirectory(atPath: prefix.path + "/bin", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            atPath: prefix.path + "/share/wormhole", withIntermediateDirectories: true)
        // Copied by cp (a child), so no write descriptor of ours is inherited by a child another test starts.
        let configuration = productsDirectory.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("dbus/wormhole-session.conf").path
        let copy = try await runInBackground(
            "/bin/cp",
            [
                try productPath("wormhole-bench"), try productPath("wormhole-floor"), try productPath("wormholectl"),
                prefix.path + "/bin/",
            ])
        #expect(copy.status == 0, "\(copy.stderr)")
        try FileManager.default.copyItem(
            atPath: configuration, toPath: prefix.path + "/share/wormhole/wormhole-session.conf")
        // Run from the prefix, where no dbus/ directory is.
        let output = try await runInBackground(
            "/bin/sh",
            [
                "-c",
                "cd \"$1\" && exec ./bin/wormhole-bench --suite notify --other-names 0 --round-trips 4 --rounds 2 --warmup 0 --spacing-us 0",
                "sh", prefix.path,
            ],
            environment: environment.merging(["TMPDIR": prefix.path]) { $1 })
        #expect(output.status == 0, "\(output.stderr)")
        #expect(
            output.stderr.contains("private dbus-daemon from \(prefix.path)/share/wormhole/wormhole-session.conf"),
            "\(output.stderr)")
    }
}

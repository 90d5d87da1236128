import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// `wormhole bench` (which runs `wormhole-bench`) and the C floor's command-line modes, run as
/// the built binaries against a private bus.
@Suite("wormhole bench / wormhole-floor")
struct BenchCLITests {
    let bus: TestBus
    let runtime: NotifyCLITests.RuntimeDirectory
    init() throws {
        bus = try TestBus()
        runtime = try NotifyCLITests.RuntimeDirectory()
    }

    var environment: [String: String] { ["XDG_RUNTIME_DIR": runtime.path] }

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
        "`wormhole bench --suite cli` prints the CLI rows against the floor and a summary, and writes --json"
    )
    func benchCLISuite() async throws {
        let json = runtime.path + "/bench.json"
        let child = try ChildProcess(
            try productPath("wormhole"),
            [
                "bench", "--suite", "cli", "--round-trips", "40", "--rounds", "2", "--warmup", "5", "--json", json,
                "--bus-address", bus.address.rawValue,
            ],
            environment: environment)
        let output = try await NotifyCLITests.within("the bench") {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
            }
        }
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
        let rows = document?["rows"] as? [[String: Any]] ?? []
        #expect(rows.count == 4)
        for row in rows {
            #expect(row["count"] as? Int == 40)
            for key in ["label", "p50", "p90", "p99", "p99.9", "max", "ratio", "target"] {
                #expect(row.keys.contains(key), "\(key) in \(row)")
            }
        }
    }

    @Test("`wormhole bench --suite defaults` with tiny counts prints every defaults row and exits 0")
    func benchDefaultsSuite() async throws {
        let json = runtime.path + "/defaults.json"
        let child = try ChildProcess(
            try productPath("wormhole"),
            [
                "bench", "--suite", "defaults", "--defaults-processes", "2", "--defaults-increments", "20",
                "--defaults-keys", "10", "--defaults-kills", "3", "--defaults-round-trips", "20", "--rounds", "2",
                "--warmup", "2", "--defaults-reads", "1000", "--defaults-sets", "50", "--json", json,
                "--bus-address", bus.address.rawValue,
            ],
            environment: environment)
        let output = try await NotifyCLITests.within("the bench") {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
            }
        }
        #expect(output.status == 0, "\(output.stderr)")
        for row in [
            "lost updates: 2 processes x 20 increments of one key, expected 40: GroupDefaults.update 40, UserDefaults ",
            "lost keys: 2 processes x 10 distinct keys, expected 20: GroupDefaults.set 20, UserDefaults ",
            "kills: 3 SIGKILLs of a writer", "passMessage -> listener, 100 B ", "set -> observer ",
            "cached unchanged get ", "sets/s: 4 processes x 50 sets",
        ] {
            #expect(output.stdout.split(separator: "\n").contains { $0.hasPrefix(row) }, "row \(row) in \(output.stdout)")
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

    @Test("a missing wormhole-bench is a clear error naming its path")
    func missingBench() async throws {
        // A hard link to `wormhole` in a directory without `wormhole-bench` next to it, beside the
        // build products (same file system). A link, not a copy: a copy's write descriptor can be
        // inherited by a child another test forks meanwhile, and exec then fails with ETXTBSY.
        var template = Array(
            productsDirectory.deletingLastPathComponent().appendingPathComponent("bench-test-XXXXXX").path.utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } }
        guard let directory = made else { throw TestFailure("mkdtemp failed: errno \(errno)") }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let linked = directory + "/wormhole"
        guard link(try productPath("wormhole"), linked) == 0 else { throw TestFailure("link failed: errno \(errno)") }
        let output = try run(linked, ["bench", "--suite", "cli"])
        #expect(output.status == 1)
        #expect(output.stderr.contains(directory + "/wormhole-bench"), "\(output.stderr)")
        #expect(output.stdout.isEmpty)
    }

    @Test("`wormhole-floor observe` prints exactly the bytes `wormhole observe` prints for the same posts")
    func floorObserveMatchesCLI() async throws {
        // No '/': the tool's JSON encoder writes it as "\/" today; the floor does not escape it.
        let name = "com.example.it's \"quoted\" back\\slash\ttab\nline\u{1}\u{8}\u{c}\u{1f}\u{7f} ünï\u{2028}"
        let ours = try ChildProcess(
            try productPath("wormhole"),
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
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Histogram
import Wormhole
import WormholeDBus

/// Shared defaults (issue 9): lost updates and lost keys against Foundation's
/// `UserDefaults(suiteName:)`, writers SIGKILLed at random instants, `set` → observer latency
/// against `passMessage` → listener, the cached `get` cost and the `set` rate from 4 processes.
struct DefaultsSuite: BenchSuite {
    let context: BenchContext
    static let group = "group.org.wormhole.bench"

    func run() throws {
        Console.output("\nshared defaults (GroupDefaults, one suite file per run, no fsync)")
        try lostUpdates(processes: options.defaultsProcesses, increments: options.defaultsIncrements)
        try lostKeys(processes: options.defaultsProcesses, keys: options.defaultsKeys)
        try kills(options.defaultsKills)
        try latency()
        try getCost(reads: options.defaultsReads)
        try setRate(processes: 4, sets: options.defaultsSets)
        if options.defaultsLimitRounds > 0 { try sizeLimit(rounds: options.defaultsLimitRounds) }
    }

    /// The suite limit (issue 20): a write into a suite of almost 4 MiB against a plain read and
    /// atomic replace of the same bytes, side by side; a 5 MiB value refused against reading the
    /// suite once.
    private func sizeLimit(rounds: Int) throws {
        let base = FileManager.default.isWritableFile(atPath: "/dev/shm") ? "/dev/shm" : nil
        let work = try ScratchDirectory("defaults", in: base)
        let defaults = try LibraryAPI.defaults(group: Self.group, root: work.path, address: address)
        // ~4,000 keys of ~1 KiB: just under 4 MiB of JSON.
        let pad = String(repeating: "v", count: 1000)
        var values: [String: PropertyListValue] = [:]
        for index in 0..<4000 { values["key-\(index)"] = .string(pad) }
        try defaults.setValues(values)
        let path = defaults.path
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        Console.progress("defaults: a \(size)-byte suite, \(rounds) rounds")
        func time(_ body: () throws -> Void) rethrows -> Histogram<UInt64> {
            var histogram = BenchRow.makeHistogram()
            for _ in 0..<rounds {
                let start = MonotonicClock.now()
                try body()
                histogram.record(max(1, MonotonicClock.now() - start))
            }
            return histogram
        }
        // The floor: read the file, write the same bytes to a temporary file, rename it over.
        let directory = (path as NSString).deletingLastPathComponent
        let plain = try time {
            guard let bytes = FileManager.default.contents(atPath: path) else {
                throw BenchFailure("cannot read \(path)")
            }
            let temporary = directory + "/.plain.tmp"
            guard FileManager.default.createFile(atPath: temporary, contents: bytes), rename(temporary, path) == 0
            else {
                throw BenchFailure("cannot replace \(path): errno \(errno)")
            }
        }
        var counter = 0
        let cachedWrite = try time {
            counter += 1
            try defaults.set(counter, forKey: "counter")
        }
        let freshWrite = try time {
            counter += 1
            try LibraryAPI.defaults(group: Self.group, root: work.path, address: address).set(
                counter, forKey: "counter")
        }
        let freshRead = try time {
            _ = try LibraryAPI.defaults(group: Self.group, root: work.path, address: address).values()
        }
        let huge = String(repeating: "x", count: 5 << 20)
        let before = FileManager.default.contents(atPath: path)
        let refused = try time {
            do {
                try defaults.set(huge, forKey: "huge")
                throw BenchFailure("a 5 MiB value was accepted")
            } catch let error as WormholeError where error.code == .suiteTooLarge {}
        }
        guard FileManager.default.contents(atPath: path) == before else {
            throw BenchFailure("a refused write changed the suite")
        }
        let rows = [
            BenchRow(label: "plain read + atomic replace", histogram: plain, isRoundTrip: false),
            BenchRow(label: "set, this process's cache", histogram: cachedWrite, isRoundTrip: false),
            BenchRow(label: "set, a new GroupDefaults", histogram: freshWrite, isRoundTrip: false),
            BenchRow(label: "read the suite once (new)", histogram: freshRead, isRoundTrip: false),
            BenchRow(label: "5 MiB value refused", histogram: refused, isRoundTrip: false),
        ]
        Console.output(
            "\nthe suite limit: writes into a \(size)-byte suite, \(rounds) each, against a plain read + replace")
        Console.output(BenchRow.header)
        report.publish([(rows[0], nil, nil)] + rows[1...].map { ($0, rows[0], nil) }, suite: "defaults")
        report.figure(
            "defaults", "set into a 4 MiB suite / plain read + replace", value: rows[1].median / rows[0].median,
            unit: "x", count: rounds, target: 1.5)
        report.figure(
            "defaults", "5 MiB value refused / reading the suite once", value: rows[4].median / rows[3].median,
            unit: "x", count: rounds, target: 1)
    }

    /// `processes` children at once, each `_bench-defaults` with `arguments`; every one must exit 0.
    private func runAll(
        _ processes: Int, environment: [String: String] = [:], arguments: (Int) -> [String]
    ) throws {
        let children = try (0..<processes).map {
            try ChildProcess(
                executable: Executables.current, arguments: ["_bench-defaults"] + arguments($0),
                environment: environment)
        }
        for child in children {
            let output = try child.readAllOutput()
            let status = child.waitForExit()
            guard status == 0 else { throw BenchFailure("\(child.name) exited with \(status): \(output)") }
        }
    }

    private func ours(_ root: String, _ mode: String) -> [String] {
        ["--mode", mode, "--group", Self.group, "--root", root, "--bus-address", address.rawValue]
    }

    /// What Foundation left in `<home>/<group>.plist`: nil when the file does not parse.
    private func foundationSuite(_ home: String) -> [String: Any]? {
        guard let data = FileManager.default.contents(atPath: "\(home)/\(Self.group).plist") else { return nil }
        return (try? PropertyListSerialization.propertyList(from: data, format: nil)) as? [String: Any]
    }

    private func lostUpdates(processes: Int, increments: Int) throws {
        let expected = processes * increments
        Console.progress("defaults: \(processes) x \(increments) increments")
        let work = try ScratchDirectory("defaults")
        try runAll(processes) { _ in ours(work.path, "increment") + ["--count", "\(increments)"] }
        let defaults = try LibraryAPI.defaults(group: Self.group, root: work.path, address: address)
        let final = try LibraryAPI.integer(defaults, forKey: "counter") ?? 0
        Console.progress("defaults: the same with Foundation's UserDefaults")
        let home = try work.makeDirectory("foundation")
        try runAll(processes, environment: ["XDG_CONFIG_HOME": home]) { _ in
            ["--mode", "foundation-increment", "--group", Self.group, "--count", "\(increments)"]
        }
        let foundation = foundationSuite(home).flatMap { $0["counter"] as? Int } ?? 0
        Console.output(
            "lost updates: \(processes) processes x \(increments) increments of one key, expected \(expected): "
                + "GroupDefaults.update \(final), UserDefaults \(foundation)")
        report.figure(
            "defaults", "GroupDefaults.update: increments lost of \(expected)", value: Double(expected - final),
            unit: "count", count: expected, target: 0)
        report.figure(
            "defaults", "UserDefaults: increments lost of \(expected)", value: Double(expected - foundation),
            unit: "count", count: expected, target: nil)
    }

    private func lostKeys(processes: Int, keys: Int) throws {
        let expected = processes * keys
        Console.progress("defaults: \(processes) x \(keys) distinct keys")
        let work = try ScratchDirectory("defaults")
        try runAll(processes) { ours(work.path, "distinct") + ["--key", "p\($0)", "--count", "\(keys)"] }
        let defaults = try LibraryAPI.defaults(group: Self.group, root: work.path, address: address)
        let kept = try LibraryAPI.values(defaults).count
        Console.progress("defaults: the same with Foundation's UserDefaults")
        let home = try work.makeDirectory("foundation")
        try runAll(processes, environment: ["XDG_CONFIG_HOME": home]) {
            ["--mode", "foundation-distinct", "--group", Self.group, "--key", "p\($0)", "--count", "\(keys)"]
        }
        let foundation = foundationSuite(home)?.keys.filter { $0.hasPrefix("p") && $0.contains("-") }.count ?? 0
        Console.output(
            "lost keys: \(processes) processes x \(keys) distinct keys, expected \(expected): "
                + "GroupDefaults.set \(kept), UserDefaults \(foundation)")
        report.figure(
            "defaults", "GroupDefaults.set: keys lost of \(expected)", value: Double(expected - kept), unit: "count",
            count: expected, target: 0)
        report.figure(
            "defaults", "UserDefaults: keys lost of \(expected)", value: Double(expected - foundation), unit: "count",
            count: expected, target: nil)
    }

    /// Starts a writer, kills it at a random instant after its first acknowledged write, and
    /// checks the suite after each kill: it parses, holds the last acknowledged value, and nothing
    /// was moved aside as corrupt.
    private func kills(_ kills: Int) throws {
        guard kills > 0 else { return }
        let work = try ScratchDirectory("defaults")
        var (unreadable, lost, acknowledged, done) = (0, 0, 0, 0)
        while done < kills && unreadable == 0 {
            if done % 100 == 0 { Console.progress("defaults: kill \(done + 1)/\(kills)") }
            let writer = try ChildProcess(
                executable: Executables.current, arguments: ["_bench-defaults"] + ours(work.path, "write-loop"))
            guard let first = try writer.output.readLine(timeoutSeconds: 60) else {
                throw BenchFailure("the writer exited before its first write (status \(writer.waitForExit()))")
            }
            var last = Int(String(decoding: first, as: UTF8.self)) ?? 0
            // The kill's timing: up to 5 ms into the writing loop, drawn before the kill.
            usleep(UInt32.random(in: 0..<5_000))
            writer.terminate(signal: SIGKILL)
            for line in try writer.readAllOutput() {
                if let value = Int(line) { last = value }
            }
            done += 1
            acknowledged = max(acknowledged, last)
            // A fresh instance: nothing cached from an earlier read.
            let defaults = try LibraryAPI.defaults(group: Self.group, root: work.path, address: address)
            let directory = URL(fileURLWithPath: defaults.path).deletingLastPathComponent().path
            let corrupt = try FileManager.default.contentsOfDirectory(atPath: directory).contains {
                $0.contains(".corrupt-")
            }
            guard let stored = (try? LibraryAPI.values(defaults))?["counter"]?.intValue, !corrupt else {
                // The next writer would start from scratch: the run stops here.
                unreadable += 1
                Console.progress("defaults: after kill \(done) the suite is unreadable, wiped or moved aside")
                break
            }
            if stored < last { lost += 1 }
        }
        Console.output(
            "kills: \(done) SIGKILLs of a writer at random instants (\(acknowledged) acknowledged writes in all): "
                + "\(unreadable) suites unreadable or wiped, \(lost) kills lost an acknowledged write")
        report.figure(
            "defaults", "kills: unreadable, wiped or moved-aside suites", value: Double(unreadable), unit: "count",
            count: done, target: 0)
        report.figure(
            "defaults", "kills: acknowledged writes lost", value: Double(lost), unit: "count", count: done, target: 0)
    }

    /// `set` → observer in another process against `passMessage` → listener, alternating rounds.
    private func latency() throws {
        let (message, ours) = try latencyAgainstMessage(
            context, suite: "defaults", action: "set -> observer", label: "set -> observer",
            roundTrips: options.defaultsRoundTrips
        ) { address, root in try DefaultsSession(address: address, root: root, group: Self.group) }
        report.goal(
            "defaults", "set->observer p99 / passMessage p99", ratio: ours.percentile(99) / message.percentile(99),
            target: 2)
    }

    /// An unchanged key read through the cache: batches of 100 reads timed together.
    private func getCost(reads: Int) throws {
        let work = try ScratchDirectory("defaults")
        let defaults = try LibraryAPI.defaults(group: Self.group, root: work.path, address: address)
        try LibraryAPI.set(defaults, 42, forKey: "cached")
        let batch = 100
        let path = defaults.path
        // The freshness check's floor: a bare lstat of the suite file, timed the same way.
        let syscall = try timeBatches(reads, batch: batch) {
            var info = stat()
            return lstat(path, &info) == 0 ? 1 : 0
        }
        let cached = try timeBatches(reads, batch: batch) { try LibraryAPI.integer(defaults, forKey: "cached") ?? 0 }
        // The same read checked with the suite's change counter (GroupDefaults.Freshness.changeCounter):
        // one load from the shared mapping, no system call. Its first read maps the counter.
        let counted = try LibraryAPI.defaults(
            group: Self.group, root: work.path, address: address, freshness: .changeCounter)
        guard try LibraryAPI.integer(counted, forKey: "cached") == 42 else {
            throw BenchFailure("the change-counter reader does not read the value just written")
        }
        let countedReads = try timeBatches(reads, batch: batch) {
            try LibraryAPI.integer(counted, forKey: "cached") ?? 0
        }
        let floor = BenchRow(label: "lstat of the suite file", histogram: syscall, isRoundTrip: false)
        let row = BenchRow(label: "cached unchanged get", histogram: cached, isRoundTrip: false)
        let countedRow = BenchRow(
            label: "cached unchanged get, change counter", histogram: countedReads, isRoundTrip: false)
        Console.output(
            "\ncached unchanged get, one process, \(row.count * batch) reads timed in batches of \(batch) "
                + "(per read), against a bare lstat")
        Console.output(BenchRow.header)
        report.publish([(floor, nil, nil), (row, floor, nil), (countedRow, floor, nil)], suite: "defaults")
        report.figure(
            "defaults", "cached unchanged get p50", value: row.median, unit: "us", count: row.count * batch, target: 1)
        report.figure(
            "defaults", "cached unchanged get, change counter, p50", value: countedRow.median, unit: "us",
            count: countedRow.count * batch, target: 0.2)
    }

    /// Nanoseconds per call of `body`, one sample per batch of `batch` calls, `total` calls in all.
    private func timeBatches(_ total: Int, batch: Int, _ body: () throws -> Int) throws -> Histogram<UInt64> {
        var histogram = BenchRow.makeHistogram()
        var sum = 0
        for _ in 0..<max(1, (total + batch - 1) / batch) {
            let start = MonotonicClock.now()
            for _ in 0..<batch { sum &+= try body() }
            histogram.record(max(1, (MonotonicClock.now() - start) / UInt64(batch)))
        }
        guard sum != 0 else { throw BenchFailure("the timed reads returned nothing") }
        return histogram
    }

    /// `set`s per second from `processes` processes at once into one suite on tmpfs, without fsync.
    private func setRate(processes: Int, sets: Int) throws {
        let base = FileManager.default.isWritableFile(atPath: "/dev/shm") ? "/dev/shm" : nil
        let work = try ScratchDirectory("defaults", in: base)
        let gate = try StartGate(in: work.path)
        let children = try gate.start(processes) { index in
            ["_bench-defaults"] + ours(work.path, "set-rate") + [
                "--key", "rate-\(index)", "--count", "\(sets)", "--go", gate.path,
            ]
        }
        let run = try gate.openAndMeasure(children, who: "a set-rate writer")
        let rate = run.rate
        Console.output(
            "\nsets/s: \(processes) processes x \(sets) sets into one suite in \(base ?? "the temporary directory")"
                + String(format: " (no fsync): %.0f sets/s", rate))
        report.figure(
            "defaults", "sets/s from \(processes) processes, no fsync", value: rate, unit: "sets/s", count: run.total,
            target: 10_000, atLeast: true)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Histogram
import Wormhole

/// Post rate from one thread and from several, against `wormhole-floor blast`. Issue 7's rule:
/// after BusIO hands emits to its I/O thread, the rate must stay within 5% of today's.
struct RateSuite: BenchSuite {
    let context: BenchContext

    func run() throws {
        let posts = options.posts
        let threads = options.postThreads
        Console.output(
            "\npost rate: \(posts) posts per round, posted as fast as possible then flushed; "
                + "median of \(options.rateRounds) rounds (posts/s, higher is better)")
        Console.output(
            "flushed: until every post was written to the bus socket; loop only: until the last post call returned")
        Console.output(RateRow.header)
        let center = try DarwinNotificationCenter(busAddress: address)
        let names = BenchNames()
        let drain = try PostRate.Drain(center, name: try NotificationName(names.name("rate.drain")))
        let threadNames = try (0..<threads).map { try NotificationName(names.name("rate.\($0)")) }
        var floor = RateRow(label: "raw libdbus floor, 1 thread", posts: posts)
        var one = RateRow(label: "center.post, 1 thread", posts: posts)
        var many = RateRow(label: "center.post, \(threads) threads", posts: posts)
        let floorName = names.name("rate.floor")
        for round in 0..<options.rateRounds {
            Console.progress("  rate: round \(round + 1)/\(options.rateRounds)")
            for step in 0..<3 {
                switch (round + step) % 3 {
                case 0: floor.samples.append(try PostRate.floor(address, name: floorName, posts: posts))
                case 1:
                    one.samples.append(try PostRate.center(center, names: [threadNames[0]], posts: posts, drain: drain))
                default:
                    many.samples.append(try PostRate.center(center, names: threadNames, posts: posts, drain: drain))
                }
            }
        }
        Console.output(floor.line(against: nil))
        Console.output(one.line(against: floor))
        Console.output(many.line(against: floor))
        report.add(floor, suite: "rate")
        report.add(one, suite: "rate", against: floor)
        report.add(many, suite: "rate", against: floor)
        report.goal(
            "rate", "center.post 1 thread posts/s / floor (flushed)", ratio: one.median / floor.median, target: nil)
        report.goal(
            "rate", "center.post \(threads) threads posts/s / floor (flushed)", ratio: many.median / floor.median,
            target: nil)
        report.goal(
            "rate", "center.post 1 thread posts/s / floor (loop only)", ratio: one.loopMedian / floor.loopMedian,
            target: nil)
        try postCall()
    }

    /// How long one post call takes on an idle connection (issue 23: p50 ≤ 1.1× the floor):
    /// `DarwinNotificationCenter.post` in a process of its own, the doorbell on, against
    /// `wormhole-floor post-call` (build the signal, `dbus_connection_send`,
    /// `dbus_connection_flush`); twice: with no endpoint registered (an empty runtime directory),
    /// and with one observer of the name registered in another process (`wormholectl observe`), so
    /// that each post rings (issue 36: p50 ≤ 1.1× the floor plus one `sendto`). All wait
    /// `--spacing-us` after each post, untimed, in alternating rounds.
    private func postCall() throws {
        let count = perRound
        let spacing = options.spacingUs
        Console.output(
            "\npost call: one post, from the call to its return, \(spacing) µs apart (µs); a name nobody observes, "
                + "then one observed in another process (the post rings it)")
        let empty = try ScratchDirectory("post-call")
        let observed = try ScratchDirectory("post-call-rung")
        let names = BenchNames()
        let rungName = names.name("post-call.rung")
        let observer = try Self.observer(rungName, address: address, runtime: observed.path)
        defer { observer.terminate() }
        func wormhole(_ name: String, runtime: String) throws -> Histogram<UInt64> {
            let child = try ChildProcess(
                executable: Executables.current,
                arguments: [
                    "_bench-post-call", "--name", name, "--count", "\(count)", "--warmup", "\(options.warmup)",
                    "--spacing-us", "\(spacing)", "--bus-address", address.rawValue,
                ],
                // The bench turned the doorbell off for itself and its helpers; on for this one ("" unsets).
                environment: ["XDG_RUNTIME_DIR": runtime, "WORMHOLE_DOORBELL": ""])
            return try Self.histogram(child, "_bench-post-call", count: count, parse: RecordedValueLines.parse)
        }
        let merged = try AlternatingRounds(label: "post call", rounds: options.rounds).measure([
            .init(name: "floor") {
                let child = try ChildProcess(
                    executable: try Executables.sibling("wormhole-floor"),
                    arguments: [
                        "post-call", address.rawValue, names.name("post-call.floor"), "\(count)", "\(options.warmup)",
                        "\(spacing)",
                    ])
                return try Self.histogram(child, "wormhole-floor post-call", count: count) { line in
                    UInt64(line).map { ($0, 1) }
                }
            },
            .init(name: "wormhole") { try wormhole(names.name("post-call.wormhole"), runtime: empty.path) },
            .init(name: "wormhole, rung") { try wormhole(rungName, runtime: observed.path) },
        ])
        let floor = BenchRow(label: "raw libdbus send + flush", histogram: merged[0], isRoundTrip: false)
        let ours = BenchRow(label: "center.post, no doorbell endpoints", histogram: merged[1], isRoundTrip: false)
        let rung = BenchRow(label: "center.post, one observer rung", histogram: merged[2], isRoundTrip: false)
        report.publish([(floor, nil, nil), (ours, floor, 1.1), (rung, floor, nil)], suite: "rate")
        report.goal("rate", "center.post call p50 / send + flush p50", ratio: ours.median / floor.median, target: 1.1)
        report.goal(
            "rate", "center.post call, one observer rung, p50 / send + flush p50", ratio: rung.median / floor.median,
            target: nil)
    }

    /// `wormholectl observe NAME` with the doorbell on in `runtime`, ready (its match rules active and
    /// its doorbell registered); its lines go to /dev/null, so no pipe fills however many posts.
    static func observer(_ name: String, address: BusAddress, runtime: String) throws -> ChildProcess {
        let child = try ChildProcess(
            executable: "/bin/sh",
            arguments: [
                "-c", #"exec "$0" observe "$1" --bus-address "$2" >/dev/null"#, try Executables.sibling("wormholectl"),
                name, address.rawValue,
            ],
            environment: ["XDG_RUNTIME_DIR": runtime, "WORMHOLE_DOORBELL": ""])
        try child.waitForReady()
        return child
    }

    /// The durations `child` printed (`parse` turns a line into a value and its count), once it
    /// exited 0; exactly `count` of them.
    static func histogram(
        _ child: ChildProcess, _ what: String, count: Int, parse: (String) -> (UInt64, UInt64)?
    ) throws -> Histogram<UInt64> {
        let output = try child.readAllOutput()
        guard child.waitForExit() == 0 else { throw BenchFailure("\(what) failed") }
        var histogram = BenchRow.makeHistogram()
        for line in output {
            if let (value, times) = parse(line) { histogram.record(value, count: times) }
        }
        guard histogram.totalCount == UInt64(count) else {
            throw BenchFailure("\(what) reported \(histogram.totalCount) of \(count) posts")
        }
        return histogram
    }
}

// SPDX-License-Identifier: Apache-2.0
import Glibc
import Histogram
import Wormhole
import WormholeDBus

/// One post, many observers: `--fanout-observers` `wormholectl observe` processes on one name
/// against as many `wormhole-floor observe` (C, libdbus), in alternating rounds. This process
/// posts and times until every observer's line for that post is read from its pipe: the time
/// until the last one is woken (the lines are read in the order the observers were started;
/// a line already in its pipe costs one `read`), and until the first line is in any pipe (one
/// `poll` over them all): with more observers than cores, the first line measures how much CPU
/// a wake costs the observers that ran before it.
struct FanoutSuite: BenchSuite {
    let context: BenchContext

    func run() throws {
        let observers = options.fanoutObservers
        let perRound = max(1, options.fanoutPosts)
        let warm = min(options.warmup, max(1, perRound / 10))
        let wormhole = try Executables.sibling("wormholectl")
        let floor = try Executables.sibling("wormhole-floor")
        let poster = try DarwinNotificationCenter(busAddress: address)
        let name = try NotificationName(BenchNames().name("fanout"))
        var next: UInt64 = 1

        /// One round: `observers` fresh children, every one ready, then the timed posts; the
        /// times until the last line and until the first.
        func round(_ executable: String, _ arguments: [String]) throws -> (
            last: Histogram<UInt64>, first: Histogram<UInt64>
        ) {
            var children: [ChildProcess] = []
            defer { for child in children { child.terminate() } }
            for _ in 0..<observers { children.append(try ChildProcess(executable: executable, arguments: arguments)) }
            for child in children { try child.waitForReady() }
            var histogram = BenchRow.makeHistogram()
            var firstLines = BenchRow.makeHistogram()
            var pipes = children.map { pollfd(fd: $0.output.fd, events: Int16(POLLIN), revents: 0) }
            for index in 0..<(warm + perRound) {
                let state = next
                next += 1
                let expected = Array("{\"name\":\"\(name.rawValue)\",\"state\":\(state),\"reason\":\"posted\"}".utf8)
                let start = MonotonicClock.now()
                try poster.post(name, state: state)
                // Each pipe is empty before the post (every line of the one before was read).
                guard poll(&pipes, nfds_t(pipes.count), 60_000) > 0 else {
                    throw BenchFailure("no observer printed a line within 60 s")
                }
                let first = MonotonicClock.now() - start
                for child in children {
                    guard let line = try child.output.readLine(timeoutSeconds: 60) else {
                        throw BenchFailure("\(child.name) closed its output (exit status \(child.waitForExit()))")
                    }
                    guard line.elementsEqual(expected) else {
                        throw BenchFailure(
                            "\(child.name) printed \(String(decoding: line, as: UTF8.self)) where "
                                + "\(String(decoding: expected, as: UTF8.self)) was expected")
                    }
                }
                let elapsed = MonotonicClock.now() - start
                if index >= warm {
                    histogram.record(elapsed)
                    firstLines.record(first)
                }
            }
            return (histogram, firstLines)
        }

        Console.output(
            "\nfan-out: one post, \(observers) observer processes on its name; from the post until the first "
                + "observer's line is in its pipe and until the last one's is read (one-way, not halved); \(perRound) posts per round, "
                + "\(options.fanoutRounds) rounds, fresh observers each round")
        Console.output(BenchRow.header)
        Console.progress("fanout: \(observers) x wormholectl observe against \(observers) x wormhole-floor observe")
        // The first lines, each side's rounds merged (the last lines are what the rounds return).
        var firstLines = [BenchRow.makeHistogram(), BenchRow.makeHistogram()]
        let merged = try AlternatingRounds(label: "fanout", rounds: options.fanoutRounds).measure([
            .init(name: "floor") {
                let times = try round(floor, ["observe", address.rawValue, name.rawValue])
                firstLines[0].add(times.first)
                return times.last
            },
            .init(name: "wormhole") {
                let times = try round(wormhole, ["observe", name.rawValue, "--bus-address", address.rawValue])
                firstLines[1].add(times.first)
                return times.last
            },
        ])
        for (which, histograms, target) in [("last", merged, 1.3), ("first", firstLines, 1.5)] {
            let floorRow = BenchRow(
                label: "\(observers) x wormhole-floor observe, \(which) woken", histogram: histograms[0],
                isRoundTrip: false)
            let ours = BenchRow(
                label: "\(observers) x wormhole observe, \(which) woken", histogram: histograms[1], isRoundTrip: false)
            report.publishPair(
                floorRow, ours, target: target, suite: "fanout",
                goal: "\(observers) observers, \(which) woken p50 / floor p50", namingFloor: true)
        }
    }
}

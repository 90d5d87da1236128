// SPDX-License-Identifier: Apache-2.0
import Histogram
import Wormhole

/// A post seen from outside, as another program sees it (issue 36): a poster in a process of its
/// own posts a name and times until the observer's line for it is read from the observer's
/// standard output, a pipe, then waits `--spacing-us`, untimed. Ours: `center.post` (the library)
/// to `wormholectl observe`, both with the doorbell on in one runtime directory; the floor:
/// `wormhole-floor post-line` (send and flush) to `wormhole-floor observe`, C to C on the bus.
/// Fresh processes each round, in alternating rounds.
struct PostLineRows: BenchSuite {
    let context: BenchContext

    func run() throws {
        let count = perRound
        let (warmup, spacing) = (options.warmup, options.spacingUs)
        let floor = try Executables.sibling("wormhole-floor")
        let names = BenchNames()
        Console.output(
            "\npost to line: from the post until the observer's line is read from its pipe, one way, "
                + "\(spacing) µs apart (µs)")
        Console.output(BenchRow.header)
        Console.progress("notify: a post until the observer's line, C to C and library to wormholectl observe")
        let merged = try AlternatingRounds(label: "post to line", rounds: options.rounds).measure([
            .init(name: "floor") {
                let name = names.name("line.floor")
                let observer = try ChildProcess(executable: floor, arguments: ["observe", address.rawValue, name])
                defer { observer.terminate() }
                try observer.waitForReady()
                let poster = try ChildProcess(
                    executable: floor,
                    arguments: ["post-line", address.rawValue, name, "\(count)", "\(warmup)", "\(spacing)"],
                    standardInput: observer.output.fd)
                return try RateSuite.histogram(poster, "wormhole-floor post-line", count: count) { line in
                    UInt64(line).map { ($0, 1) }
                }
            },
            .init(name: "wormhole") {
                let name = names.name("line.wormhole")
                let runtime = try ScratchDirectory("post-line")
                // The bench turned the doorbell off for itself and its helpers; on for these ("" unsets).
                let environment = ["XDG_RUNTIME_DIR": runtime.path, "WORMHOLE_DOORBELL": ""]
                let observer = try ChildProcess(
                    executable: try Executables.sibling("wormholectl"),
                    arguments: ["observe", name, "--bus-address", address.rawValue], environment: environment)
                defer {
                    observer.terminate()
                    withExtendedLifetime(runtime) {}
                }
                try observer.waitForReady()
                let poster = try ChildProcess(
                    executable: Executables.current,
                    arguments: [
                        "_bench-post-call", "--until-line", "--name", name, "--count", "\(count)", "--warmup",
                        "\(warmup)", "--spacing-us", "\(spacing)", "--bus-address", address.rawValue,
                    ],
                    environment: environment, standardInput: observer.output.fd)
                return try RateSuite.histogram(
                    poster, "_bench-post-call --until-line", count: count, parse: RecordedValueLines.parse)
            },
        ])
        let floorRow = BenchRow(label: "C post to C observe line", histogram: merged[0], isRoundTrip: false)
        let ours = BenchRow(
            label: "center.post to wormhole observe line, doorbell", histogram: merged[1], isRoundTrip: false)
        report.publishPair(
            floorRow, ours, target: 0.6, suite: "notify", goal: "post to observe line, doorbell, p50 / C to C p50",
            namingFloor: true)
    }
}

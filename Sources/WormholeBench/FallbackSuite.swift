// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Listening without a bus (issue 8, "No-bus fallback"): 100-B raw messages between two
/// processes woken through the directory watch (inotify, no bus reachable; each send's post
/// fails fast), against the C floor of the same file ping-pong woken by inotify, and against
/// the same messages on the bus and the bus floor, in the same rounds.
struct FallbackSuite: BenchSuite {
    let context: BenchContext

    /// The target of the directory path against its inotify floor (p50): issue 23's, for tmpfs
    /// (run with `TMPDIR=/dev/shm` to measure there; the scratch directory is made in `$TMPDIR`).
    static let target = 1.2

    func run() throws {
        let size = 100
        let label = MessageSuite.sizeLabel(size)
        Console.output(
            "\nlistening without a bus: \(label) raw messages woken by inotify on the directory, one process each side")
        Console.output(BenchRow.header)
        Console.progress("fallback: \(label)")
        let work = try ScratchDirectory("fallback")
        let floorFiles = work.path + "/floor"
        try FileManager.default.createDirectory(atPath: floorFiles, withIntermediateDirectories: true)
        let directory = try MessageSession(
            address: address, root: work.path + "/containers", size: size, mode: .directory)
        let bus = try MessageSession(address: address, root: work.path + "/containers", size: size, mode: .raw)
        let (perRound, warm) = context.rounds(of: options.messageRoundTrips)
        let merged = try AlternatingRounds(label: "fallback", rounds: options.rounds).measure([
            .init(name: "inotify floor") {
                try FloorPingPong.runInotify(directory: floorFiles, size: size, count: perRound, warmup: warm)
            },
            .init(name: "directory") { try directory.run(count: perRound, warmup: warm) },
            .init(name: "bus floor") {
                try FloorPingPong.run(address, count: perRound, warmup: warm, files: (work.path, size))
            },
            .init(name: "bus") { try bus.run(count: perRound, warmup: warm) },
        ])
        directory.stop()
        bus.stop()
        withExtendedLifetime(work) {}
        let inotifyFloor = BenchRow(label: "floor, \(label) files + inotify", histogram: merged[0])
        let ours = BenchRow(label: "Wormhole, \(label) raw, no bus", histogram: merged[1])
        let busFloor = BenchRow(label: "floor, \(label) files + signal", histogram: merged[2])
        let onBus = BenchRow(label: "Wormhole, \(label) raw, on the bus", histogram: merged[3])
        report.publish(
            [
                (inotifyFloor, nil, nil), (ours, inotifyFloor, Self.target), (busFloor, nil, nil),
                (onBus, busFloor, nil),
            ],
            suite: "fallback")
        report.goal(
            "fallback", "no bus \(label) p50 / inotify floor p50", ratio: ours.median / inotifyFloor.median,
            target: Self.target)
        report.goal("fallback", "no bus \(label) p50 / on the bus p50", ratio: ours.median / onBus.median, target: nil)
        report.goal(
            "fallback", "inotify floor p50 / signal floor p50", ratio: inotifyFloor.median / busFloor.median,
            target: nil)
    }
}

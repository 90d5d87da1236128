// SPDX-License-Identifier: Apache-2.0
import WormholeDBus

/// Notifications between two processes: the floor's ping-pong against ours with handlers on
/// the I/O thread and on a queue, then floor and ours again while another process observes
/// many other names.
struct NotifySuite: BenchSuite {
    let context: BenchContext

    func run() throws {
        Console.output("\nnotifications: \(options.roundTrips) round trips per row")
        Console.output(BenchRow.header)
        Console.progress(
            "notify: floor, center with handlers on the I/O thread, center with handlers on a queue, doorbell")
        let runtime = try ScratchDirectory("doorbell")
        let (floor, ours, queued, rung) = try {
            let onThread = try NotifySession(address: address, delivery: .ioThread)
            let onQueue = try NotifySession(address: address, delivery: .serial)
            let merged = try AlternatingRounds(label: "notify", rounds: options.rounds).measure([
                .init(name: "floor") { try FloorPingPong.run(address, count: perRound, warmup: options.warmup) },
                .init(name: "center") { try onThread.run(count: perRound, warmup: options.warmup) },
                .init(name: "queue") { try onQueue.run(count: perRound, warmup: options.warmup) },
                .init(name: "doorbell") {
                    try DoorbellPingPong.run(address, runtime: runtime.path, count: perRound, warmup: options.warmup)
                },
            ])
            return (
                BenchRow(label: "raw libdbus floor", histogram: merged[0]),
                BenchRow(label: "DarwinNotificationCenter", histogram: merged[1]),
                BenchRow(label: "center, handlers on a queue", histogram: merged[2]),
                BenchRow(label: "center processes, doorbell", histogram: merged[3])
            )
        }()
        report.publish(
            [(floor, nil, nil), (ours, floor, 1.15), (queued, floor, 1.25), (rung, floor, 0.5)], suite: "notify")
        report.goal("notify", "center (I/O thread) p50 / floor p50", ratio: ours.median / floor.median, target: 1.15)
        report.goal(
            "notify", "center (handler on a queue) p50 / floor p50", ratio: queued.median / floor.median, target: 1.25)
        // The doorbell: Wormhole process to Wormhole process, rung beside the bus signal.
        report.goal("notify", "doorbell p50 / floor p50", ratio: rung.median / floor.median, target: 0.5)
        report.goal(
            "notify", "doorbell p99 / floor p99", ratio: rung.percentile(99) / floor.percentile(99), target: 0.7)
        try runSpaced(runtime: runtime.path)
        // Spaced too: `--spacing-us 0` leaves them out with the spaced rows.
        if options.spacingUs > 0 { try PostLineRows(context: context).run() }

        guard options.otherNames > 0 else { return }
        Console.progress("notify: a third process observes \(options.otherNames) other names")
        let load = try ChildProcess(
            executable: Executables.current,
            arguments: [
                "_bench-load", "--names", "\(options.otherNames)", "--bus-address", address.rawValue,
            ])
        defer { load.terminate() }
        try load.waitForReady()
        let session = try NotifySession(address: address, delivery: .ioThread)
        let merged = try AlternatingRounds(label: "notify, loaded bus", rounds: options.rounds).measure([
            .init(name: "floor") { try FloorPingPong.run(address, count: perRound, warmup: options.warmup) },
            .init(name: "center") { try session.run(count: perRound, warmup: options.warmup) },
        ])
        let loadedFloor = BenchRow(label: "floor, \(options.otherNames) other names", histogram: merged[0])
        let loaded = BenchRow(label: "center, \(options.otherNames) other names", histogram: merged[1])
        report.publish([(loadedFloor, nil, nil), (loaded, loadedFloor, nil)], suite: "notify")
        report.goal(
            "notify", "center, \(options.otherNames) other names p50 / empty bus p50",
            ratio: loaded.median / ours.median,
            target: 1.20)
    }

    /// The floor and the doorbell again, one way with each ping sent `--spacing-us` after the
    /// previous pong: what a round leaves behind (the doorbell's bus signal, routed by the daemon
    /// and dropped by the observer) is done before the next round is timed, for both alike. The
    /// back-to-back rows above charge that work to the next round on a busy machine.
    private func runSpaced(runtime: String) throws {
        guard options.spacingUs > 0 else { return }
        Console.progress("notify: floor and doorbell, spaced \(options.spacingUs) us")
        let merged = try AlternatingRounds(label: "notify, spaced", rounds: options.rounds).measure([
            .init(name: "floor") {
                try FloorPingPong.run(
                    address, count: perRound, warmup: options.warmup, spacingMicroseconds: options.spacingUs)
            },
            .init(name: "doorbell") {
                try DoorbellPingPong.run(
                    address, runtime: runtime, count: perRound, warmup: options.warmup,
                    spacingMicroseconds: options.spacingUs)
            },
        ])
        let floor = BenchRow(label: "raw libdbus floor, spaced", histogram: merged[0])
        let rung = BenchRow(label: "center processes, doorbell, spaced", histogram: merged[1])
        report.publishPair(floor, rung, target: 0.5, suite: "notify", goal: "doorbell spaced p50 / floor spaced p50")
        report.goal(
            "notify", "doorbell spaced p99 / floor spaced p99", ratio: rung.percentile(99) / floor.percentile(99),
            target: 0.7)
    }
}

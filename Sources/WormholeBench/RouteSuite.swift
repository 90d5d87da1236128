// SPDX-License-Identifier: Apache-2.0
import WormholeDBus

/// The cost of the route table: the same ping-pong while the pinging process's connection
/// holds 1 route and while it holds many more (observers of other names, no-op handlers).
/// Both sessions live through every round, so the daemon's rule load is the same for both.
struct RouteSuite: BenchSuite {
    let context: BenchContext

    func run() throws {
        Console.output("\nroute table: \(options.roundTrips) round trips per row, one-way µs (round trip / 2)")
        Console.output(BenchRow.header)
        let single = try NotifySession(address: address, delivery: .ioThread)
        Console.progress("routes: the second pinging center observes \(options.routes) other names")
        let crowded = try NotifySession(address: address, delivery: .ioThread, extraRoutes: options.routes)
        let merged = try AlternatingRounds(label: "routes", rounds: options.rounds).measure([
            .init(name: "1 route") { try single.run(count: perRound, warmup: options.warmup) },
            .init(name: "many routes") { try crowded.run(count: perRound, warmup: options.warmup) },
        ])
        let one = BenchRow(label: "center, 1 route", histogram: merged[0])
        let many = BenchRow(label: "center, \(options.routes) extra routes", histogram: merged[1])
        report.publishPair(
            one, many, target: 1.10, suite: "routes", goal: "\(options.routes) extra routes p50 / 1 route p50")
        try StartupRow(context: context).run()
    }
}

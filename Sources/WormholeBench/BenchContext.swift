// SPDX-License-Identifier: Apache-2.0
import WormholeDBus

/// What every suite of one run shares: the bus, the options and the report.
struct BenchContext {
    var address: BusAddress
    var options: BenchCommand
    var report: BenchReport

    /// Measured round trips (or posts timed) per round of a latency row.
    var perRound: Int { rounds(of: options.roundTrips).perRound }

    /// A row of `roundTrips` measured round trips in all: how many each of the alternating
    /// rounds measures, and how many go unmeasured before them.
    func rounds(of roundTrips: Int) -> (perRound: Int, warm: Int) {
        let perRound = max(1, roundTrips / options.rounds)
        return (perRound, min(options.warmup, perRound))
    }
}

/// A suite (or a row of one) of the bench: what it measures with, read from its context.
protocol BenchSuite {
    var context: BenchContext { get }
}

extension BenchSuite {
    var address: BusAddress { context.address }
    var options: BenchCommand { context.options }
    var report: BenchReport { context.report }
    var perRound: Int { context.perRound }
}

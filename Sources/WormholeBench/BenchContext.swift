// SPDX-License-Identifier: Apache-2.0
import WormholeDBus

/// What every suite of one run shares: the bus, the options and the report.
struct BenchContext {
    var address: BusAddress
    var options: BenchCommand
    var report: BenchReport

    /// Measured round trips (or posts timed) per round of a latency row.
    var perRound: Int { max(1, options.roundTrips / options.rounds) }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation

/// One post-rate row: one sample per round, each with two rates (see ``PostRate``).
struct RateRow {
    /// One round: how many posts, and nanoseconds until flushed and until the loop ended.
    struct Sample {
        var posts: Int
        var flushed: UInt64
        var loop: UInt64

        /// Posts per second until every post was written to the socket.
        var rate: Double { Double(posts) / (Double(flushed) / 1e9) }
        /// Posts per second of the posting loop alone.
        var loopRate: Double { Double(posts) / (Double(loop) / 1e9) }
    }

    var label: String
    /// Posts per round.
    var posts: Int
    var samples: [Sample] = []

    static let header = "scenario                             posts/s flushed      min      max   loop only   vs floor"

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// The median rate until flushed.
    var median: Double { Self.median(samples.map(\.rate)) }
    /// The median rate of the loop alone.
    var loopMedian: Double { Self.median(samples.map(\.loopRate)) }

    func line(against floor: RateRow?) -> String {
        let ratio = floor.map { String(format: "%8.3fx", median / $0.median) } ?? "       -"
        let rates = samples.map(\.rate)
        return label.padding(toLength: 34, withPad: " ", startingAt: 0)
            + String(format: " %17.0f %8.0f %8.0f %11.0f ", median, rates.min() ?? 0, rates.max() ?? 0, loopMedian)
            + ratio
    }
}

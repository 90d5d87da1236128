// SPDX-License-Identifier: Apache-2.0
import Foundation
import Histogram

/// One measured latency row. Samples are nanoseconds: round trips (reported halved, as
/// one-way latency) or one-way intervals (the CLI rows: post to line read).
struct BenchRow {
    var label: String
    var histogram: Histogram<UInt64>
    /// Whether the samples are round trips, reported halved.
    var isRoundTrip: Bool

    init(label: String, histogram: Histogram<UInt64> = BenchRow.makeHistogram(), isRoundTrip: Bool = true) {
        self.label = label
        self.histogram = histogram
        self.isRoundTrip = isRoundTrip
    }

    static func makeHistogram() -> Histogram<UInt64> {
        Histogram<UInt64>(
            lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
    }

    static let header = "scenario                              median      p99    p99.9      max   vs floor"

    private func microseconds(_ nanoseconds: UInt64) -> Double {
        Double(nanoseconds) / (isRoundTrip ? 2_000 : 1_000)
    }

    /// The one-way latency at `percentile`, in microseconds.
    func percentile(_ percentile: Double) -> Double { microseconds(histogram.valueAtPercentile(percentile)) }

    var median: Double { percentile(50) }
    var maximum: Double { microseconds(histogram.max) }
    var count: Int { Int(histogram.totalCount) }

    func line(against floor: BenchRow?) -> String {
        let ratio = floor.map { String(format: "%8.3fx", median / $0.median) } ?? "       -"
        return label.padding(toLength: 34, withPad: " ", startingAt: 0)
            + String(format: " %9.1f %8.1f %8.1f %8.1f ", median, percentile(99), percentile(99.9), maximum)
            + ratio
    }
}

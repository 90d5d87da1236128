import Foundation

/// One post-rate row: posts per second, one sample per round.
struct RateRow {
    var label: String
    /// Posts per round.
    var posts: Int
    var samples: [Double] = []

    static let header = "scenario                               posts/s (median)        min        max   vs floor"

    var median: Double {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    func line(against floor: RateRow?) -> String {
        let ratio = floor.map { String(format: "%8.3fx", median / $0.median) } ?? "       -"
        return label.padding(toLength: 34, withPad: " ", startingAt: 0)
            + String(format: " %17.0f %10.0f %10.0f ", median, samples.min() ?? 0, samples.max() ?? 0)
            + ratio
    }
}

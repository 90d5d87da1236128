// SPDX-License-Identifier: Apache-2.0
import Histogram

/// Runs several sides of one comparison in the same run: every round runs each side once,
/// and who goes first rotates, so drift on a noisy machine hits every side alike.
struct AlternatingRounds {
    /// One side: its name (for progress lines) and one round of it.
    struct Side {
        var name: String
        var run: () throws -> Histogram<UInt64>
    }

    var label: String
    var rounds: Int

    /// Each side's rounds merged, in the order of `sides`.
    func measure(_ sides: [Side]) throws -> [Histogram<UInt64>] {
        var merged = sides.map { _ in BenchRow.makeHistogram() }
        for round in 0..<rounds {
            Console.progress("  \(label): round \(round + 1)/\(rounds)")
            for step in 0..<sides.count {
                let index = (round + step) % sides.count
                merged[index].add(try sides[index].run())
            }
        }
        return merged
    }
}

import Foundation

/// Everything one bench run measured: every row (for `--json`) and every goal (for the summary).
final class BenchReport {
    /// One row as `--json` writes it. Latencies are one-way microseconds; rate rows carry
    /// `postsPerSecond` (until flushed) and `postsPerSecondLoop` (the loop alone), medians of
    /// their rounds, and no latencies.
    struct Record: Encodable {
        var suite: String
        var label: String
        var count: Int
        var p50: Double?
        var p90: Double?
        var p99: Double?
        var p999: Double?
        var max: Double?
        var postsPerSecond: Double?
        /// Rate rows: posts per second of the posting loop alone (before the flush).
        var postsPerSecondLoop: Double?
        /// This row against its reference row (the floor, or the 1-route row), by median.
        var ratio: Double?
        /// The goal for `ratio` (at most this), or on a figure row for `value` (see `atLeast`);
        /// `nil` when the row has none.
        var target: Double?
        /// Figure rows (the defaults suite: counts, costs, rates): the figure and its unit.
        var value: Double?
        var unit: String?
        /// Figure rows: whether `target` is a minimum (a rate) rather than a maximum.
        var atLeast: Bool?

        enum CodingKeys: String, CodingKey {
            case suite, label, count, p50, p90, p99
            case p999 = "p99.9"
            case max, postsPerSecond, postsPerSecondLoop, ratio, target, value, unit, atLeast
        }

        func encode(to encoder: any Encoder) throws {
            // Every key is written (null when absent) so plotting scripts see one shape.
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(suite, forKey: .suite)
            try container.encode(label, forKey: .label)
            try container.encode(count, forKey: .count)
            try container.encode(p50, forKey: .p50)
            try container.encode(p90, forKey: .p90)
            try container.encode(p99, forKey: .p99)
            try container.encode(p999, forKey: .p999)
            try container.encode(max, forKey: .max)
            try container.encode(postsPerSecond, forKey: .postsPerSecond)
            try container.encode(postsPerSecondLoop, forKey: .postsPerSecondLoop)
            try container.encode(ratio, forKey: .ratio)
            try container.encode(target, forKey: .target)
            try container.encode(value, forKey: .value)
            try container.encode(unit, forKey: .unit)
            try container.encode(atLeast, forKey: .atLeast)
        }
    }

    /// A ratio with its goal, for the summary.
    struct Goal {
        var suite: String
        var what: String
        var ratio: Double
        /// At most this to pass (at least, with `atLeast`); `nil` for a figure recorded as a baseline.
        var target: Double?
        var atLeast = false

        var mark: String {
            guard let target else { return "baseline" }
            return (atLeast ? ratio >= target : ratio <= target) ? "PASS" : "MISS"
        }
    }

    private(set) var records: [Record] = []
    private(set) var goals: [Goal] = []

    /// Records a latency row; `reference` is what its ratio is taken against.
    func add(_ row: BenchRow, suite: String, against reference: BenchRow? = nil, target: Double? = nil) {
        records.append(
            Record(
                suite: suite, label: row.label, count: row.count, p50: row.median, p90: row.percentile(90),
                p99: row.percentile(99), p999: row.percentile(99.9), max: row.maximum,
                ratio: reference.map { row.median / $0.median }, target: target))
    }

    /// Records a rate row.
    func add(_ row: RateRow, suite: String, against floor: RateRow? = nil) {
        records.append(
            Record(
                suite: suite, label: row.label, count: row.posts * row.samples.count, postsPerSecond: row.median,
                postsPerSecondLoop: row.loopMedian, ratio: floor.map { row.median / $0.median }))
    }

    /// Records a goal and prints its line under the suite's table.
    func goal(_ suite: String, _ what: String, ratio: Double, target: Double?, atLeast: Bool = false) {
        let goal = Goal(suite: suite, what: what, ratio: ratio, target: target, atLeast: atLeast)
        goals.append(goal)
        Console.output(Self.line(goal))
    }

    /// Records a figure that is not a ratio (a count, a cost, a rate) as a row for `--json` and as
    /// a goal for the summary: `value` must be at most `target` (at least, with `atLeast`).
    func figure(
        _ suite: String, _ what: String, value: Double, unit: String, count: Int, target: Double?,
        atLeast: Bool = false
    ) {
        records.append(
            Record(
                suite: suite, label: what, count: count, target: target, value: value, unit: unit,
                atLeast: target == nil ? nil : atLeast))
        goal(suite, unit == "count" ? what : "\(what) (\(unit))", ratio: value, target: target, atLeast: atLeast)
    }

    /// Ratios and small figures with three decimals, counts and rates whole.
    private static func number(_ value: Double) -> String {
        value.magnitude >= 1_000 || value == value.rounded()
            ? String(format: "%.0f", value) : String(format: "%.3f", value)
    }

    private static func line(_ goal: Goal) -> String {
        let target = goal.target.map { (goal.atLeast ? ">= " : "<= ") + number($0) } ?? "(no target)"
        return goal.what.padding(toLength: 52, withPad: " ", startingAt: 0)
            + " " + String(repeating: " ", count: max(0, 7 - number(goal.ratio).count)) + number(goal.ratio) + "  "
            + target.padding(toLength: 12, withPad: " ", startingAt: 0) + goal.mark
    }

    /// The final block: every goal with its ratio and PASS/MISS.
    func printSummary() {
        guard !goals.isEmpty else { return }
        let passed = goals.filter { $0.mark == "PASS" }.count
        let missed = goals.filter { $0.mark == "MISS" }.count
        Console.output(
            "\nsummary: \(passed) PASS, \(missed) MISS (ratios of medians unless named; one run, alternating rounds)")
        for goal in goals {
            Console.output(
                "  " + "[\(goal.suite)]".padding(toLength: 11, withPad: " ", startingAt: 0) + Self.line(goal))
        }
    }

    /// Writes every row as a JSON document to `path`.
    func writeJSON(to path: String, context: [String: String]) throws {
        struct Document: Encodable {
            var context: [String: String]
            var rows: [Record]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(Document(context: context, rows: records))
        do {
            try data.write(to: URL(fileURLWithPath: path))
        } catch {
            throw BenchFailure("cannot write --json \(path): \(error.localizedDescription)")
        }
    }
}

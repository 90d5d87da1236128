// SPDX-License-Identifier: Apache-2.0
import Foundation
import Histogram

/// Everything one bench run measured: every row (for `--json`) and every goal (for the summary).
final class BenchReport {
    /// One row as `--json` writes it. Latencies are one-way microseconds; rate rows carry
    /// `postsPerSecond` (until flushed) and `postsPerSecondLoop` (the loop alone), medians of
    /// their rounds, and no latencies.
    struct Record: Encodable {
        /// A name for the row that stays the same from run to run with the same options (the
        /// suite and label, lower-case, dashes between words; `-2`… when a label repeats), for
        /// scripts comparing runs (`Tests/bench-compare.sh`).
        var id = ""
        /// `latency` (value: p50 µs), `rate` (value: posts/s), `figure` (a count, cost or rate)
        /// or `goal` (value: a ratio from the summary).
        var kind = "figure"
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
        /// The `id` of the row `ratio` is taken against (the floor), when there is one.
        var floor: String?

        /// `PASS` or `MISS` against `target` (`ratio` for latency rows, `value` otherwise); `nil`
        /// without a target.
        var status: String? {
            guard let target else { return nil }
            guard let measured = kind == "latency" ? ratio : value else { return nil }
            return (atLeast == true ? measured >= target : measured <= target) ? "PASS" : "MISS"
        }

        enum CodingKeys: String, CodingKey {
            case id, kind, suite, label, count, p50, p90, p99
            case p999 = "p99.9"
            case max, postsPerSecond, postsPerSecondLoop, ratio, target, value, unit, atLeast, floor, status
        }

        func encode(to encoder: any Encoder) throws {
            // Every key is written (null when absent) so plotting scripts see one shape.
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(kind, forKey: .kind)
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
            try container.encode(floor, forKey: .floor)
            try container.encode(status, forKey: .status)
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

    /// A latency row with its histogram and the row its ratio is taken against (for
    /// `--percentiles` and `--plot`).
    struct LatencyRow {
        var suite: String
        var row: BenchRow
        var reference: BenchRow?
    }

    private(set) var records: [Record] = []
    private(set) var goals: [Goal] = []
    /// The summary's ratios that are not rows of their own (every goal but the figures'), as
    /// `--json` writes them after the rows.
    private(set) var goalRecords: [Record] = []
    private var ids = Set<String>()
    private(set) var latencyRows: [LatencyRow] = []
    /// When the last row was recorded, for the progress line of the next one.
    private var lastRow = MonotonicClock.now()

    /// Records a latency row; `reference` is what its ratio is taken against.
    func add(_ row: BenchRow, suite: String, against reference: BenchRow? = nil, target: Double? = nil) {
        append(
            Record(
                kind: "latency", suite: suite, label: row.label, count: row.count, p50: row.median,
                p90: row.percentile(90), p99: row.percentile(99), p999: row.percentile(99.9), max: row.maximum,
                ratio: reference.map { row.median / $0.median }, target: target, value: row.median, unit: "us",
                floor: reference.flatMap { id(of: $0.label, suite: suite) }))
        latencyRows.append(LatencyRow(suite: suite, row: row, reference: reference))
        progress(
            suite, row.label,
            String(format: "p50 %.1f µs, p99 %.1f µs", row.median, row.percentile(99))
                + (reference.map { String(format: ", %.3fx the reference", row.median / $0.median) } ?? ""))
    }

    /// Records a rate row.
    func add(_ row: RateRow, suite: String, against floor: RateRow? = nil) {
        append(
            Record(
                kind: "rate", suite: suite, label: row.label, count: row.posts * row.samples.count,
                postsPerSecond: row.median, postsPerSecondLoop: row.loopMedian,
                ratio: floor.map { row.median / $0.median },
                value: row.median, unit: "posts/s", floor: floor.flatMap { id(of: $0.label, suite: suite) }))
        progress(
            suite, row.label,
            String(format: "%.0f posts/s", row.median)
                + (floor.map { String(format: ", %.3fx", row.median / $0.median) } ?? ""))
    }

    /// One progress line (standard error) per finished row, with the time since the previous one,
    /// so a long run shows where it is between its tables.
    private func progress(_ suite: String, _ label: String, _ figures: String) {
        let now = MonotonicClock.now()
        let seconds = Double(now - lastRow) / 1e9
        lastRow = now
        // Rows measured together (alternating rounds) finish together: the time is on the first.
        let time = seconds >= 0.1 ? String(format: " (%.1f s)", seconds) : ""
        Console.progress("  [\(suite)] row done: \(label): \(figures)\(time)")
    }

    /// Records a row, giving it its `id`.
    private func append(_ record: Record) {
        var record = record
        let base = Self.fileName(suite: record.suite, label: record.label)
        var id = base
        var suffix = 2
        while ids.contains(id) {
            id = "\(base)-\(suffix)"
            suffix += 1
        }
        ids.insert(id)
        record.id = id
        if record.kind == "goal" { goalRecords.append(record) } else { records.append(record) }
    }

    /// The `id` of the last row labelled `label` in `suite`.
    private func id(of label: String, suite: String) -> String? {
        records.last { $0.suite == suite && $0.label == label }?.id
    }

    /// Records a goal and prints its line under the suite's table; `floor`: the label of the row
    /// the ratio is taken against, when it is one row's (for `--json`).
    func goal(
        _ suite: String, _ what: String, ratio: Double, target: Double?, atLeast: Bool = false, floor: String? = nil
    ) {
        append(
            Record(
                kind: "goal", suite: suite, label: what, count: 0, ratio: ratio, target: target, value: ratio,
                unit: "x",
                atLeast: target == nil ? nil : atLeast, floor: floor.flatMap { id(of: $0, suite: suite) }))
        summarise(Goal(suite: suite, what: what, ratio: ratio, target: target, atLeast: atLeast))
    }

    private func summarise(_ goal: Goal) {
        goals.append(goal)
        Console.output(Self.line(goal))
    }

    /// Records a figure that is not a ratio (a count, a cost, a rate) as a row for `--json` and as
    /// a goal for the summary: `value` must be at most `target` (at least, with `atLeast`).
    func figure(
        _ suite: String, _ what: String, value: Double, unit: String, count: Int, target: Double?,
        atLeast: Bool = false
    ) {
        append(
            Record(
                suite: suite, label: what, count: count, target: target, value: value, unit: unit,
                atLeast: target == nil ? nil : atLeast))
        progress(suite, what, "\(Self.number(value)) \(unit)")
        summarise(
            Goal(
                suite: suite, what: unit == "count" ? what : "\(what) (\(unit))", ratio: value, target: target,
                atLeast: atLeast))
    }

    /// Ratios and small figures with three decimals, counts and rates whole.
    static func number(_ value: Double) -> String {
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

    /// Writes every row, then every goal of the summary that is not a row, as a JSON document
    /// to `path`, with the machine's description (docs/performance.md, *Comparing runs*).
    func writeJSON(to path: String, context: [String: String], machine: MachineDescription) throws {
        struct Document: Encodable {
            var format = 2
            var machine: MachineDescription
            var context: [String: String]
            var rows: [Record]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let document = Document(machine: machine, context: context, rows: records + goalRecords)
        try Self.write(try encoder.encode(document), to: path, option: "--json")
    }

    /// The columns of `--csv`, in order (the keys of `--json`'s rows).
    static let csvColumns = [
        "suite", "label", "count", "p50", "p90", "p99", "p99.9", "max", "postsPerSecond", "postsPerSecondLoop",
        "ratio", "target", "value", "unit", "atLeast",
    ]

    /// Every row as CSV (RFC 4180: a header line, fields quoted when they hold a comma, a quote or
    /// a line break; empty where `--json` writes null).
    func csv() -> String {
        func field(_ text: String) -> String {
            text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
        }
        func number(_ value: Double?) -> String { value.map { String($0) } ?? "" }
        var lines = [Self.csvColumns.joined(separator: ",")]
        for record in records {
            let fields: [String] = [
                field(record.suite), field(record.label), String(record.count), number(record.p50), number(record.p90),
                number(record.p99), number(record.p999), number(record.max), number(record.postsPerSecond),
                number(record.postsPerSecondLoop), number(record.ratio), number(record.target), number(record.value),
                field(record.unit ?? ""), record.atLeast.map { String($0) } ?? "",
            ]
            lines.append(fields.joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// Writes ``csv()`` to `path`.
    func writeCSV(to path: String) throws {
        try Self.write(Data(csv().utf8), to: path, option: "--csv")
    }

    /// A file name for `label` in `suite`: lower-case letters, digits and dashes.
    static func fileName(suite: String, label: String) -> String {
        var name = ""
        for scalar in "\(suite)-\(label)".lowercased().unicodeScalars {
            if scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar)) {
                name.unicodeScalars.append(scalar)
            } else if !name.hasSuffix("-") {
                name += "-"
            }
        }
        while name.hasSuffix("-") { name.removeLast() }
        return name
    }

    /// Writes each latency row's percentile distribution (HdrHistogram's text format, values in
    /// one-way microseconds) to `directory/<suite>-<label>.hgrm`; the names written, in order.
    @discardableResult
    func writePercentiles(to directory: String) throws -> [String] {
        var names: [String] = []
        for entry in latencyRows {
            var name = Self.fileName(suite: entry.suite, label: entry.row.label) + ".hgrm"
            var suffix = 2
            while names.contains(name) {
                name = Self.fileName(suite: entry.suite, label: entry.row.label) + "-\(suffix).hgrm"
                suffix += 1
            }
            names.append(name)
            var text = ""
            entry.row.histogram.outputPercentileDistribution(
                to: &text, outputValueUnitScalingRatio: entry.row.isRoundTrip ? 2_000 : 1_000)
            try Self.write(Data(text.utf8), to: directory + "/" + name, option: "--percentiles")
        }
        return names
    }

    static func write(_ data: Data, to path: String, option: String) throws {
        do {
            try data.write(to: URL(fileURLWithPath: path))
        } catch {
            throw BenchFailure("cannot write \(option) \(path): \(error.localizedDescription)")
        }
    }
}

extension BenchReport {
    /// Prints each row in order (with its ratio to the row it is measured against, if any) and
    /// adds it to the report under `suite`.
    func publish(_ rows: [(row: BenchRow, against: BenchRow?, target: Double?)], suite: String) {
        for (row, reference, _) in rows { Console.output(row.line(against: reference)) }
        for (row, reference, target) in rows { add(row, suite: suite, against: reference, target: target) }
    }

    /// A reference row and a row measured against it: both published (``publish(_:suite:)``),
    /// the second with `target`, then the goal `what` on their medians (row p50 / reference p50)
    /// with the same target; `namingFloor` links the goal to the reference row in the JSON report.
    func publishPair(
        _ reference: BenchRow, _ row: BenchRow, target: Double, suite: String, goal what: String,
        namingFloor: Bool = false
    ) {
        publish([(reference, nil, nil), (row, reference, target)], suite: suite)
        goal(
            suite, what, ratio: row.median / reference.median, target: target,
            floor: namingFloor ? reference.label : nil)
    }
}

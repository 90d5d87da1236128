// SPDX-License-Identifier: Apache-2.0
import Foundation

/// `--plot FILE.svg`: the latency distribution of every latency row on one chart, as
/// HdrHistogram's plots draw it: x is the percentile on a log scale of 1 / (1 - p) (0, 90, 99,
/// 99.9 %…), y the one-way latency in microseconds (log scale: the rows span 50 µs to 10 ms).
/// Each row and the row it is compared with (its floor) share a colour; the floor is dashed.
/// Hand-written SVG, no dependency.
struct BenchPlot {
    /// One line of the chart.
    struct Series {
        var label: String
        var colour: String
        var dashes: String?
        /// (log10 of 1 / (1 - p), microseconds), p rising.
        var points: [(x: Double, y: Double)]
    }

    static let palette = [
        "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    ]
    /// Dash patterns of the rows compared with one floor (the first solid), and of the floor.
    static let rowDashes: [String?] = [nil, "2 3", "9 3 2 3", "12 4"]
    static let floorDashes = "6 4"

    var title: String
    var series: [Series] = []

    /// The series of `rows`: each floor (a row others are compared with) once, dashed, in the
    /// colour of its group; rows with neither reference nor followers get a colour of their own.
    init(title: String, rows: [BenchReport.LatencyRow]) {
        self.title = title
        var groups: [String] = []  // group key: the reference's label, or the row's own
        var perGroup: [String: Int] = [:]
        var drawnFloors: Set<String> = []
        for entry in rows {
            let key = entry.suite + "/" + (entry.reference?.label ?? entry.row.label)
            if !groups.contains(key) { groups.append(key) }
            let colour = Self.palette[groups.firstIndex(of: key)! % Self.palette.count]
            if let reference = entry.reference, !drawnFloors.contains(key) {
                drawnFloors.insert(key)
                series.append(
                    Series(
                        label: reference.label, colour: colour, dashes: Self.floorDashes, points: Self.points(reference)
                    ))
            }
            // A floor recorded as a row of its own is drawn once, as the floor of its group.
            let isFloor = rows.contains { $0.suite == entry.suite && $0.reference?.label == entry.row.label }
            if isFloor {
                if !drawnFloors.contains(entry.suite + "/" + entry.row.label) {
                    drawnFloors.insert(entry.suite + "/" + entry.row.label)
                    series.append(
                        Series(
                            label: entry.row.label, colour: colour, dashes: Self.floorDashes,
                            points: Self.points(entry.row)))
                }
                continue
            }
            let index = perGroup[key, default: 0]
            perGroup[key] = index + 1
            series.append(
                Series(
                    label: entry.row.label, colour: colour, dashes: Self.rowDashes[index % Self.rowDashes.count],
                    points: Self.points(entry.row)))
        }
    }

    /// The row's latency at p = 1 - 10^-x for x from 0 to log10(count) in steps of 0.05, then its maximum.
    static func points(_ row: BenchRow) -> [(x: Double, y: Double)] {
        guard row.count > 0 else { return [] }
        let last = log10(Double(row.count))
        var points: [(x: Double, y: Double)] = []
        var x = 0.0
        while x < last {
            points.append((x, max(row.percentile(100 * (1 - pow(10, -x))), 0.001)))
            x += 0.05
        }
        points.append((last, max(row.maximum, 0.001)))
        return points
    }

    /// The chart as an SVG document.
    func svg() -> String {
        let width = 1000.0
        let height = max(560.0, 48 + Double(series.count) * 18 + 20)
        let (left, top, plotWidth, plotHeight) = (70.0, 40.0, 600.0, 460.0)
        let allPoints = series.flatMap(\.points)
        let maxX = max(1, (allPoints.map(\.x).max() ?? 1).rounded(.up))
        let lowY = log10(allPoints.map(\.y).min() ?? 1).rounded(.down)
        let highY = max(lowY + 1, log10(allPoints.map(\.y).max() ?? 10).rounded(.up))
        func px(_ x: Double) -> Double { left + x / maxX * plotWidth }
        func py(_ y: Double) -> Double { top + plotHeight - (log10(y) - lowY) / (highY - lowY) * plotHeight }
        func f(_ value: Double) -> String { String(format: "%.1f", value) }
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(f(left))" y="22" font-size="14" font-weight="bold">\(escaped(title))</text>

            """
        // Grid and ticks: percentiles on x, 1-2-5 steps per decade of microseconds on y.
        for tick in 0...Int(maxX) {
            let label =
                tick == 0
                ? "0%"
                : tick == 1 ? "90%" : "99" + (tick > 2 ? "." + String(repeating: "9", count: tick - 2) : "") + "%"
            let x = px(Double(tick))
            out +=
                "<line x1=\"\(f(x))\" y1=\"\(f(top))\" x2=\"\(f(x))\" y2=\"\(f(top + plotHeight))\" stroke=\"#ddd\"/>"
            out += "<text x=\"\(f(x))\" y=\"\(f(top + plotHeight + 16))\" text-anchor=\"middle\">\(label)</text>\n"
        }
        var decade = lowY
        while decade <= highY {
            for step in [1.0, 2, 5] where decade + log10(step) <= highY + 1e-9 {
                let value = step * pow(10, decade)
                let y = py(value)
                out +=
                    "<line x1=\"\(f(left))\" y1=\"\(f(y))\" x2=\"\(f(left + plotWidth))\" y2=\"\(f(y))\" stroke=\"\(step == 1 ? "#ccc" : "#eee")\"/>"
                out +=
                    "<text x=\"\(f(left - 6))\" y=\"\(f(y + 4))\" text-anchor=\"end\">\(BenchReport.number(value))</text>\n"
            }
            decade += 1
        }
        out +=
            "<rect x=\"\(f(left))\" y=\"\(f(top))\" width=\"\(f(plotWidth))\" height=\"\(f(plotHeight))\" fill=\"none\" stroke=\"#444\"/>\n"
        out +=
            "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(top + plotHeight + 36))\" text-anchor=\"middle\">percentile</text>\n"
        out +=
            "<text transform=\"translate(18 \(f(top + plotHeight / 2))) rotate(-90)\" text-anchor=\"middle\">one-way latency (µs, log scale)</text>\n"
        // The lines, then the legend.
        for line in series where !line.points.isEmpty {
            var path = ""
            var previous = ""
            for (index, point) in line.points.enumerated() {
                let next = "\(f(px(point.x))) \(f(py(point.y)))"
                if next == previous { continue }
                path += (index == 0 ? "M" : "L") + next
                previous = next
            }
            out +=
                "<path d=\"\(path)\" fill=\"none\" stroke=\"\(line.colour)\" stroke-width=\"1.6\""
                + (line.dashes.map { " stroke-dasharray=\"\($0)\"" } ?? "") + "/>\n"
        }
        for (index, line) in series.enumerated() {
            let y = top + 8 + Double(index) * 18
            let x = left + plotWidth + 16
            out +=
                "<line x1=\"\(f(x))\" y1=\"\(f(y))\" x2=\"\(f(x + 28))\" y2=\"\(f(y))\" stroke=\"\(line.colour)\" stroke-width=\"1.6\""
                + (line.dashes.map { " stroke-dasharray=\"\($0)\"" } ?? "") + "/>"
            out += "<text x=\"\(f(x + 34))\" y=\"\(f(y + 4))\">\(escaped(line.label))</text>\n"
        }
        return out + "</svg>\n"
    }
}

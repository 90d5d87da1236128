// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import Histogram
import Wormhole

/// What the timing helper processes `_bench-ping` and `_bench-post-call` share: how many timed
/// posts after how many untimed ones, and the center they post through (the doorbell on unless
/// `--wake` says otherwise).
struct TimedPostOptions: ParsableArguments {
    @Option var count: Int
    @Option var warmup: Int
    @Option var wake: LibraryAPI.Wake = .doorbell
    @OptionGroup var bus: BusOptions

    func center() throws -> DarwinNotificationCenter {
        try LibraryAPI.center(address: try bus.required(), wake: wake)
    }
}

/// The lines a timing helper prints and the bench reads back: one `NANOSECONDS COUNT` per
/// value its histogram recorded.
enum RecordedValueLines {
    /// Prints `histogram`'s recorded values on standard output.
    static func write(_ histogram: Histogram<UInt64>) {
        var lines = ""
        for value in histogram.recordedValues() { lines += "\(value.value) \(value.countAddedInThisIterationStep)\n" }
        FileHandle.standardOutput.write(Data(lines.utf8))
    }

    /// One line's value and how many times it was recorded; nil for a line of another form.
    static func parse(_ line: String) -> (value: UInt64, count: UInt64)? {
        let fields = line.split(separator: " ").compactMap { UInt64($0) }
        return fields.count == 2 ? (fields[0], fields[1]) : nil
    }
}

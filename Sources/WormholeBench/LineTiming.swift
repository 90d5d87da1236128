// SPDX-License-Identifier: Apache-2.0
import Histogram

/// Times the command-line path: post here, then block until the child's line for that post is
/// read from its standard-output pipe.
enum LineTiming {
    /// Runs `warmup` unmeasured then `count` measured posts with states `first`, `first + 1`, ….
    ///
    /// For each state, `prepare` runs untimed (writing a mailbox file, say) and returns the exact
    /// line the child must print; the timer covers `post` and reading that line.
    static func run(
        _ child: ChildProcess, first: UInt64, count: Int, warmup: Int,
        prepare: (UInt64) throws -> [UInt8], post: (UInt64) throws -> Void
    ) throws -> Histogram<UInt64> {
        var histogram = BenchRow.makeHistogram()
        for index in 0..<(warmup + count) {
            let state = first + UInt64(index)
            let expected = try prepare(state)
            let start = MonotonicClock.now()
            try post(state)
            guard let line = try child.output.readLine(timeoutSeconds: 60) else {
                throw BenchFailure("\(child.name) closed its output (exit status \(child.waitForExit()))")
            }
            let elapsed = MonotonicClock.now() - start
            guard line.elementsEqual(expected) else {
                throw BenchFailure(
                    "\(child.name) printed \(String(decoding: line, as: UTF8.self)) where "
                        + "\(String(decoding: expected, as: UTF8.self)) was expected")
            }
            if index >= warmup { histogram.record(elapsed) }
        }
        return histogram
    }
}

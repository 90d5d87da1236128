// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import Histogram
import Wormhole

/// Wormhole's side of the post-call row: `DarwinNotificationCenter.post` of a name nobody
/// observes, as a process of its own (the floor, `wormhole-floor post-call`, is one too). Times
/// each call alone, `warmup` unmeasured then `count` measured, waiting `spacing-us` microseconds
/// (untimed) after each so every post starts on an idle connection; prints the durations as
/// `NANOSECONDS COUNT` lines (the histogram's recorded values). The doorbell is as the caller's
/// environment sets it: the bench runs this with it on and an empty runtime directory, so the
/// post looks for endpoints and finds none, or with one observer registered in another process,
/// so the post rings it. With `--until-line`, each post is timed until an observer's line for it
/// is read from standard input (the bench connects `wormholectl observe`'s output there): the
/// post seen from outside, against `wormhole-floor post-line`.
struct BenchPostCallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-post-call", shouldDisplay: false)

    @Option var name: String
    @OptionGroup var timing: TimedPostOptions
    @Option var spacingUs: Int
    @Flag var untilLine = false

    func run() throws {
        let center = try timing.center()
        let name = try NotificationName(self.name)
        var histogram = BenchRow.makeHistogram()
        // Locals: an option read through its property wrapper costs a look-up per read.
        let (warmup, count, spacingUs) = (timing.warmup, timing.count, self.spacingUs)
        let observer = untilLine ? LineReader(fd: dup(0), owner: "the observer") : nil
        for index in 0..<(warmup + count) {
            let start = MonotonicClock.now()
            try center.post(name, state: UInt64(index))
            if let observer, try observer.readLine(timeoutSeconds: 60) == nil {
                throw BenchFailure("the observer's output ended after \(index) posts")
            }
            let elapsed = MonotonicClock.now() - start
            if index >= warmup { histogram.record(elapsed) }
            var gap = timespec(tv_sec: spacingUs / 1_000_000, tv_nsec: (spacingUs % 1_000_000) * 1_000)
            var remaining = timespec()
            while nanosleep(&gap, &remaining) != 0 && errno == EINTR { gap = remaining }
        }
        if let error = center.flush() { throw error }
        RecordedValueLines.write(histogram)
    }
}

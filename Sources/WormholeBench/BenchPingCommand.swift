// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import Histogram
import Wormhole
import WormholeDBus
import WormholeSystem

/// The pinging side of the notification ping-pong as a process of its own (run by the bench for
/// the doorbell row, so both sides are processes as the floor's are): pings through a
/// DarwinNotificationCenter, a `_bench-echo` answers; prints one round trip in nanoseconds per
/// line as `NANOSECONDS COUNT` (the histogram's recorded values), `count` of them after `warmup` unmeasured, then stops the echo (state 2^64-1).
struct BenchPingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-ping", shouldDisplay: false)

    @Option var ping: String
    @Option var pong: String
    @OptionGroup var timing: TimedPostOptions
    /// Microseconds to wait after each pong before the next ping (0: back to back).
    @Option var spacingUs = 0

    func run() throws {
        let center = try timing.center()
        let (count, warmup) = (timing.count, timing.warmup)
        let ping = try NotificationName(self.ping)
        let pong = try NotificationName(self.pong)
        if spacingUs > 0 {
            let spaced = SpacedPings()
            let observer = try LibraryAPI.observe(center, pong, on: .ioThread) { state in
                if let state { spaced.arrived(state) }
            }
            let histogram = try spaced.run(count: count, warmup: warmup, spacingMicroseconds: spacingUs) {
                try center.post(ping, state: $0)
            }
            observer.cancel()
            try finish(center, ping, histogram)
            return
        }
        let driver = PingPongDriver(first: 0, count: count, warmup: warmup)
        let observer = try LibraryAPI.observe(center, pong, on: .ioThread) { state in
            guard let state, let next = driver.received(state) else { return }
            try? center.post(ping, state: next)
        }
        let histogram = try driver.run { try center.post(ping, state: $0) }
        observer.cancel()
        try finish(center, ping, histogram)
    }

    /// Stops the echo and prints the round trips.
    private func finish(_ center: DarwinNotificationCenter, _ ping: NotificationName, _ histogram: Histogram<UInt64>)
        throws
    {
        try center.post(ping, state: UInt64.max)
        center.flush()
        RecordedValueLines.write(histogram)
    }
}

/// Spaced pings: each is posted from the calling thread once the previous pong arrived and
/// the spacing passed; the round trip ends when the pong reaches the handler (its time is
/// taken there, so the wake-up of the waiting thread is not counted, as in the C floor, whose
/// one thread both waits and times).
final class SpacedPings: Sendable {
    private struct State {
        var expected: UInt64?
        var arrival: UInt64 = 0
    }

    private let state = Locked(State())
    private let pong = DispatchSemaphore(value: 0)

    /// On the I/O thread: a pong carrying `sequence`.
    func arrived(_ sequence: UInt64) {
        let now = MonotonicClock.now()
        let awaited = state.withLock { state -> Bool in
            guard state.expected == sequence else { return false }
            state.expected = nil
            state.arrival = now
            return true
        }
        if awaited { pong.signal() }
    }

    func run(
        count: Int, warmup: Int, spacingMicroseconds: Int, post: (UInt64) throws -> Void
    ) throws -> Histogram<UInt64> {
        var histogram = BenchRow.makeHistogram()
        for sequence in 0..<UInt64(count + warmup) {
            state.withLock { $0.expected = sequence }
            let start = MonotonicClock.now()
            try post(sequence)
            if pong.wait(timeout: .now() + .seconds(60)) == .timedOut {
                throw BenchFailure("spaced ping-pong stalled at \(sequence) of \(count + warmup) (no pong in 60 s)")
            }
            let arrival = state.withLock { $0.arrival }
            if sequence >= UInt64(warmup) { histogram.record(arrival - start) }
            var gap = timespec(
                tv_sec: spacingMicroseconds / 1_000_000, tv_nsec: (spacingMicroseconds % 1_000_000) * 1_000)
            var remaining = timespec()
            while nanosleep(&gap, &remaining) != 0 && errno == EINTR { gap = remaining }
        }
        return histogram
    }
}

// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Histogram
import Synchronization

/// Times a ping-pong driven from the pong handler: each pong carrying the expected sequence
/// number ends one round trip and returns the next ping's number.
final class PingPongDriver: Sendable {
    private struct State {
        var sent = 0
        var start: UInt64 = 0
        var histogram = BenchRow.makeHistogram()
    }

    private let first: UInt64
    private let total: Int
    private let warmup: Int
    private let state = Mutex(State())
    private let done = DispatchSemaphore(value: 0)

    init(first: UInt64, count: Int, warmup: Int) {
        self.first = first
        total = count + warmup
        self.warmup = warmup
    }

    /// Records the round trip that `sequence` ends; the next sequence number to ping, or `nil`
    /// when it is not the awaited pong or the run is complete.
    func received(_ sequence: UInt64) -> UInt64? {
        let now = MonotonicClock.now()
        let (next, finished) = state.withLock { state -> (UInt64?, Bool) in
            guard sequence == first + UInt64(state.sent), state.sent < total else { return (nil, false) }
            if state.sent >= warmup { state.histogram.record(now - state.start) }
            state.sent += 1
            if state.sent == total { return (nil, true) }
            state.start = MonotonicClock.now()
            return (first + UInt64(state.sent), false)
        }
        if finished { done.signal() }
        return next
    }

    /// Sends the first ping, waits for the last pong, and returns the measured round trips.
    /// A ping-pong that stalls for `safetySeconds` (a lost signal) fails instead of hanging.
    func run(safetySeconds: Int = 300, sendFirst: (UInt64) throws -> Void) throws -> Histogram<UInt64> {
        state.withLock { $0.start = MonotonicClock.now() }
        try sendFirst(first)
        if done.wait(timeout: .now() + .seconds(safetySeconds)) == .timedOut {
            let sent = state.withLock { $0.sent }
            throw BenchFailure(
                "ping-pong stalled after \(sent) of \(total) round trips (no pong in \(safetySeconds) s)")
        }
        return state.withLock { $0.histogram }
    }
}

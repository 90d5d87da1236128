// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Synchronization
import Wormhole
import WormholeDBus

/// Posts per second: a fixed number of posts as fast as the caller can make them, then a flush.
/// Each run gives two rates: until the flush returned (every post written to the bus socket),
/// and until the last post call returned (the loop alone: what posting costs the caller). Today
/// both are close: libdbus writes from the sending thread and waits when the socket is full, so
/// the daemon's reading paces the sender. With emits handed to an I/O thread, the loop alone
/// measures the hand-off. After the timer stops, each run waits (untimed) until the bus daemon
/// has read everything, so one run's backlog does not slow the next.
enum PostRate {
    /// The floor: `wormhole-floor blast`, one thread, libdbus only.
    static func floor(_ address: BusAddress, name: String, posts: Int) throws -> RateRow.Sample {
        let child = try ChildProcess(
            executable: try Executables.sibling("wormhole-floor"),
            arguments: ["blast", address.rawValue, name, "\(posts)"])
        let lines = try child.readAllOutput()
        let numbers = lines.first?.split(separator: " ").compactMap { UInt64($0) } ?? []
        guard child.waitForExit() == 0, numbers.count == 2, numbers.allSatisfy({ $0 > 0 }) else {
            throw BenchFailure("wormhole-floor blast failed: \(lines)")
        }
        return RateRow.Sample(posts: posts, flushed: numbers[0], loop: numbers[1])
    }

    /// `DarwinNotificationCenter.post` from `names.count` threads (the calling thread when
    /// there is one), `posts` in all, each thread posting its own name.
    static func center(
        _ center: DarwinNotificationCenter, names: [NotificationName], posts: Int, drain: Drain
    ) throws -> RateRow.Sample {
        let perThread = posts / names.count
        let (elapsed, loop): (UInt64, UInt64)
        if names.count == 1 {
            let name = names[0]
            let start = MonotonicClock.now()
            for index in 0..<perThread { try center.post(name, state: UInt64(index)) }
            loop = MonotonicClock.now() - start
            center.flush()
            elapsed = MonotonicClock.now() - start
        } else {
            let go = DispatchSemaphore(value: 0)
            let finished = DispatchGroup()
            let failure = Mutex<(any Error)?>(nil)
            for (thread, name) in names.enumerated() {
                finished.enter()
                let base = UInt64(thread * perThread)
                Thread {
                    go.wait()
                    do {
                        for index in 0..<perThread { try center.post(name, state: base + UInt64(index)) }
                    } catch {
                        failure.withLock { $0 = $0 ?? error }
                    }
                    finished.leave()
                }.start()
            }
            let start = MonotonicClock.now()
            for _ in names { go.signal() }
            finished.wait()
            loop = MonotonicClock.now() - start
            center.flush()
            elapsed = MonotonicClock.now() - start
            if let error = failure.withLock({ $0 }) { throw error }
        }
        try drain.wait()
        return RateRow.Sample(posts: perThread * names.count, flushed: elapsed, loop: loop)
    }

    /// Waits until the daemon has read all of a center's posts: the center posts a sentinel it
    /// observes itself, which the daemon routes back only after everything posted before it.
    final class Drain: Sendable {
        private let center: DarwinNotificationCenter
        private let name: NotificationName
        private let arrived = DispatchSemaphore(value: 0)
        private let observer: Subscription

        init(_ center: DarwinNotificationCenter, name: NotificationName) throws {
            self.center = center
            self.name = name
            let arrived = self.arrived
            // One sentinel per wait(), each awaited before the next: every arrival ends one wait.
            observer = try LibraryAPI.observe(center, name, on: .ioThread) { _ in arrived.signal() }
        }

        deinit { observer.cancel() }

        func wait() throws {
            try center.post(name)
            center.flush()
            if arrived.wait(timeout: .now() + .seconds(300)) == .timedOut {
                throw BenchFailure("the bus daemon did not catch up with the posts within 300 s")
            }
        }
    }
}

import ArgumentParser
import Foundation
import Histogram
import Wormhole

/// The pinging side of the notification ping-pong as a process of its own (run by the bench for
/// the doorbell row, so both sides are processes as the floor's are): pings through a
/// DarwinNotificationCenter, a `_bench-echo` answers; prints one round trip in nanoseconds per
/// line as `NANOSECONDS COUNT` (the histogram's recorded values), `count` of them after `warmup` unmeasured, then stops the echo (state 2^64-1).
struct BenchPingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-ping", shouldDisplay: false)

    @Option var ping: String
    @Option var pong: String
    @Option var count: Int
    @Option var warmup: Int
    @Option var wake: LibraryAPI.Wake = .doorbell
    @OptionGroup var bus: BusOptions

    func run() throws {
        let center = try LibraryAPI.center(address: try bus.required(), wake: wake)
        let ping = try NotificationName(self.ping)
        let pong = try NotificationName(self.pong)
        let driver = PingPongDriver(first: 0, count: count, warmup: warmup)
        let observer = try LibraryAPI.observe(center, pong, on: .ioThread) { state in
            guard let state, let next = driver.received(state) else { return }
            try? center.post(ping, state: next)
        }
        let histogram = try driver.run { try center.post(ping, state: $0) }
        observer.cancel()
        try center.post(ping, state: UInt64.max)
        center.flush()
        // One line per recorded value: `NANOSECONDS COUNT`.
        var lines = ""
        for value in histogram.recordedValues() { lines += "\(value.value) \(value.countAddedInThisIterationStep)\n" }
        FileHandle.standardOutput.write(Data(lines.utf8))
    }
}

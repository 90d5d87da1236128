// SPDX-License-Identifier: Apache-2.0
import Histogram
import Wormhole
import WormholeDBus

/// The floor's side of a ping-pong: two `wormhole-floor` processes (echo and ping), libdbus only.
enum FloorPingPong {
    /// Runs `warmup` unmeasured then `count` measured round trips; with `files` (a directory
    /// and a size), each hop also writes and reads a file of that size.
    /// With `spacingMicroseconds`, the ping side waits that long after each pong before the
    /// next ping (spaced one-way sends, nothing left over from the round before).
    static func run(
        _ address: BusAddress, count: Int, warmup: Int, files: (directory: String, size: Int)? = nil,
        spacingMicroseconds: Int = 0
    ) throws -> Histogram<UInt64> {
        let floor = try Executables.sibling("wormhole-floor")
        let names = BenchNames()
        let common = [
            address.rawValue, NotifyContract.objectPath, names.pingInterface, names.ping, names.pongInterface,
            names.pong,
        ]
        let fileArguments = files.map { [$0.directory, "\($0.size)"] } ?? []
        let echo = try ChildProcess(executable: floor, arguments: ["echo"] + common + fileArguments)
        try echo.waitForReady()
        let ping = try ChildProcess(
            executable: floor, arguments: ["ping"] + common + ["\(count)", "\(warmup)"] + fileArguments,
            environment: spacingMicroseconds > 0 ? ["WORMHOLE_FLOOR_SPACING_US": "\(spacingMicroseconds)"] : [:])
        return try collect(ping, echo, "wormhole-floor ping")
    }

    /// The same ping-pong of `size`-byte files with no bus: each side woken by inotify
    /// (`IN_MOVED_TO` of the other's file in `directory`), the floor under listening without a bus.
    static func runInotify(directory: String, size: Int, count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let floor = try Executables.sibling("wormhole-floor")
        let echo = try ChildProcess(executable: floor, arguments: ["inotify-echo", directory, "\(size)"])
        try echo.waitForReady()
        let ping = try ChildProcess(
            executable: floor, arguments: ["inotify-ping", directory, "\(size)", "\(count)", "\(warmup)"])
        return try collect(ping, echo, "wormhole-floor inotify-ping")
    }

    /// The round-trip times `ping` printed (one number of nanoseconds per line), once both exited.
    private static func collect(_ ping: ChildProcess, _ echo: ChildProcess, _ what: String) throws -> Histogram<UInt64>
    {
        let output = try ping.readAllOutput()
        guard ping.waitForExit() == 0 else { throw BenchFailure("\(what) failed") }
        echo.waitForExit()
        var histogram = BenchRow.makeHistogram()
        for line in output {
            if let value = UInt64(line) { histogram.record(value) }
        }
        return histogram
    }
}

/// The doorbell's ping-pong: two processes (`_bench-ping` and `_bench-echo`) whose centers
/// ring each other beside the bus signal (docs/contract.md section 9), sharing the runtime
/// directory `runtime`; the floor's shape, so the two rows compare like for like.
enum DoorbellPingPong {
    static func run(
        _ address: BusAddress, runtime: String, count: Int, warmup: Int, spacingMicroseconds: Int = 0
    ) throws -> Histogram<UInt64> {
        let names = BenchNames()
        // The bench turned the doorbell off for itself and its helpers; on for these two ("" unsets).
        let environment = ["XDG_RUNTIME_DIR": runtime, "WORMHOLE_DOORBELL": ""]
        let common = [
            "--ping", names.ping, "--pong", names.pong, "--wake", "doorbell", "--bus-address", address.rawValue,
        ]
        let echo = try ChildProcess(
            executable: Executables.current, arguments: ["_bench-echo", "--delivery", "io-thread"] + common,
            environment: environment)
        try echo.waitForReady()
        let ping = try ChildProcess(
            executable: Executables.current,
            arguments: [
                "_bench-ping", "--count", "\(count)", "--warmup", "\(warmup)", "--spacing-us", "\(spacingMicroseconds)",
            ]
                + common,
            environment: environment)
        let output = try ping.readAllOutput()
        guard ping.waitForExit() == 0 else { throw BenchFailure("_bench-ping failed") }
        echo.waitForExit()
        var histogram = BenchRow.makeHistogram()
        for line in output {
            if let recorded = RecordedValueLines.parse(line) { histogram.record(recorded.value, count: recorded.count) }
        }
        guard histogram.totalCount == UInt64(count) else {
            throw BenchFailure("_bench-ping reported \(histogram.totalCount) of \(count) round trips")
        }
        return histogram
    }
}

import ArgumentParser
import Dispatch
import Foundation
import Histogram
import Synchronization
import Wormhole
import WormholeDBus

/// Measures cross-process latency against the raw libdbus floor, in one run.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure post-to-observer latency across processes against the raw libdbus floor.",
        discussion: """
            Without --bus-address, starts a private dbus-daemon from --config. Runs a ping-pong \
            between two processes: first with wormhole-floor (libdbus C API only), then with \
            DarwinNotificationCenter on both sides, then both again while another process \
            observes --other-names names. Reports one-way latency (half the round trip).
            """)

    @Option(help: "Round trips per measurement.")
    var roundTrips = 10_000

    @Option(help: "Round trips before measuring.")
    var warmup = 1_000

    @Option(help: "Names observed by a third process in the loaded run (0 skips it).")
    var otherNames = 10_000

    @Option(help: "What to measure: notify, message or all.")
    var suite = "all"

    @Option(help: "Round trips per message-size row (the 1 MB row runs a tenth of them).")
    var messageRoundTrips = 2_000

    @Option(help: "Bus configuration for the private daemon.")
    var config = "dbus/wormhole-session.conf"

    @OptionGroup var bus: BusOptions

    @Option(help: "Alternating rounds per scenario: floor and ours take turns, so drift on a noisy machine hits both alike.")
    var rounds = 10

    func validate() throws {
        if roundTrips < rounds || rounds < 1 { throw ValidationError("--round-trips must be at least --rounds (\(rounds))") }
        if !["notify", "message", "all"].contains(suite) { throw ValidationError("--suite is notify, message or all, not '\(suite)'") }
        if messageRoundTrips < rounds * 10 { throw ValidationError("--message-round-trips must be at least 10 x --rounds") }
    }

    func run() throws {
        let daemon: PrivateDaemon? = bus.busAddress == nil ? try PrivateDaemon(config: config) : nil
        let address = try daemon?.address ?? bus.address()
        writeOutput("wormhole bench: \(rounds) alternating rounds per row (+\(warmup) warm-up round trips each), bus \(address)")
        writeOutput("one-way latency in microseconds (round trip / 2)")
        if suite != "message" { try notifySuite(address) }
        if suite != "notify" { try messageSuite(address) }
        daemon?.stop()
    }

    private func notifySuite(_ address: BusAddress) throws {
        writeOutput("\nnotifications: \(roundTrips) round trips per row")
        writeOutput(BenchRow.header)
        let (floor, ours) = try measurePair(address, floorLabel: "raw libdbus floor", oursLabel: "DarwinNotificationCenter")
        writeOutput(floor.line(against: nil))
        writeOutput(ours.line(against: floor))
        var summary = [String(format: "ours/floor median ratio: %.3f (target <= 1.15)", ours.median / floor.median)]
        if otherNames > 0 {
            let load = try ChildProcess(executable: selfExecutable(), arguments: [
                "_bench-load", "--names", "\(otherNames)", "--bus-address", address.rawValue,
            ])
            try load.waitForReady()
            let (loadedFloor, loaded) = try measurePair(
                address, floorLabel: "floor, \(otherNames) other names", oursLabel: "center, \(otherNames) other names")
            writeOutput(loadedFloor.line(against: nil))
            writeOutput(loaded.line(against: loadedFloor))
            summary.append(
                String(format: "ours loaded/empty median ratio: %.3f (target <= 1.20)", loaded.median / ours.median))
            load.terminate()
        }
        for line in summary { writeOutput(line) }
    }

    private func messageSuite(_ address: BusAddress) throws {
        writeOutput("\nmessages (encode, atomic write, post, wake, read, decode), one process each side")
        writeOutput(BenchRow.header)
        var summary: [String] = []
        for size in [100, 10_000, 1_000_000] {
            let count = size >= 1_000_000 ? messageRoundTrips / 10 : messageRoundTrips
            let work = NSTemporaryDirectory() + "wormhole-bench-files-\(getpid())-\(size)"
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: work) }
            var floor = BenchRow(label: "floor, \(Self.sizeLabel(size)) files", histogram: BenchRow.makeHistogram())
            var ours = BenchRow(label: "Wormhole, \(Self.sizeLabel(size)) JSON", histogram: BenchRow.makeHistogram())
            let session = try MessageSession(address: address, root: work + "/containers", size: size)
            defer { session.stop() }
            let perRound = max(1, count / rounds)
            let warm = min(warmup, perRound)
            for round in 0..<rounds {
                if round % 2 == 1 { ours.histogram.add(try session.run(count: perRound, warmup: warm)) }
                floor.histogram.add(try floorRun(address, count: perRound, warmup: warm, files: (work, size)))
                if round % 2 == 0 { ours.histogram.add(try session.run(count: perRound, warmup: warm)) }
            }
            writeOutput(floor.line(against: nil))
            writeOutput(ours.line(against: floor))
            summary.append(String(format: "messages %@: ours/floor median ratio %.3f (target <= 1.5)", Self.sizeLabel(size), ours.median / floor.median))
        }
        for line in summary { writeOutput(line) }
    }

    static func sizeLabel(_ size: Int) -> String {
        size >= 1_000_000 ? "\(size / 1_000_000) MB" : size >= 1_000 ? "\(size / 1_000) KB" : "\(size) B"
    }

    /// Runs the floor and ours in alternating rounds and merges each side's rounds.
    private func measurePair(_ address: BusAddress, floorLabel: String, oursLabel: String) throws -> (BenchRow, BenchRow) {
        var floor = BenchRow(label: floorLabel, histogram: BenchRow.makeHistogram())
        var ours = BenchRow(label: oursLabel, histogram: BenchRow.makeHistogram())
        let session = try NotifySession(address: address)
        defer { session.stop() }
        let perRound = roundTrips / rounds
        for round in 0..<rounds {
            if round % 2 == 0 {
                floor.histogram.add(try floorRun(address, count: perRound, warmup: warmup))
                ours.histogram.add(try session.run(count: perRound, warmup: warmup))
            } else {
                ours.histogram.add(try session.run(count: perRound, warmup: warmup))
                floor.histogram.add(try floorRun(address, count: perRound, warmup: warmup))
            }
        }
        return (floor, ours)
    }

    private func floorRun(
        _ address: BusAddress, count: Int, warmup: Int, files: (String, Int)? = nil
    ) throws -> Histogram<UInt64> {
        let floorPath = siblingExecutable("wormhole-floor")
        let names = BenchNames()
        let common = [address.rawValue, NotifyContract.objectPath, names.pingInterface, names.ping, names.pongInterface, names.pong]
        let fileArguments = files.map { [$0.0, "\($0.1)"] } ?? []
        let echo = try ChildProcess(executable: floorPath, arguments: ["echo"] + common + fileArguments)
        try echo.waitForReady()
        let ping = try ChildProcess(
            executable: floorPath, arguments: ["ping"] + common + ["\(count)", "\(warmup)"] + fileArguments)
        let output = try ping.readAllOutput()
        _ = echo.waitForExit()
        guard ping.waitForExit() == 0 else { throw CLIFailure(message: "wormhole-floor ping failed") }
        var histogram = BenchRow.makeHistogram()
        for line in output.split(separator: "\n") {
            if let value = UInt64(line) { histogram.record(value) }
        }
        return histogram
    }
}

/// Our side of the ping-pong: this process pings through a DarwinNotificationCenter, a
/// `_bench-echo` process answers through its own.
final class NotifySession {
    private let echo: ChildProcess
    private let center: DarwinNotificationCenter
    private let ping: NotificationName
    private let pong: NotificationName
    private var sequence: UInt64 = 0

    init(address: BusAddress) throws {
        let names = BenchNames()
        echo = try ChildProcess(executable: selfExecutable(), arguments: [
            "_bench-echo", "--ping", names.ping, "--pong", names.pong, "--bus-address", address.rawValue,
        ])
        try echo.waitForReady()
        center = try DarwinNotificationCenter(busAddress: address)
        ping = try NotificationName(names.ping)
        pong = try NotificationName(names.pong)
    }

    /// Runs `warmup` unmeasured then `count` measured round trips.
    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (center, ping) = (self.center, self.ping)
        let observer = try center.addObserver(for: pong, on: .ioThread) { note in
            guard let state = note.state, let next = driver.received(state) else { return }
            try? center.post(ping, state: next)
        }
        defer { observer.cancel() }
        return try driver.run { try center.post(ping, state: $0) }
    }

    func stop() {
        try? center.post(ping, state: UInt64.max)
        center.flush()
        _ = echo.waitForExit()
    }
}

/// The message a ping or pong carries: a sequence number and padding up to the row's size.
struct BenchPayload: Codable, Sendable {
    var seq: UInt64
    var pad: String

    init(seq: UInt64, pad: String) {
        self.seq = seq
        self.pad = pad
    }

    /// Padding that makes the encoded payload about `size` bytes.
    static func pad(size: Int) -> String { String(repeating: "x", count: max(0, size - 22)) }
}

/// Our side of the message ping-pong: this process sends `ping` and listens to `pong` through a
/// Wormhole; a `_bench-message-echo` process listens to `ping` and answers with the same payload.
final class MessageSession {
    private let echo: ChildProcess
    private let wormhole: MessageCenter
    private let size: Int
    private var sequence: UInt64 = 0

    init(address: BusAddress, root: String, size: Int) throws {
        let group = "group.org.wormhole.bench"
        echo = try ChildProcess(executable: selfExecutable(), arguments: [
            "_bench-message-echo", "--group", group, "--root", root, "--bus-address", address.rawValue,
        ])
        try echo.waitForReady()
        wormhole = try MessageCenter(applicationGroupIdentifier: group, containerRoot: root, busAddress: address)
        self.size = size
    }

    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (wormhole, pad) = (self.wormhole, BenchPayload.pad(size: size))
        let listener = try wormhole.listen(identifier: "pong", as: BenchPayload.self, on: .ioThread) { delivery in
            guard case .success(let payload) = delivery.result, let next = driver.received(payload.seq) else { return }
            _ = try? wormhole.passMessage(BenchPayload(seq: next, pad: pad), identifier: "ping")
        }
        defer { listener.cancel() }
        return try driver.run { try wormhole.passMessage(BenchPayload(seq: $0, pad: pad), identifier: "ping") }
    }

    func stop() {
        _ = try? wormhole.passMessage(BenchPayload(seq: UInt64.max, pad: ""), identifier: "ping")
        wormhole.flush()
        _ = echo.waitForExit()
    }
}

/// The echo side of the message ping-pong (run by `bench`).
struct BenchMessageEchoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-message-echo", shouldDisplay: false)

    @Option var group: String
    @Option var root: String
    @OptionGroup var bus: BusOptions

    func run() throws {
        let wormhole = try withCLIErrors {
            try MessageCenter(applicationGroupIdentifier: group, containerRoot: root, busAddress: try bus.address())
        }
        let listener = try withCLIErrors {
            try wormhole.listen(identifier: "ping", as: BenchPayload.self, on: .ioThread) { delivery in
                guard case .success(let payload) = delivery.result else { return }
                if payload.seq == UInt64.max { Foundation.exit(0) }
                _ = try? wormhole.passMessage(payload, identifier: "pong")
            }
        }
        announceReadyAndServe(keeping: listener)
    }
}

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
        let now = monotonicNanoseconds()
        let (next, finished) = state.withLock { state -> (UInt64?, Bool) in
            guard sequence == first + UInt64(state.sent), state.sent < total else { return (nil, false) }
            if state.sent >= warmup { state.histogram.record(now - state.start) }
            state.sent += 1
            if state.sent == total { return (nil, true) }
            state.start = monotonicNanoseconds()
            return (first + UInt64(state.sent), false)
        }
        if finished { done.signal() }
        return next
    }

    /// Sends the first ping, waits for the last pong, and returns the measured round trips.
    func run(sendFirst: (UInt64) throws -> Void) throws -> Histogram<UInt64> {
        state.withLock { $0.start = monotonicNanoseconds() }
        try sendFirst(first)
        done.wait()
        return state.withLock { $0.histogram }
    }
}

/// Fresh ping and pong names for one measurement.
struct BenchNames {
    let ping: String
    let pong: String
    var pingInterface: String { NotifyContract.bucketInterface(for: ping) }
    var pongInterface: String { NotifyContract.bucketInterface(for: pong) }

    init() {
        let tag = UInt32.random(in: 0...UInt32.max)
        ping = "org.wormhole.bench.\(tag).ping"
        pong = "org.wormhole.bench.\(tag).pong"
    }
}

/// One measured row; values are round trips in nanoseconds.
struct BenchRow {
    var label: String
    var histogram: Histogram<UInt64>

    static func makeHistogram() -> Histogram<UInt64> {
        Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
    }

    static let header = "scenario                              median      p99    p99.9      max   vs floor"

    private func oneWay(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 2_000 }

    var median: Double { oneWay(histogram.valueAtPercentile(50)) }

    func line(against floor: BenchRow?) -> String {
        let ratio = floor.map { String(format: "%8.3fx", median / $0.median) } ?? "       -"
        return label.padding(toLength: 34, withPad: " ", startingAt: 0)
            + String(
                format: " %9.1f %8.1f %8.1f %8.1f ", median, oneWay(histogram.valueAtPercentile(99)),
                oneWay(histogram.valueAtPercentile(99.9)), oneWay(histogram.max))
            + ratio
    }
}

/// The echo side of the notification ping-pong (run by `bench`).
struct BenchEchoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-echo", shouldDisplay: false)

    @Option var ping: String
    @Option var pong: String
    @OptionGroup var bus: BusOptions

    func run() throws {
        let center = try withCLIErrors { try DarwinNotificationCenter(busAddress: try bus.address()) }
        let ping = try withCLIErrors { try NotificationName(self.ping) }
        let pong = try withCLIErrors { try NotificationName(self.pong) }
        let observer = try withCLIErrors {
            try center.addObserver(for: ping, on: .ioThread) { note in
                guard let state = note.state else { return }
                if state == UInt64.max { Foundation.exit(0) }
                try? center.post(pong, state: state)
            }
        }
        announceReadyAndServe(keeping: observer)
    }
}

/// Observes many names, to load the bus daemon's match-rule tables (run by `bench`).
struct BenchLoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-load", shouldDisplay: false)

    @Option var names: Int
    @OptionGroup var bus: BusOptions

    func run() throws {
        let center = try withCLIErrors { try DarwinNotificationCenter(busAddress: try bus.address()) }
        var observers: [NotificationObserver] = []
        for index in 0..<names {
            let name = try withCLIErrors { try NotificationName("org.wormhole.bench.load.name\(index)") }
            observers.append(try withCLIErrors { try center.addObserver(for: name, on: .ioThread) { _ in } })
        }
        announceReadyAndServe(keeping: (center, observers))
    }
}

func monotonicNanoseconds() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

/// This executable's path.
func selfExecutable() -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}

/// An executable built next to this one (`wormhole-floor`, the examples).
func siblingExecutable(_ name: String) -> String {
    URL(fileURLWithPath: selfExecutable()).deletingLastPathComponent().appendingPathComponent(name).path
}

/// A child process whose standard error is watched for the readiness line.
final class ChildProcess {
    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()

    init(executable: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw CLIFailure(message: "cannot start \(executable): \(error)")
        }
    }

    /// Blocks until the child writes `ready` to standard error (or fails to).
    func waitForReady() throws {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(errors.fileHandleForReading.fileDescriptor, &byte, 1) == 1 {
            if byte == UInt8(ascii: "\n") {
                if line == Array("ready".utf8) { return }
                line = []
            } else {
                line.append(byte)
            }
        }
        throw CLIFailure(message: "\(process.executableURL?.lastPathComponent ?? "child") exited before it was ready: \(String(decoding: line, as: UTF8.self))")
    }

    func readAllOutput() throws -> String {
        String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    func waitForExit() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    func terminate() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// A private dbus-daemon for the benchmark or the demo.
final class PrivateDaemon {
    let address: BusAddress
    private let process = Process()
    private let directory: String

    init(config: String) throws {
        guard FileManager.default.fileExists(atPath: config) else {
            throw CLIFailure(message: "bus configuration '\(config)' not found (run from the repository root, or pass --config or --bus-address)")
        }
        directory = NSTemporaryDirectory() + "wormhole-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let socket = directory + "/bus"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["dbus-daemon", "--config-file=\(config)", "--nofork", "--print-address", "--address=unix:path=\(socket)"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw CLIFailure(message: "cannot start dbus-daemon: \(error)")
        }
        var byte: UInt8 = 0
        var line: [UInt8] = []
        while read(output.fileHandleForReading.fileDescriptor, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        guard String(decoding: line, as: UTF8.self).hasPrefix("unix:") else {
            throw CLIFailure(message: "dbus-daemon did not start (is the dbus-daemon package installed?)")
        }
        address = try BusAddress("unix:path=\(socket)")
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

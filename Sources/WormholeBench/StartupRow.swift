// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization
import Wormhole
import WormholeDBus

/// Time to ready at scale: one listener call on `--routes` identifiers
/// (`MessageCenter.listen(identifiers:)`, every `AddMatch` sent before any answer is awaited),
/// from the call to its return (every rule acknowledged by the bus), against the same
/// identifiers listened to one call at a time (one round trip each). A fresh connection per
/// round (through a link of its own to the bus's socket), made before the clock starts. Also
/// the CPU time of this process and of the bus daemon (read from `/proc`, when the daemon says
/// its pid) during each call.
struct StartupRow: BenchSuite {
    let context: BenchContext

    func run() throws {
        let count = options.routes
        guard count > 0 else { return }
        let scratch = try ScratchDirectory("startup")
        let identifiers = try (0..<count).map { try MessageIdentifier("id\($0)") }
        // A process shares one connection per bus address among all its centers, so each round
        // reaches the bus through a name of its own for the same socket (a symbolic link): its
        // own connection, which starts with no rule, and no round's rules pile up on another's
        // (dbus-daemon allows 50,000 per connection).
        guard let socket = address.rawValue.split(separator: ",").first?.split(separator: "=", maxSplits: 1).last,
            address.rawValue.hasPrefix("unix:path=")
        else {
            Console.output("\ntime to ready: skipped (the bus address is not unix:path=…: \(address.rawValue))")
            return
        }
        var made = 0
        func fresh() throws -> MessageCenter {
            made += 1
            let link = scratch.path + "/bus.\(made)"
            guard symlink(String(socket), link) == 0 else {
                throw BenchFailure("symlink \(link) failed: errno \(errno)")
            }
            let wormhole = try MessageCenter(
                applicationGroupIdentifier: "group.bench.startup", containerRoot: scratch.path,
                busAddress: try BusAddress("unix:path=\(link)"))
            _ = try wormhole.notificationCenter()
            return wormhole
        }
        let rounds = max(1, min(options.rounds, 5))
        let asking = try fresh()
        let daemon = try Self.daemonPID(asking.notificationCenter().connection)
        var together: [Double] = []
        var cpu: [Double] = []
        var daemonCPU: [Double] = []
        // Every round's connection lives to the end: closing one makes both sides drop its 2 x
        // `--routes` rules (seconds of CPU in libdbus and in the daemon), which would land in the
        // next round's time.
        var kept: [Any] = []
        for round in 0..<rounds {
            Console.progress("routes: listen on \(count) identifiers at once, round \(round + 1) of \(rounds)")
            let wormhole = try fresh()
            let cpuStarted = Self.processCPUMilliseconds()
            let daemonStarted = daemon.flatMap(Self.cpuMilliseconds(of:))
            let started = MonotonicClock.now()
            let listeners = try wormhole.listen(identifiers: identifiers, as: JSONDocument.self, on: .ioThread) { _ in }
            together.append(Double(MonotonicClock.now() - started) / 1e6)
            cpu.append(Self.processCPUMilliseconds() - cpuStarted)
            if let daemonStarted, let daemonEnded = daemon.flatMap(Self.cpuMilliseconds(of:)) {
                daemonCPU.append(daemonEnded - daemonStarted)
            }
            kept.append((wormhole, listeners))
        }
        Console.progress("routes: listen on \(count) identifiers one call at a time (one round)")
        let wormhole = try fresh()
        let started = MonotonicClock.now()
        let listeners = try identifiers.map {
            try wormhole.listen(identifier: $0, as: JSONDocument.self, on: .ioThread) { _ in }
        }
        let oneByOne = Double(MonotonicClock.now() - started) / 1e6
        withExtendedLifetime((listeners, kept, asking)) {}
        let median = together.sorted()[together.count / 2]
        Console.output(
            "\ntime to ready, \(count) identifiers: \(String(format: "%.0f", median)) ms in one call (median of "
                + "\(rounds); all: \(together.map { String(format: "%.0f", $0) }.joined(separator: ", "))), "
                + "\(String(format: "%.0f", oneByOne)) ms one call per identifier; CPU of this process (all "
                + "threads) in one call: \(cpu.map { String(format: "%.0f", $0) }.joined(separator: ", ")) ms"
                + (daemonCPU.isEmpty
                    ? ""
                    : "; CPU of the bus daemon: \(daemonCPU.map { String(format: "%.0f", $0) }.joined(separator: ", ")) ms")
                + String(
                    format: " (median per identifier: %.0f µs here%@)",
                    cpu.sorted()[cpu.count / 2] * 1e3 / Double(count),
                    daemonCPU.isEmpty
                        ? ""
                        : String(
                            format: ", %.0f µs in the daemon",
                            daemonCPU.sorted()[daemonCPU.count / 2] * 1e3 / Double(count))))
        report.figure(
            "routes", "listen on \(count) identifiers: time to ready", value: median, unit: "ms", count: rounds,
            target: 1_000)
        report.figure(
            "routes", "the same, one listen call per identifier", value: oneByOne, unit: "ms", count: 1, target: nil)
    }

    /// The bus daemon's pid, as it gives it (`GetConnectionUnixProcessID` of its own name); `nil`
    /// when it does not say or `/proc` does not show it.
    static func daemonPID(_ connection: BusConnection) -> Int? {
        let pid = Mutex<Int?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let reply = try? await connection.callBusDaemon(
                "GetConnectionUnixProcessID", [.string("org.freedesktop.DBus")])
            if case .uint32(let value)? = reply?.first { pid.withLock { $0 = Int(value) } }
            done.signal()
        }
        done.wait()
        return pid.withLock { $0 }.flatMap { cpuMilliseconds(of: $0) == nil ? nil : $0 }
    }

    /// User + system CPU time of process `pid` from `/proc/PID/stat`, in milliseconds.
    static func cpuMilliseconds(of pid: Int) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) * 1e3 / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// User + system CPU time of this process, every thread, in milliseconds.
    static func processCPUMilliseconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let user = Double(usage.ru_utime.tv_sec) * 1e3 + Double(usage.ru_utime.tv_usec) / 1e3
        let system = Double(usage.ru_stime.tv_sec) * 1e3 + Double(usage.ru_stime.tv_usec) / 1e3
        return user + system
    }
}

// `wormholectl doctor` and `wormholectl monitor`, run as child processes against private buses (and
// one bus whose policy denies the daemon's statistics), each test with a fresh container root.

import Dispatch
import Foundation
import Glibc
import Logging
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// One test's world: its suite's bus (or a bus of its own), an application group of its own (so
/// that tests sharing the bus never see each other's listeners or posts), an empty container root,
/// an empty runtime directory.
private final class DoctorWorld: Sendable {
    let group = uniqueName("group.com.example.doctor")

    let bus: TestBus
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory

    /// A world on the suite's shared bus; on a bus of its own with `configFile`, or on `bus` (a
    /// test that stops its bus or watches all of it passes one of its own: `DoctorWorld(bus: TestBus())`).
    init(configFile: String? = nil, bus: TestBus? = nil) throws {
        if let configFile {
            self.bus = try TestBus(configFile: configFile)
        } else {
            self.bus = try bus ?? TestBus.shared()
        }
        root = try TemporaryDirectory("doctor-root")
        runtime = try TemporaryDirectory("doctor-runtime")
    }

    var environment: [String: String] { ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path] }
    var container: String { "\(root.path)/\(group)" }
    var directory: String { "\(container)/wormhole" }

    /// Runs `wormholectl ARGUMENTS` to completion (on a Dispatch thread).
    func wormhole(_ arguments: [String], environment extra: [String: String] = [:]) async throws -> ProcessOutput {
        let executable = try productPath("wormholectl")
        let environment = self.environment.merging(extra) { $1 }
        return try await within("wormholectl \(arguments.first ?? "") to exit") {
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(with: Result { try run(executable, arguments, environment: environment) })
                }
            }
        }
    }

    /// `wormholectl doctor --json --bus-address A --group G IDS…`, parsed.
    func doctor(_ identifiers: [String] = [], address: String? = nil, environment: [String: String] = [:]) async throws
        -> DoctorOutput
    {
        var arguments = ["doctor", "--json", "--group", group]
        if let address = address ?? Optional(bus.address.rawValue), !address.isEmpty {
            arguments += ["--bus-address", address]
        }
        let output = try await wormhole(arguments + identifiers, environment: environment)
        return try DoctorOutput(output)
    }

    func send(_ identifier: String, _ json: String) async throws {
        let output = try await wormhole([
            "send", "--group", group, "--bus-address", bus.address.rawValue, identifier, json,
        ])
        if output.status != 0 { throw TestFailure("wormholectl send failed: \(output.stderr)") }
    }

    /// Starts a `wormholectl` command that announces `ready` and returns once it has.
    func startReady(_ arguments: [String]) async throws -> ChildProcess {
        let child = try ChildProcess(try productPath("wormholectl"), arguments, environment: environment)
        let first = try await next(1, from: child.stderrLines, "ready from wormholectl \(arguments[0])")
        guard first == ["ready"] else { throw TestFailure("wormholectl \(arguments[0]) wrote \(first) before 'ready'") }
        return child
    }
}

/// What `wormholectl doctor --json` printed, and how it exited.
private struct DoctorOutput {
    struct Check: Decodable {
        var check: String
        var status: String
        var detail: String
        var fix: String?
        var items: [String]
    }

    struct Report: Decodable {
        var ok: Bool
        var checks: [Check]
    }

    var status: Int32
    var report: Report
    var raw: ProcessOutput

    init(_ output: ProcessOutput) throws {
        status = output.status
        raw = output
        do {
            report = try JSONDecoder().decode(Report.self, from: Data(output.stdout.utf8))
        } catch {
            throw TestFailure("doctor printed no report (\(error)): \(output.stdout) \(output.stderr)")
        }
    }

    subscript(_ name: String) -> Check? { report.checks.first { $0.check == name } }

    /// The status of each check, by name.
    var statuses: [String: String] { Dictionary(report.checks.map { ($0.check, $0.status) }) { $1 } }
}

/// The tests share the suite's bus, each in a group of its own; those that stop the bus, need
/// another policy or watch every post on the bus have a bus of their own.
@Suite("wormholectl doctor and monitor", .sharedBus)
struct DoctorCLITests {
    @Test("no bus address: the first check fails with the fix, the bus checks are skipped")
    func noBus() async throws {
        let world = try DoctorWorld()
        let output = try await world.doctor(address: "", environment: ["DBUS_SESSION_BUS_ADDRESS": ""])
        #expect(output.status == 1)
        #expect(output.report.ok == false)
        #expect(output["bus address"]?.status == "fail")
        #expect(output["bus address"]?.fix?.contains("--bus-address") == true)
        #expect(output["bus"]?.status == "skipped")
        #expect(output["round trip"]?.status == "skipped")
        #expect(output["container root"]?.status == "pass")
        #expect(output["container root"]?.detail.contains("WORMHOLE_CONTAINER_ROOT") == true)
    }

    @Test("the bus address comes from DBUS_SESSION_BUS_ADDRESS when no --bus-address is given")
    func addressFromEnvironment() async throws {
        let world = try DoctorWorld()
        let output = try await world.doctor(
            address: "", environment: ["DBUS_SESSION_BUS_ADDRESS": world.bus.address.rawValue])
        #expect(output["bus address"]?.status == "pass")
        #expect(output["bus address"]?.detail.contains("from DBUS_SESSION_BUS_ADDRESS") == true)
        #expect(output["bus"]?.status == "pass")
    }

    @Test("a relative WORMHOLE_CONTAINER_ROOT: the root check fails naming it; XDG_DATA_HOME is named as the source")
    func containerRootSources() async throws {
        let world = try DoctorWorld()
        let relative = try await world.doctor(environment: ["WORMHOLE_CONTAINER_ROOT": "relative/root"])
        #expect(relative.status == 1)
        #expect(relative["container root"]?.status == "fail")
        #expect(relative["container root"]?.detail.contains("relative/root") == true)
        #expect(relative["container root"]?.fix?.contains("WORMHOLE_CONTAINER_ROOT") == true)
        #expect(relative["container"]?.status == "skipped")
        let xdg = try await world.doctor(environment: ["WORMHOLE_CONTAINER_ROOT": "", "XDG_DATA_HOME": world.root.path])
        #expect(
            xdg["container root"]?.detail
                == "\(world.root.path)/group-containers (from XDG_DATA_HOME); it does not exist yet (created on first use)"
        )
    }

    @Test("a dead bus: not reachable, with the socket to look at")
    func deadBus() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let world = try DoctorWorld(bus: TestBus())
        world.bus.kill()
        let output = try await world.doctor()
        #expect(output.status == 1)
        #expect(output["bus address"]?.status == "pass")
        #expect(output["bus"]?.status == "fail")
        #expect(output["bus"]?.detail.contains("not reachable") == true)
        #expect(output["bus"]?.fix?.contains(world.bus.socketPath) == true)
        #expect(output["listeners"]?.status == "skipped")
        #expect(output["round trip"]?.status == "skipped")
    }

    @Test("a bus that accepts and never answers (a stopped daemon): not reachable, within the deadline")
    func pausedBus() async throws {
        // It stops the bus: a bus of its own, not the suite's.
        let world = try DoctorWorld(bus: TestBus())
        world.bus.pause()
        defer { world.bus.resume() }
        let output = try await world.doctor()
        #expect(output.status == 1)
        #expect(output["bus"]?.status == "fail")
        #expect(output["bus"]?.detail.contains("not reachable") == true)
        #expect(output["round trip"]?.status == "skipped")
    }

    @Test("a healthy bus: the daemon, its version, a round trip")
    func healthyBus() async throws {
        let world = try DoctorWorld()
        let output = try await world.doctor()
        #expect(output["bus"]?.status == "pass")
        // dbus-daemon --version says "D-Bus Message Bus Daemon 1.14.10"; dbus-broker's "dbus-broker 33".
        let program = TestBusDaemon.isBroker ? "dbus-broker" : "D-Bus Message Bus Daemon"
        #expect(output["bus"]?.detail.contains(program) == true, "\(output["bus"]?.detail ?? "no bus check")")
        #expect(output["round trip"]?.status == "pass")
        #expect(output["round trip"]?.detail.contains("delivered in") == true)
        // Nothing was sent: the container does not exist, which is the finding.
        #expect(output["container"]?.status == "fail")
        #expect(output["container"]?.fix?.contains("same group") == true)
        #expect(output.status == 1)
    }

    @Test("a container writable by others is refused, with chmod as the fix")
    func openContainer() async throws {
        let world = try DoctorWorld()
        try await world.send("button", #"{"n":1}"#)
        #expect(chmod(world.container, 0o777) == 0)
        let output = try await world.doctor()
        #expect(output.status == 1)
        #expect(output["container"]?.status == "fail")
        #expect(output["container"]?.detail.contains("writable by group or others") == true)
        #expect(output["container"]?.fix?.contains("chmod go-w") == true)
        #expect(output["directory"]?.status == "skipped")
    }

    @Test("a symlinked wormhole directory is refused and never followed")
    func symlinkedDirectory() async throws {
        let world = try DoctorWorld()
        let elsewhere = try TemporaryDirectory("doctor-elsewhere")
        #expect(mkdir(world.container, 0o700) == 0)
        #expect(symlink(elsewhere.path, world.directory) == 0)
        let output = try await world.doctor()
        #expect(output.status == 1)
        #expect(output["container"]?.status == "pass")
        #expect(output["directory"]?.status == "fail")
        #expect(output["directory"]?.detail.contains("symbolic link") == true)
        #expect(output["directory"]?.fix?.contains("symbolic link") == true)
    }

    @Test("a corrupt stored message is named, with where the JSON breaks")
    func corruptMessage() async throws {
        let world = try DoctorWorld()
        try await world.send("good", #"{"n":1}"#)
        let fd = open(world.directory + "/broken.json", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        #expect(write(fd, "{\"n\":", 5) == 5)
        close(fd)
        let output = try await world.doctor()
        #expect(output.status == 1)
        let stored = try #require(output["stored messages"])
        #expect(stored.status == "fail")
        #expect(stored.detail.contains("broken"))
        #expect(stored.items.contains { $0.hasPrefix("broken") && $0.contains("at byte") })
        #expect(stored.items.contains { $0.hasPrefix("good") && $0.contains("7 B") })
        #expect(stored.fix?.contains("wormholectl send") == true)
    }

    @Test(
        "on dbus-broker (no Debug.Stats) the listeners and match-rule checks say they cannot tell, and why; the rest passes",
        .enabled(if: TestBusDaemon.isBroker, "dbus-broker only"))
    func brokerCannotListRules() async throws {
        let world = try DoctorWorld()
        try await world.send("button", #"{"n":1}"#)
        let output = try await world.doctor(["button"])
        let listeners = try #require(output["listeners"])
        #expect(listeners.status == "unknown")
        #expect(listeners.detail.contains("GetAllMatchRules"), "\(listeners.detail)")
        for check in [
            "bus address", "bus", "container root", "container", "directory", "stored messages", "round trip",
        ] {
            #expect(output[check]?.status == "pass", "\(check): \(output[check]?.detail ?? "missing")")
        }
    }

    @Test(
        "no listener for an identifier: the finding and the same-bus fix; everything else passes",
        .disabled(
            if: TestBusDaemon.isBroker,
            "the listeners check reads GetAllMatchRules (Debug.Stats), which dbus-broker does not implement"))
    func noListener() async throws {
        let world = try DoctorWorld()
        try await world.send("button", #"{"n":1}"#)
        let output = try await world.doctor(["button"])
        #expect(output.status == 1)
        let listeners = try #require(output["listeners"])
        #expect(listeners.status == "fail")
        #expect(listeners.detail.contains("\(world.group)/wormhole/button"))
        #expect(listeners.fix?.contains(world.bus.address.rawValue) == true)
        #expect(listeners.fix?.contains("another dbus-daemon") == false)
        #expect(output["match rules"]?.items.count == 2)
        #expect(output["match rules"]?.items.first?.contains("arg0='\(world.group)/wormhole/button'") == true)
        for check in [
            "bus address", "bus", "container root", "container", "directory", "stored messages", "round trip",
        ] {
            #expect(output[check]?.status == "pass", "\(check): \(output[check]?.detail ?? "missing")")
        }
    }

    @Test(
        "a second dbus-daemon on the same socket path: the listener left on the first is named as out of reach",
        .disabled(
            if: TestBusDaemon.isBroker,
            "the listeners check reads GetAllMatchRules (Debug.Stats), which dbus-broker does not implement"))
    func replacedSocket() async throws {
        let world = try DoctorWorld(bus: TestBus())
        let listener = try await world.startReady(
            ["listen", "--group", world.group, "--bus-address", world.bus.address.rawValue, "button"])
        defer {
            listener.signal(SIGKILL)
            _ = listener.wait()
        }
        // The README tour's bus line run a second time: a daemon on the same path takes the socket over.
        let second = try ChildProcess(
            "/usr/bin/env",
            [
                "dbus-daemon", "--config-file=\(world.bus.configFile)", "--nofork", "--print-address",
                "--address=unix:path=\(world.bus.socketPath)",
            ])
        defer {
            second.signal(SIGKILL)
            _ = second.wait()
        }
        _ = try await next(1, from: second.stdoutLines, "the second daemon's address")
        let output = try await world.doctor(["button"])
        let listeners = try #require(output["listeners"])
        #expect(listeners.status == "fail")
        let fix = listeners.fix ?? ""
        #expect(
            fix.contains("another dbus-daemon runs on this socket path (pid ") && fix.contains(world.bus.socketPath),
            "\(fix)")
        #expect(!fix.contains("pid \(second.pid))"), "the bus doctor talks to is not the other one: \(fix)")
    }

    @Test(
        "a listener present: every check passes, exit 0, and the listener's process is named",
        .disabled(
            if: TestBusDaemon.isBroker,
            "the listeners check reads GetAllMatchRules (Debug.Stats), which dbus-broker does not implement"))
    func listenerPresent() async throws {
        let world = try DoctorWorld()
        try await world.send("button", #"{"n":1}"#)
        let listener = try await world.startReady(
            ["listen", "--group", world.group, "--bus-address", world.bus.address.rawValue, "button"])
        let output = try await world.doctor(["button"])
        #expect(output.status == 0, "\(output.raw.stdout)")
        #expect(output.report.ok)
        #expect(output.statuses.values.allSatisfy { $0 == "pass" }, "\(output.statuses)")
        let pid = listener.pid
        #expect(output["listeners"]?.items.first?.contains("pid \(pid) wormhole") == true)
        // Without identifiers, the listeners below the wormhole's prefix are counted.
        let all = try await world.doctor()
        #expect(all["listeners"]?.detail.hasPrefix("1 connection") == true)
        // The text form: one line per check with its mark.
        let text = try await world.wormhole(
            ["doctor", "--group", world.group, "--bus-address", world.bus.address.rawValue, "button"])
        #expect(text.status == 0)
        #expect(text.stdout.split(separator: "\n").filter { $0.hasPrefix("✓ ") }.count == 10)
        listener.signal(SIGTERM)
    }

    @Test(
        "a listener for every identifier (listen --all) and a prefix observer count as listeners; one on another group does not",
        .disabled(
            if: TestBusDaemon.isBroker,
            "the listeners check reads GetAllMatchRules (Debug.Stats), which dbus-broker does not implement"))
    func prefixListeners() async throws {
        let world = try DoctorWorld()
        try await world.send("button", #"{"n":1}"#)
        let address = world.bus.address.rawValue
        let other = try await world.startReady([
            "listen", "--group", "group.com.example.other", "--bus-address", address, "button",
        ])
        let none = try await world.doctor(["button"])
        #expect(none["listeners"]?.status == "fail")
        let all = try await world.startReady(["listen", "--group", world.group, "--bus-address", address, "--all"])
        let observer = try await world.startReady(["observe", "--prefix", "\(world.group)/", "--bus-address", address])
        let output = try await world.doctor(["button"])
        #expect(output["listeners"]?.status == "pass")
        let pids = [all, observer].map { "pid \($0.pid) wormhole" }
        let listed = output["listeners"]?.items.first ?? ""
        #expect(pids.allSatisfy { listed.contains($0) }, "\(listed)")
        #expect(!listed.contains("pid \(other.pid)"))
        for child in [other, all, observer] { child.signal(SIGTERM) }
    }

    @Test("a bus that denies Debug.Stats: the listener check says it cannot tell, and it is no failure")
    func statsDenied() async throws {
        let config = try TemporaryDirectory("doctor-config")
        let original = try String(contentsOfFile: repositoryRoot.path + "/dbus/wormhole-session.conf", encoding: .utf8)
        let denying = original.replacingOccurrences(
            of: "    <allow own=\"*\"/>\n  </policy>",
            with: "    <allow own=\"*\"/>\n    <deny send_interface=\"org.freedesktop.DBus.Debug.Stats\"/>\n  </policy>"
        )
        #expect(denying != original)
        try denying.write(toFile: config.path + "/deny-stats.conf", atomically: true, encoding: .utf8)
        let world = try DoctorWorld(configFile: config.path + "/deny-stats.conf")
        try await world.send("button", #"{"n":1}"#)
        let output = try await world.doctor(["button"])
        let listeners = try #require(output["listeners"])
        #expect(listeners.status == "unknown")
        #expect(listeners.detail.contains("does not allow"))
        #expect(listeners.fix?.contains("wormholectl monitor") == true)
        #expect(output.status == 0, "\(output.statuses)")
    }

    @Test(
        "the doorbell check names a killed listener's endpoint as dead; the next observer sweeps it; Ctrl-C leaves none"
    )
    func doorbellEndpoints() async throws {
        let world = try DoctorWorld()
        let killed = try await world.startReady(
            ["listen", "--group", world.group, "--bus-address", world.bus.address.rawValue, "button"])
        killed.signal(SIGKILL)
        _ = killed.wait()
        let output = try await world.doctor(["button"])
        let doorbell = try #require(output["doorbell"])
        #expect(doorbell.status == "pass")
        #expect(doorbell.detail.contains("1 endpoint,") && doorbell.detail.contains("1 dead"), "\(doorbell.detail)")
        #expect(
            doorbell.items.count == 1 && doorbell.items.first?.hasPrefix("dead endpoint e") == true, "\(doorbell.items)"
        )
        // The next process that opens an endpoint sweeps the dead one; SIGINT ends it normally.
        let stopped = try await world.startReady(
            ["listen", "--group", world.group, "--bus-address", world.bus.address.rawValue, "other"])
        stopped.signal(SIGINT)
        let ending = try await stopped.finished("the listener stopped with SIGINT")
        #expect(ending.status == 130, "SIGINT is a normal end with 128 + 2: \(ending.stderr)")
        let after = try #require(try await world.doctor(["button"])["doorbell"])
        #expect(after.detail.contains("0 endpoints, 0 names registered") && after.items.isEmpty, "\(after.detail)")
    }

    @Test("bad input is a usage error before anything is checked")
    func badInput() async throws {
        let world = try DoctorWorld()
        let output = try await world.wormhole([
            "doctor", "--group", "bad/group", "--bus-address", world.bus.address.rawValue,
        ])
        #expect(output.status == 64)
        #expect(output.stdout.isEmpty)
        #expect(output.stderr.contains("bad/group"))
    }

    @Test("monitor shows every Posted of a burst, decoded, and nothing of other groups")
    func monitorBurst() async throws {
        let world = try DoctorWorld()
        let burst = 40
        let monitor = try await world.startReady(
            [
                "monitor", "--group", world.group, "--json", "--bus-address", world.bus.address.rawValue,
                "--count", String(burst + 2),
            ])
        var logger = Logger(label: "doctor-tests")
        logger.logLevel = .error
        let center = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(world.group), containerRoot: world.root.path,
            busAddress: world.bus.address,
            sharedStateDirectory: world.runtime.path + "/wormhole", logger: logger)
        let other = try DarwinNotificationCenter(
            busAddress: world.bus.address, sharedStateDirectory: world.runtime.path + "/w2")
        try other.post(NotificationName("group.com.example.other/wormhole/x"))
        for n in 1...burst {
            try center.passMessage(["n": n], identifier: "burst")
        }
        let defaults = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(world.group), containerRoot: world.root.path,
            busAddress: world.bus.address,
            sharedStateDirectory: world.runtime.path + "/wormhole", logger: logger)
        try defaults.set("EUR", forKey: "currency")
        try other.post(NotificationName("\(world.group)/wormhole/burst/journal"), state: 7)
        let output = try await monitor.finished("monitor to exit")
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == burst + 2)
        let objects = try lines.map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(!objects.contains { ($0["name"] as? String)?.hasPrefix("group.com.example.other") == true })
        let messages = objects.filter { $0["kind"] as? String == "message" }
        #expect(messages.count == burst)
        #expect(Set(messages.compactMap { $0["state"] as? UInt64 }).count == burst)  // every post, none merged
        #expect(messages.allSatisfy { $0["identifier"] as? String == "burst" && $0["sender"] as? String != nil })
        #expect(
            messages.allSatisfy {
                ($0["preview"] as? String)?.hasPrefix(#"{"n":"#) == true && $0["ageMicroseconds"] != nil
            })
        let setting = try #require(objects.first { $0["kind"] as? String == "defaults" })
        #expect(setting["key"] as? String == "currency")
        #expect(setting["preview"] as? String == #""EUR""#)
        // Posts from different connections have no order between them: found by kind.
        let journal = try #require(objects.first { $0["kind"] as? String == "journal" })
        #expect(journal["kind"] as? String == "journal")
        #expect(journal["state"] as? Int == 7)
    }

    @Test("monitor's text lines: time, name, state, sender, the message; a malformed Posted is shown")
    func monitorText() async throws {
        // Its monitor shows every post on the bus: a bus of its own, not the suite's.
        let world = try DoctorWorld(bus: TestBus())
        let monitor = try await world.startReady([
            "monitor", "--bus-address", world.bus.address.rawValue, "--count", "3",
        ])
        try await world.send("button", #"{ "buttonNumber" : 3 }"#)
        let post = try await world.wormhole([
            "post", "--bus-address", world.bus.address.rawValue, "com.example.plain", "--state", "5",
        ])
        #expect(post.status == 0)
        // A Posted whose first argument is not a string, as a mistyped dbus-send makes it.
        let malformed = try await runInBackground(
            "/usr/bin/env",
            [
                "dbus-send", "--bus=\(world.bus.address.rawValue)", "--type=signal", "/org/wormhole/Notify1",
                "org.wormhole.Notify1.Posted", "int32:5",
            ])
        #expect(malformed.status == 0)
        let lines = try await next(3, from: monitor.stdoutLines, "monitor lines")
        #expect(
            lines[2].contains("malformed Posted on org.wormhole.Notify1: its first argument is int32 5, not a string"))
        #expect(lines[0].contains("\(world.group)/wormhole/button  state="))
        #expect(lines[0].contains(#"message {"buttonNumber":3}"#))
        #expect(lines[0].contains(" from :1."))
        #expect(lines[0].contains("  age "))
        #expect(lines[1].contains("com.example.plain  state=5  from :1."))
        #expect(lines[0].range(of: #"^\d\d:\d\d:\d\d\.\d{6}  "#, options: .regularExpression) != nil)
    }
}

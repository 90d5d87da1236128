// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Wormhole
import WormholeDBus
import WormholeSystem

/// The checks, in order; each one sees what the earlier ones found.
final class Doctor {
    /// The group, directory and identifiers looked at, and the listeners for them.
    let census: ListenerCensus
    var group: GroupIdentifier? { census.group }
    var directory: WormholeDirectoryName { census.directory }
    var identifiers: [MessageIdentifier] { census.identifiers }
    let explicitAddress: String?
    let peers: [String]
    let emit: ((DoctorCheck) -> Void)?
    let environment = ProcessInfo.processInfo.environment

    private var checks: [DoctorCheck] = []
    private var address: BusAddress?
    private var connection: BusConnection?
    private var container: GroupContainer?

    init(
        group: GroupIdentifier?, directory: WormholeDirectoryName, identifiers: [MessageIdentifier],
        explicitAddress: String?, peers: [String] = [], emit: ((DoctorCheck) -> Void)?
    ) {
        census = ListenerCensus(group: group, directory: directory, identifiers: identifiers)
        self.explicitAddress = explicitAddress
        self.peers = peers
        self.emit = emit
    }

    func runAll() -> [DoctorCheck] {
        checkAddress()
        checkBus()
        checkDoorbell()
        checkSandbox()
        if let connection { _ = checkSenderName(connection) }
        checkRoot()
        checkSandboxPermissions(group: group, peers: peers)
        if group != nil {
            checkContainer()
            checkDirectory()
            checkMessages()
            checkRules()
            checkListeners()
        }
        checkRoundTrip()
        connection?.close()
        return checks
    }

    func record(_ check: DoctorCheck) {
        checks.append(check)
        emit?(check)
    }

    // MARK: The bus

    private func checkAddress() {
        let sameBus = "both sides must use the same bus"
        if let explicitAddress {
            address = try? BusAddress(explicitAddress)
            record(DoctorCheck(check: "bus address", status: .pass, detail: "\(explicitAddress) (from --bus-address)"))
            return
        }
        guard let value = environment["DBUS_SESSION_BUS_ADDRESS"], !value.isEmpty else {
            record(
                DoctorCheck(
                    check: "bus address", status: .fail,
                    detail: "none: no --bus-address and DBUS_SESSION_BUS_ADDRESS is not set",
                    fix: "run inside a desktop session, or start a private bus and export its address: "
                        + Self.privateBusRecipe + ", or pass --bus-address ADDRESS; \(sameBus)"))
            return
        }
        do {
            address = try BusAddress(value)
            record(DoctorCheck(check: "bus address", status: .pass, detail: "\(value) (from DBUS_SESSION_BUS_ADDRESS)"))
        } catch {
            record(
                DoctorCheck(
                    check: "bus address", status: .fail,
                    detail: "DBUS_SESSION_BUS_ADDRESS is not a valid D-Bus address: \(cliFailure(error).message)",
                    fix: "export the address dbus-daemon printed (unix:path=…) or pass --bus-address; \(sameBus)"))
        }
    }

    /// How to start a private session bus, the same recipe as README's tour: in the runtime
    /// directory (`/tmp` without one).
    static let privateBusRecipe =
        "export DBUS_SESSION_BUS_ADDRESS=unix:path=${XDG_RUNTIME_DIR:-/tmp}/wormhole-bus; "
        + "dbus-daemon --session --fork --address=\"$DBUS_SESSION_BUS_ADDRESS\""

    private func checkBus() {
        guard let address else {
            record(DoctorCheck(check: "bus", status: .skipped, detail: "not checked: no bus address"))
            return
        }
        let connection: BusConnection
        do {
            connection = try BusConnection(address: address, connectTimeout: .seconds(3), logger: Self.quietLogger())
        } catch {
            var fix = "start the bus (" + Self.privateBusRecipe + ") and give both sides its address"
            if let socket = Self.socketPath(address) {
                fix = "is the daemon running? \(socket) must be its live socket (`ls -l \(socket)`); " + fix
            }
            record(
                DoctorCheck(
                    check: "bus", status: .fail, detail: "not reachable: \(cliFailure(error).message)", fix: fix))
            return
        }
        self.connection = connection
        var parts: [String] = []
        if case .string(let id)? = try? blocking("GetId", { try await connection.callBusDaemon("GetId") }).first {
            parts.append("id \(id)")
        }
        parts.append(daemonDescription(connection))
        parts.append("this connection \(connection.uniqueName)")
        record(DoctorCheck(check: "bus", status: .pass, detail: "reachable; " + parts.joined(separator: ", ")))
    }

    /// The daemon's program and version: its pid from the bus, its executable from /proc, and
    /// that executable's `--version`; else what the bus calls itself.
    private func daemonDescription(_ connection: BusConnection) -> String {
        guard let pid = processID(of: "org.freedesktop.DBus", connection) else { return "daemon pid unknown" }
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") else {
            let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)).map {
                PathText.trimmingWhitespace($0)
            }
            return "\(comm ?? "daemon") pid \(pid)"
        }
        // Only a known daemon is asked for its version: through a proxy (a sandbox) the pid may
        // name an unrelated program of this namespace, which must not be run.
        let program = PathText.lastComponent(of: executable)
        let known = ["dbus-daemon", "dbus-broker", "dbus-broker-launch"].contains(program)
        let version = (known ? Self.firstLine(of: executable, ["--version"]) : nil) ?? program
        return "\(version) (\(executable), pid \(pid))"
    }

    // MARK: The container

    private func checkRoot() {
        var source: String
        if let explicit = environment["WORMHOLE_CONTAINER_ROOT"], !explicit.isEmpty {
            source = "WORMHOLE_CONTAINER_ROOT"
        } else if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            source = "XDG_DATA_HOME"
        } else {
            source = "HOME"
        }
        let root: String
        do {
            root = try GroupContainer.rootDirectory(environment: environment)
        } catch {
            record(
                DoctorCheck(
                    check: "container root", status: .fail, detail: cliFailure(error).message,
                    fix: "set WORMHOLE_CONTAINER_ROOT to an absolute directory, the same in both processes"))
            return
        }
        if source != "WORMHOLE_CONTAINER_ROOT", Self.sandbox != nil, let home = environment["HOME"],
            root == home + "/.local/share/group-containers"
        {
            source = "HOME: the host's root, visible in the sandbox"
        }
        if let group { container = try? GroupContainer(group: group, root: root) }
        let exists =
            (try? ContainerInspection.root(root)) != nil ? "" : "; it does not exist yet (created on first use)"
        record(DoctorCheck(check: "container root", status: .pass, detail: "\(root) (from \(source))\(exists)"))
    }

    private func checkContainer() {
        guard let container else {
            record(DoctorCheck(check: "container", status: .skipped, detail: "not checked: no container root"))
            return
        }
        checkPlace("container", container.path) { () throws(WormholeError) in
            try ContainerInspection.container(container)
        }
    }

    private func checkDirectory() {
        guard let container, checks.last?.status == .pass else {
            record(
                DoctorCheck(check: "directory", status: .skipped, detail: "not checked: the container is not usable"))
            return
        }
        let path = container.directoryPath(directory)
        checkPlace("directory", path) { () throws(WormholeError) in
            try ContainerInspection.directory(container, named: directory.rawValue)
        }
    }

    private func checkPlace(
        _ what: String, _ path: String, _ inspect: () throws(WormholeError) -> ContainerInspection.Directory?
    ) {
        do {
            guard let found = try inspect() else {
                record(
                    DoctorCheck(
                        check: what, status: .fail,
                        detail: "\(path) does not exist: nothing was ever sent here under this root",
                        fix: "sending creates it; check both sides use the same group, directory and container root "
                            + "(WORMHOLE_CONTAINER_ROOT, XDG_DATA_HOME, HOME)"))
                return
            }
            record(
                DoctorCheck(
                    check: what, status: .pass,
                    detail: "\(found.path) (mode \(String(found.mode, radix: 8)), owner uid \(found.owner))"))
        } catch {
            record(DoctorCheck(check: what, status: .fail, detail: error.message, fix: Self.fix(forUnsafe: path)))
        }
    }

    /// The one-line fix for a refused path, from what is there now.
    static func fix(forUnsafe path: String) -> String {
        var status = stat()
        guard lstat(path, &status) == 0 else { return "check the path exists and is readable" }
        if status.st_mode & S_IFMT == S_IFLNK {
            return "replace the symbolic link with a real directory (or point WORMHOLE_CONTAINER_ROOT at the real "
                + "location); links inside a container are never followed"
        }
        if status.st_uid != geteuid() {
            return "chown \(geteuid()) '\(path)' (it belongs to uid \(status.st_uid)), or use a root of your own"
        }
        if status.st_mode & 0o022 != 0 { return "chmod go-w '\(path)' (or chmod 700)" }
        if status.st_mode & S_IFMT != S_IFDIR { return "move '\(path)' away: it must be a directory" }
        return "check the path's type, owner and mode"
    }

    // MARK: The stored messages

    private func checkMessages() {
        guard let container, checks.last?.status == .pass, let group else {
            record(
                DoctorCheck(
                    check: "stored messages", status: .skipped, detail: "not checked: the directory is not usable"))
            return
        }
        let stored: [ContainerInspection.StoredMessage]
        let temporary: [String]
        do {
            stored = try ContainerInspection.storedMessages(container, directory: directory.rawValue)
            temporary = try ContainerInspection.temporaryFiles(container, directory: directory.rawValue)
        } catch {
            record(
                DoctorCheck(
                    check: "stored messages", status: .fail, detail: error.message,
                    fix: Self.fix(forUnsafe: error.value ?? container.path)))
            return
        }
        let now = Self.now()
        var items = stored.map { message -> String in
            var line = message.identifier
            if let size = message.size { line += "  \(size) B" }
            if let modified = message.modified { line += "  " + Self.age(nanoseconds: now &- modified) + " old" }
            if let problem = message.problem { line += "  ✗ " + problem }
            return line
        }
        if !temporary.isEmpty {
            items.append("\(temporary.count) temporary file(s) of writers killed before their rename (harmless)")
        }
        let bad = stored.filter { $0.problem != nil }
        let missing = identifiers.filter { id in !stored.contains { $0.identifier == id.rawValue } }
        let summary = "\(stored.count) in \(container.directoryPath(directory))"
        if let first = bad.first {
            record(
                DoctorCheck(
                    check: "stored messages", status: .fail,
                    detail:
                        "\(summary); \(bad.count) not readable as JSON: \(bad.map(\.identifier).joined(separator: ", "))",
                    fix:
                        "listeners report \(first.identifier) as undecodable: send it again (wormholectl send --group \(group) "
                        + "\(directory.rawValue == "wormhole" ? "" : "--directory \(directory) ")\(first.identifier) JSON) or clear it",
                    items: items))
        } else if !missing.isEmpty {
            record(
                DoctorCheck(
                    check: "stored messages", status: .fail,
                    detail: "\(summary); none for \(missing.map(\.rawValue).joined(separator: ", "))",
                    fix:
                        "nothing was sent for \(missing[0]) here: check the sender's identifier, group, directory and container root",
                    items: items))
        } else {
            record(DoctorCheck(check: "stored messages", status: .pass, detail: summary, items: items))
        }
    }

    // MARK: Listeners

    private func checkRules() { record(census.rules()) }

    private func checkListeners() {
        guard let connection else {
            record(DoctorCheck(check: "listeners", status: .skipped, detail: "not checked: no bus"))
            return
        }
        record(census.listeners(on: connection, address: address))
    }

    // MARK: Round trip

    private func checkRoundTrip() {
        guard let address, connection != nil else {
            record(DoctorCheck(check: "round trip", status: .skipped, detail: "not checked: no bus"))
            return
        }
        do {
            let (elapsed, name) = try Self.roundTrip(address, appID: (try? AppIdentity.current())?.appID)
            guard let elapsed else {
                record(
                    DoctorCheck(
                        check: "round trip", status: .fail,
                        detail: "a signal posted now on the private name \(name) was not delivered within 5 s",
                        fix: "the daemon did not route it: check its policy (receive/send rules) and its log"))
                return
            }
            let reach = Self.sandbox != nil ? "; posts reach this app's own processes through the proxy" : ""
            record(
                DoctorCheck(
                    check: "round trip", status: .pass,
                    detail:
                        "a signal posted now on the private name \(name) was delivered in \(Self.age(nanoseconds: elapsed))\(reach)"
                ))
        } catch {
            record(
                DoctorCheck(
                    check: "round trip", status: .fail, detail: cliFailure(error).message,
                    fix: "the bus refused a subscription or a post: check its policy and limits"))
        }
    }

    /// Subscribes on one new connection, posts from another (owning the app's sender name first,
    /// as every post does, when there is an app ID); the time to delivery, or nil when nothing
    /// came within 5 s.
    private static func roundTrip(_ address: BusAddress, appID: String?) throws -> (UInt64?, String) {
        let name = "org.wormhole.doctor.p\(getpid()).r\(UInt32.random(in: .min ... .max))"
        let interface = try InterfaceName(NotifyContract.bucketInterface(for: name))
        let member = try MemberName(NotifyContract.member)
        let path = try ObjectPath(NotifyContract.objectPath)
        let listener = try BusConnection(address: address, connectTimeout: .seconds(3), logger: Self.quietLogger())
        let poster = try BusConnection(address: address, connectTimeout: .seconds(3), logger: Self.quietLogger())
        defer {
            listener.close()
            poster.close()
        }
        let arrived = BoundedWait<Bool?>(nil)
        let subscription = try listener.subscribe(
            MatchRule(interface: interface, member: member, path: path, arguments: [0: name]), on: .ioThread
        ) { _ in arrived.answer(true) }
        if let appID { _ = try poster.claimAppName(appID: appID) }
        let start = DispatchTime.now().uptimeNanoseconds
        try poster.emit(
            Signal(path: path, interface: interface, member: member, arguments: [.string(name), .uint64(1)]))
        poster.flush()
        let arrival = arrived.answer(until: .now() + 5)
        let elapsed = DispatchTime.now().uptimeNanoseconds - start
        subscription.cancel()
        return (arrival != nil ? elapsed : nil, name)
    }

    // MARK: Helpers

    static let posted = try? MemberName(NotifyContract.member)

    static func quietLogger() -> Logger { Logger(label: "wormhole.doctor") }

    /// Nanoseconds since 1970 (`CLOCK_REALTIME`).
    static func now() -> UInt64 { Syscall.realTimeNanoseconds() }

    /// `312 µs`, `4.2 ms`, `12 s`, `3 min`, `5 h`, `2 d`.
    static func age(nanoseconds: UInt64) -> String {
        let seconds = Double(nanoseconds) / 1e9
        switch seconds {
        case ..<0.001: return "\(nanoseconds / 1000) µs"
        case ..<1: return fixedPoint(seconds * 1000, digits: 1) + " ms"
        case ..<120: return fixedPoint(seconds, digits: 0) + " s"
        case ..<7200: return "\(Int(seconds / 60)) min"
        case ..<172_800: return "\(Int(seconds / 3600)) h"
        default: return "\(Int(seconds / 86400)) d"
        }
    }

    static func socketPath(_ address: BusAddress) -> String? { socketPath(raw: address.rawValue) }

    /// The socket path of an address given as text (its first `path=`).
    static func socketPath(raw: String) -> String? {
        for part in raw.split(separator: ";").first?.split(separator: ",") ?? [] where part.contains("path=") {
            return part.split(separator: "=", maxSplits: 1).last.map(String.init)
        }
        return nil
    }

    /// The first line a program prints, or nil.
    static func firstLine(of executable: String, _ arguments: [String]) -> String? {
        ProgramOutput.standardOutput(of: executable, arguments)?.split(separator: "\n").first.map(String.init)
    }
}

import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Synchronization
import Wormhole
import WormholeDBus

/// `wormhole doctor [--group G] [--directory D] [ID…] [--peer APPID…] [--json]`: why nothing arrives.
struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the bus, the container and the listeners; say why nothing arrives.",
        discussion: """
            One line per check, marked with a check mark when it passes and a cross when it fails \
            (? when the bus does not allow the check, - when skipped), and under each failure the fix: the bus address and where it came from; the bus is reachable \
            (daemon, version); the container root and where it came from; the container and the \
            directory exist with safe modes and owner; the stored messages (sizes, ages, invalid \
            JSON); the match rules a listener for each ID adds; whether a connection on the bus is \
            listening for each ID now; a round trip proving a signal posted now is delivered. \
            Exit status 0 only when every check passed (a ? is not a failure), 1 otherwise.
            """)

    @Option(help: "The application group identifier (without it, only the bus and the root are checked).")
    var group: String?

    @Option(help: "The wormhole directory inside the group container.")
    var directory = "wormhole"

    @Argument(help: "Message identifiers whose message and listeners to check.")
    var identifiers: [String] = []

    @Option(name: .customLong("peer"), help: "Inside a sandbox: another app's ID whose posts this app must hear (repeatable).")
    var peers: [String] = []

    @Flag(help: "Print one JSON object instead of lines.")
    var json = false

    @OptionGroup var bus: BusOptions

    func validate() throws {
        if group == nil && !identifiers.isEmpty { throw ValidationError("identifiers need --group") }
    }

    func run() throws {
        // Bad input is a usage error (64) before anything is checked, as in every command.
        let names = try withCLIErrors { () throws -> (GroupIdentifier?, WormholeDirectoryName, [MessageIdentifier]) in
            let group = try self.group.map { try GroupIdentifier($0) }
            let directory = try WormholeDirectoryName(self.directory)
            var seen = Set<String>()
            let identifiers = try self.identifiers.filter { seen.insert($0).inserted }.map { try MessageIdentifier($0) }
            return (group, directory, identifiers)
        }
        // A malformed --bus-address is bad input (64), not a finding.
        if bus.busAddress != nil { _ = try bus.address() }
        let doctor = Doctor(
            group: names.0, directory: names.1, identifiers: names.2, explicitAddress: bus.busAddress,
            peers: peers, emit: json ? nil : { writeOutput($0.text) })
        let checks = doctor.runAll()
        if json { writeOutput(DoctorReport(checks: checks).json) }
        if checks.contains(where: { $0.status == .fail || $0.status == .skipped }) { Glibc.exit(1) }
    }
}

/// One finding of `wormhole doctor`.
struct DoctorCheck: Encodable {
    enum Status: String, Encodable {
        case pass, fail
        /// The bus does not allow the check: not a failure, nothing known.
        case unknown
        /// Not run because an earlier check failed.
        case skipped
    }

    var check: String
    var status: Status
    var detail: String
    var fix: String?
    /// Further lines (one per stored message, rule or listener).
    var items: [String] = []

    var mark: String {
        switch status {
        case .pass: "✓"
        case .fail: "✗"
        case .unknown: "?"
        case .skipped: "-"
        }
    }

    /// The lines a person reads: the check, its items, the fix.
    var text: String {
        var lines = ["\(mark) \(check): \(detail)"]
        lines += items.map { "    " + $0 }
        if let fix { lines.append("  fix: " + fix) }
        return lines.joined(separator: "\n")
    }
}

/// Everything `wormhole doctor --json` prints.
struct DoctorReport: Encodable {
    var ok: Bool
    var checks: [DoctorCheck]

    init(checks: [DoctorCheck]) {
        self.checks = checks
        ok = !checks.contains { $0.status == .fail || $0.status == .skipped }
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? #"{"ok":false}"#
    }
}

/// The checks, in order; each one sees what the earlier ones found.
final class Doctor {
    let group: GroupIdentifier?
    let directory: WormholeDirectoryName
    let identifiers: [MessageIdentifier]
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
        self.peers = peers
        self.group = group
        self.directory = directory
        self.identifiers = identifiers
        self.explicitAddress = explicitAddress
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
            record(DoctorCheck(
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
            record(DoctorCheck(
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
            record(DoctorCheck(
                check: "bus", status: .fail, detail: "not reachable: \(cliFailure(error).message)", fix: fix))
            return
        }
        self.connection = connection
        var parts: [String] = []
        if let id = try? blocking({ try await connection.callBusDaemon("GetId") }), case .string(let id)? = id.first {
            parts.append("id \(id)")
        }
        parts.append(daemonDescription(connection))
        parts.append("this connection \(connection.uniqueName)")
        record(DoctorCheck(check: "bus", status: .pass, detail: "reachable; " + parts.joined(separator: ", ")))
    }

    /// The daemon's program and version: its pid from the bus, its executable from /proc, and
    /// that executable's `--version`; else what the bus calls itself.
    private func daemonDescription(_ connection: BusConnection) -> String {
        guard let reply = try? blocking({
            try await connection.callBusDaemon("GetConnectionUnixProcessID", [.string("org.freedesktop.DBus")])
        }), case .uint32(let pid)? = reply.first
        else { return "daemon pid unknown" }
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") else {
            let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)).map { PathText.trimmingWhitespace($0) }
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
            record(DoctorCheck(
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
        let exists = (try? ContainerInspection.root(root)) != nil ? "" : "; it does not exist yet (created on first use)"
        record(DoctorCheck(check: "container root", status: .pass, detail: "\(root) (from \(source))\(exists)"))
    }

    private func checkContainer() {
        guard let container else {
            record(DoctorCheck(check: "container", status: .skipped, detail: "not checked: no container root"))
            return
        }
        checkPlace("container", container.path) { () throws(WormholeError) in try ContainerInspection.container(container) }
    }

    private func checkDirectory() {
        guard let container, checks.last?.status == .pass else {
            record(DoctorCheck(check: "directory", status: .skipped, detail: "not checked: the container is not usable"))
            return
        }
        let path = container.directoryPath(directory)
        checkPlace("directory", path) { () throws(WormholeError) in
            try ContainerInspection.directory(container, named: directory.rawValue)
        }
    }

    private func checkPlace(_ what: String, _ path: String, _ inspect: () throws(WormholeError) -> ContainerInspection.Directory?) {
        do {
            guard let found = try inspect() else {
                record(DoctorCheck(
                    check: what, status: .fail,
                    detail: "\(path) does not exist: nothing was ever sent here under this root",
                    fix: "sending creates it; check both sides use the same group, directory and container root "
                        + "(WORMHOLE_CONTAINER_ROOT, XDG_DATA_HOME, HOME)"))
                return
            }
            record(DoctorCheck(
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
            record(DoctorCheck(check: "stored messages", status: .skipped, detail: "not checked: the directory is not usable"))
            return
        }
        let stored: [ContainerInspection.StoredMessage]
        let temporary: [String]
        do {
            stored = try ContainerInspection.storedMessages(container, directory: directory.rawValue)
            temporary = try ContainerInspection.temporaryFiles(container, directory: directory.rawValue)
        } catch {
            record(DoctorCheck(check: "stored messages", status: .fail, detail: error.message, fix: Self.fix(forUnsafe: error.value ?? container.path)))
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
            record(DoctorCheck(
                check: "stored messages", status: .fail,
                detail: "\(summary); \(bad.count) not readable as JSON: \(bad.map(\.identifier).joined(separator: ", "))",
                fix: "listeners report \(first.identifier) as undecodable: send it again (wormhole send --group \(group) "
                    + "\(directory.rawValue == "wormhole" ? "" : "--directory \(directory) ")\(first.identifier) JSON) or clear it",
                items: items))
        } else if !missing.isEmpty {
            record(DoctorCheck(
                check: "stored messages", status: .fail,
                detail: "\(summary); none for \(missing.map(\.rawValue).joined(separator: ", "))",
                fix: "nothing was sent for \(missing[0]) here: check the sender's identifier, group, directory and container root",
                items: items))
        } else {
            record(DoctorCheck(check: "stored messages", status: .pass, detail: summary, items: items))
        }
    }

    // MARK: Listeners

    /// The notification name of a message identifier (contract §3).
    private func name(_ identifier: MessageIdentifier) -> String {
        "\(group?.rawValue ?? "")/\(directory.rawValue)/\(identifier.rawValue)"
    }

    private var prefix: String { "\(group?.rawValue ?? "")/\(directory.rawValue)/" }

    private func checkRules() {
        var items: [String] = []
        for identifier in identifiers {
            let name = self.name(identifier)
            for interface in [NotifyContract.bucketInterface(for: name), NotifyContract.plainInterface] {
                items.append(MatchRule(interface: try? InterfaceName(interface), member: Self.posted, arguments: [0: name]).description)
            }
        }
        let detail: String
        if identifiers.isEmpty {
            items.append(MatchRule(member: Self.posted, path: try? ObjectPath(NotifyContract.objectPath), argumentPaths: [0: prefix]).description)
            detail = "a listener for every identifier (listen, listen --all) adds 1 rule"
        } else {
            detail = "a listener for \(identifiers.map(\.rawValue).joined(separator: ", ")) adds \(items.count) rules"
        }
        record(DoctorCheck(check: "match rules", status: .pass, detail: detail, items: items))
    }

    private func checkListeners() {
        guard let connection else {
            record(DoctorCheck(check: "listeners", status: .skipped, detail: "not checked: no bus"))
            return
        }
        let rules: [String: [String]]
        do {
            rules = try blocking { try await connection.matchRulesOnBus() }
        } catch {
            record(DoctorCheck(
                check: "listeners", status: .unknown,
                detail: "cannot tell: the bus does not allow org.freedesktop.DBus.Debug.Stats.GetAllMatchRules "
                    + "(\(cliFailure(error).message))",
                fix: "allow it in the bus policy (<allow send_destination=\"org.freedesktop.DBus\" "
                    + "send_interface=\"org.freedesktop.DBus.Debug.Stats\"/>), or watch the bus with wormhole monitor"))
            return
        }
        // Monitors (`wormhole monitor`, `observe --all`, any rule for every post of the bus) see
        // the posts but are nobody's listener: they are named apart, and never pass the check.
        let others = rules.filter { $0.key != connection.uniqueName }
        let monitors = Set(others.filter { isMonitor($0.key, rules: $0.value.map(RuleText.init)) }.keys)
        let listeners = others.filter { !monitors.contains($0.key) }
        if identifiers.isEmpty {
            let listening = listeners.filter { $0.value.contains { self.listensBelow(prefix, RuleText($0)) } }
            let watching = monitors.filter { unique in others[unique]!.contains { self.listensBelow(prefix, RuleText($0)) } }
            record(DoctorCheck(
                check: "listeners", status: .pass,
                detail: "\(listening.count) connection(s) listening below \(prefix)"
                    + (watching.isEmpty ? "" : "; \(watching.count) monitor(s) watching, which are not listeners"),
                items: listening.keys.sorted().map { describeConnection($0, connection) }
                    + watching.sorted().map { "monitor: " + describeConnection($0, connection) }))
            return
        }
        var items: [String] = []
        var silent: [MessageIdentifier] = []
        var watched = false
        for identifier in identifiers {
            let name = self.name(identifier)
            let bucket = NotifyContract.bucketInterface(for: name)
            let hearing = others.filter {
                $0.value.contains {
                    RuleText($0).delivers(
                        name: name, interface: bucket, path: NotifyContract.objectPath, member: NotifyContract.member)
                }
            }.keys.sorted()
            let listening = hearing.filter { !monitors.contains($0) }
            let watching = hearing.filter { monitors.contains($0) }
            if listening.isEmpty { silent.append(identifier) }
            if !watching.isEmpty { watched = true }
            var line = "\(identifier): " + (listening.isEmpty ? "nobody" : listening.map { describeConnection($0, connection) }.joined(separator: ", "))
            if !watching.isEmpty {
                line += " (seen by monitor " + watching.map { describeConnection($0, connection) }.joined(separator: ", ") + ")"
            }
            items.append(line)
        }
        if silent.isEmpty {
            record(DoctorCheck(check: "listeners", status: .pass, detail: "every identifier has a listener on this bus", items: items))
        } else {
            record(DoctorCheck(
                check: "listeners", status: .fail,
                detail: "no connection on this bus is listening for \(silent.map { self.name($0) }.joined(separator: ", "))"
                    + (watched ? " (a monitor sees the posts, but a monitor is not a listener)" : ""),
                fix: replacedDaemonHint()
                    + "start the listener on this same bus (\(address?.rawValue ?? "")); a listener on another bus "
                    + "(another DBUS_SESSION_BUS_ADDRESS: ssh, sudo, a container, a sandbox) never hears it",
                items: items))
        }
    }

    /// Whether the connection `unique` is a monitor rather than a listener: a `wormhole monitor`
    /// process (its rule may equal a prefix observer's), or a connection whose every rule on the
    /// notification path takes every post, whatever its name (`observe --all`, a bus monitor).
    private func isMonitor(_ unique: String, rules: [RuleText]) -> Bool {
        let posted = rules.filter { rule in rule.pairs.contains { $0.key == "member" && $0.value == NotifyContract.member } }
        if !posted.isEmpty && posted.allSatisfy({ rule in !rule.pairs.contains { $0.key.hasPrefix("arg0") } }) {
            return true
        }
        guard let pid = processID(of: unique),
            let command = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)
        else { return false }
        let arguments = command.split(separator: "\0", omittingEmptySubsequences: false).map(String.init)
        return arguments.count > 1 && arguments[0].hasSuffix("wormhole") && arguments[1] == "monitor"
    }

    /// When other `dbus-daemon` processes were started on this bus's socket path: the last one
    /// started took the socket file over, so a listener connected to another one is out of reach
    /// (it runs, yet no new connection finds its bus). Empty otherwise.
    private func replacedDaemonHint() -> String {
        guard let address, let socket = Self.socketPath(address), let bus = processID(of: "org.freedesktop.DBus"),
            let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc")
        else { return "" }
        let others = entries.compactMap { UInt32($0) }.filter { pid in
            guard pid != bus, let command = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8) else { return false }
            let arguments = command.split(separator: "\0").map(String.init)
            guard arguments.first.map({ PathText.lastComponent(of: $0) == "dbus-daemon" }) == true else { return false }
            let given = zip(arguments, arguments.dropFirst()).compactMap { $0 == "--address" ? $1 : nil }
                + arguments.compactMap { $0.hasPrefix("--address=") ? String($0.dropFirst("--address=".count)) : nil }
            return given.contains { Self.socketPath(raw: $0) == socket }
        }.sorted()
        guard !others.isEmpty else { return "" }
        return "another dbus-daemon runs on this socket path (pid \(others.map(String.init).joined(separator: ", "))); "
            + "the last one started took \(socket) over, and a listener connected to an earlier one cannot be reached: "
            + "stop the extra daemons and restart the listener; else "
    }

    /// The process ID of the connection `unique`, from the bus daemon.
    private func processID(of unique: String) -> UInt32? {
        guard let connection,
            let reply = try? blocking({ try await connection.callBusDaemon("GetConnectionUnixProcessID", [.string(unique)]) }),
            case .uint32(let pid)? = reply.first
        else { return nil }
        return pid
    }

    /// Whether a rule delivers some name below `prefix` (ending in `/`).
    private func listensBelow(_ prefix: String, _ rule: RuleText) -> Bool {
        let path = NotifyContract.objectPath
        let member = NotifyContract.member
        if let exact = rule.pairs.first(where: { $0.key == "arg0" })?.value {
            return exact.hasPrefix(prefix)
                && rule.delivers(name: exact, interface: NotifyContract.bucketInterface(for: exact), path: path, member: member)
        }
        // Any interface: a prefix rule names none.
        return !rule.pairs.contains { $0.key == "interface" }
            && rule.delivers(name: prefix + "x", interface: NotifyContract.plainInterface, path: path, member: member)
    }

    /// `:1.7 (pid 123 counter-app)`, or the unique name alone.
    private func describeConnection(_ unique: String, _ connection: BusConnection) -> String {
        guard let reply = try? blocking({
            try await connection.callBusDaemon("GetConnectionUnixProcessID", [.string(unique)])
        }), case .uint32(let pid)? = reply.first
        else { return unique }
        let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)).map { PathText.trimmingWhitespace($0) }
        return "\(unique) (pid \(pid)\(comm.map { " " + $0 } ?? ""))"
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
                record(DoctorCheck(
                    check: "round trip", status: .fail,
                    detail: "a signal posted now on the private name \(name) was not delivered within 5 s",
                    fix: "the daemon did not route it: check its policy (receive/send rules) and its log"))
                return
            }
            let reach = Self.sandbox != nil ? "; posts reach this app's own processes through the proxy" : ""
            record(DoctorCheck(
                check: "round trip", status: .pass,
                detail: "a signal posted now on the private name \(name) was delivered in \(Self.age(nanoseconds: elapsed))\(reach)"))
        } catch {
            record(DoctorCheck(
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
        let arrived = DispatchSemaphore(value: 0)
        let subscription = try listener.subscribe(
            MatchRule(interface: interface, member: member, path: path, arguments: [0: name]), on: .ioThread
        ) { _ in arrived.signal() }
        if let appID { _ = try poster.claimAppName(appID: appID) }
        let start = DispatchTime.now().uptimeNanoseconds
        try poster.emit(Signal(path: path, interface: interface, member: member, arguments: [.string(name), .uint64(1)]))
        poster.flush()
        let result = arrived.wait(timeout: .now() + 5)
        let elapsed = DispatchTime.now().uptimeNanoseconds - start
        subscription.cancel()
        return (result == .success ? elapsed : nil, name)
    }

    // MARK: Helpers

    static let posted = try? MemberName(NotifyContract.member)

    static func quietLogger() -> Logger { Logger(label: "wormhole.doctor") }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

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

/// Runs async work from synchronous command code (the main thread, never the cooperative pool)
/// and waits for it.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}

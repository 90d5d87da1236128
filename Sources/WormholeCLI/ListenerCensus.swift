// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Synchronization
import Wormhole
import WormholeDBus

/// `wormholectl doctor`'s look at the listeners: the match rules a listener for the identifiers
/// adds, and which connections on the bus have such rules (monitors, which see every post but
/// are nobody's listener, named apart).
struct ListenerCensus {
    let group: GroupIdentifier?
    let directory: WormholeDirectoryName
    let identifiers: [MessageIdentifier]

    /// The notification name of a message identifier (contract §3).
    private func name(_ identifier: MessageIdentifier) -> String {
        "\(group?.rawValue ?? "")/\(directory.rawValue)/\(identifier.rawValue)"
    }

    private var prefix: String { "\(group?.rawValue ?? "")/\(directory.rawValue)/" }

    /// The match rules a listener for the identifiers adds (for every identifier when there are none).
    func rules() -> DoctorCheck {
        var items: [String] = []
        for identifier in identifiers {
            let name = self.name(identifier)
            for interface in [NotifyContract.bucketInterface(for: name), NotifyContract.plainInterface] {
                items.append(
                    MatchRule(interface: try? InterfaceName(interface), member: Doctor.posted, arguments: [0: name])
                        .description)
            }
        }
        let detail: String
        if identifiers.isEmpty {
            items.append(
                MatchRule(
                    member: Doctor.posted, path: try? ObjectPath(NotifyContract.objectPath), argumentPaths: [0: prefix]
                ).description)
            detail = "a listener for every identifier (listen, listen --all) adds 1 rule"
        } else {
            detail = "a listener for \(identifiers.map(\.rawValue).joined(separator: ", ")) adds \(items.count) rules"
        }
        return DoctorCheck(check: "match rules", status: .pass, detail: detail, items: items)
    }

    /// Which connections on the bus of `connection` (other than itself) listen for the
    /// identifiers, or below the directory when there are none; monitors named apart. `address`
    /// is the bus's, for the fix.
    func listeners(on connection: BusConnection, address: BusAddress?) -> DoctorCheck {
        let rules: [String: [String]]
        do {
            rules = try blocking("GetAllMatchRules") { try await connection.matchRulesOnBus() }
        } catch {
            return DoctorCheck(
                check: "listeners", status: .unknown,
                detail: "cannot tell: the bus does not allow org.freedesktop.DBus.Debug.Stats.GetAllMatchRules "
                    + "(\(cliFailure(error).message))",
                fix: "allow it in the bus policy (<allow send_destination=\"org.freedesktop.DBus\" "
                    + "send_interface=\"org.freedesktop.DBus.Debug.Stats\"/>), or watch the bus with wormholectl monitor"
            )
        }
        // Monitors (`wormholectl monitor`, `observe --all`, any rule for every post of the bus) see
        // the posts but are nobody's listener: they are named apart, and never pass the check.
        let others = rules.filter { $0.key != connection.uniqueName }
        let monitors = Set(others.filter { isMonitor($0.key, rules: $0.value.map(RuleText.init), connection) }.keys)
        let listeners = others.filter { !monitors.contains($0.key) }
        if identifiers.isEmpty {
            let listening = listeners.filter { $0.value.contains { self.listensBelow(prefix, RuleText($0)) } }
            let watching = monitors.filter { unique in
                others[unique]!.contains { self.listensBelow(prefix, RuleText($0)) }
            }
            return DoctorCheck(
                check: "listeners", status: .pass,
                detail: "\(listening.count) connection(s) listening below \(prefix)"
                    + (watching.isEmpty ? "" : "; \(watching.count) monitor(s) watching, which are not listeners"),
                items: listening.keys.sorted().map { describeConnection($0, connection) }
                    + watching.sorted().map { "monitor: " + describeConnection($0, connection) })
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
            var line =
                "\(identifier): "
                + (listening.isEmpty
                    ? "nobody" : listening.map { describeConnection($0, connection) }.joined(separator: ", "))
            if !watching.isEmpty {
                line +=
                    " (seen by monitor " + watching.map { describeConnection($0, connection) }.joined(separator: ", ")
                    + ")"
            }
            items.append(line)
        }
        if silent.isEmpty {
            return DoctorCheck(
                check: "listeners", status: .pass, detail: "every identifier has a listener on this bus", items: items)
        } else {
            return DoctorCheck(
                check: "listeners", status: .fail,
                detail:
                    "no connection on this bus is listening for \(silent.map { self.name($0) }.joined(separator: ", "))"
                    + (watched ? " (a monitor sees the posts, but a monitor is not a listener)" : ""),
                fix: replacedDaemonHint(connection, address: address)
                    + "start the listener on this same bus (\(address?.rawValue ?? "")); a listener on another bus "
                    + "(another DBUS_SESSION_BUS_ADDRESS: ssh, sudo, a container, a sandbox) never hears it",
                items: items)
        }
    }

    /// Whether the connection `unique` is a monitor rather than a listener: a `wormholectl monitor`
    /// process (its rule may equal a prefix observer's), or a connection whose every rule on the
    /// notification path takes every post, whatever its name (`observe --all`, a bus monitor).
    private func isMonitor(_ unique: String, rules: [RuleText], _ connection: BusConnection) -> Bool {
        let posted = rules.filter { rule in
            rule.pairs.contains { $0.key == "member" && $0.value == NotifyContract.member }
        }
        if !posted.isEmpty && posted.allSatisfy({ rule in !rule.pairs.contains { $0.key.hasPrefix("arg0") } }) {
            return true
        }
        guard let pid = processID(of: unique, connection),
            let command = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)
        else { return false }
        let arguments = command.split(separator: "\0", omittingEmptySubsequences: false).map(String.init)
        return arguments.count > 1 && arguments[0].hasSuffix("wormholectl") && arguments[1] == "monitor"
    }

    /// When other `dbus-daemon` processes were started on this bus's socket path: the last one
    /// started took the socket file over, so a listener connected to another one is out of reach
    /// (it runs, yet no new connection finds its bus). Empty otherwise.
    private func replacedDaemonHint(_ connection: BusConnection, address: BusAddress?) -> String {
        guard let address, let socket = Doctor.socketPath(address),
            let bus = processID(of: "org.freedesktop.DBus", connection),
            let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc")
        else { return "" }
        let others = entries.compactMap { UInt32($0) }.filter { pid in
            guard pid != bus, let command = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8) else {
                return false
            }
            let arguments = command.split(separator: "\0").map(String.init)
            guard arguments.first.map({ PathText.lastComponent(of: $0) == "dbus-daemon" }) == true else { return false }
            let given =
                zip(arguments, arguments.dropFirst()).compactMap { $0 == "--address" ? $1 : nil }
                + arguments.compactMap { $0.hasPrefix("--address=") ? String($0.dropFirst("--address=".count)) : nil }
            return given.contains { Doctor.socketPath(raw: $0) == socket }
        }.sorted()
        guard !others.isEmpty else { return "" }
        return "another dbus-daemon runs on this socket path (pid \(others.map(String.init).joined(separator: ", "))); "
            + "the last one started took \(socket) over, and a listener connected to an earlier one cannot be reached: "
            + "stop the extra daemons and restart the listener; else "
    }

    /// Whether a rule delivers some name below `prefix` (ending in `/`).
    private func listensBelow(_ prefix: String, _ rule: RuleText) -> Bool {
        let path = NotifyContract.objectPath
        let member = NotifyContract.member
        if let exact = rule.pairs.first(where: { $0.key == "arg0" })?.value {
            return exact.hasPrefix(prefix)
                && rule.delivers(
                    name: exact, interface: NotifyContract.bucketInterface(for: exact), path: path, member: member)
        }
        // Any interface: a prefix rule names none.
        return !rule.pairs.contains { $0.key == "interface" }
            && rule.delivers(name: prefix + "x", interface: NotifyContract.plainInterface, path: path, member: member)
    }

    /// `:1.7 (pid 123 counter-app)`, or the unique name alone.
    private func describeConnection(_ unique: String, _ connection: BusConnection) -> String {
        guard let pid = processID(of: unique, connection) else { return unique }
        let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)).map {
            PathText.trimmingWhitespace($0)
        }
        return "\(unique) (pid \(pid)\(comm.map { " " + $0 } ?? ""))"
    }
}

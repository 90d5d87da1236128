import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import Wormhole
import WormholeDBus

/// `wormholectl monitor [--group G] [--json] [--count N] [--timeout S]`: `dbus-monitor`, decoded.
struct MonitorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "monitor",
        abstract: "Print every Posted signal on the bus (or of one group), decoded.",
        discussion: """
            Writes `ready` to standard error once the rule is active, then one line per signal: the \
            time it arrived, the name, the state, the sender and what the name points to: for a \
            mailbox (<group>/<directory>/<ID>) the stored message, abbreviated, and its age when the \
            signal arrived; for shared defaults (<group>/Preferences/<suite>/<key>) the key's value; \
            for a journal (<group>/<directory>/<ID>/journal) the record number. Files are read from \
            this process's container root.
            """)

    @Option(help: "Only the names of this application group (one prefix rule, <group>/).")
    var group: String?

    @Flag(help: "One JSON object per signal instead of a line of text.")
    var json = false

    @OptionGroup var limits: ServingLimits

    @OptionGroup var bus: BusOptions

    func run() throws {
        let group = try withCLIErrors { try self.group.map { try GroupIdentifier($0) } }
        let counter = limits.start()
        let address = try bus.address()
        let root = try? GroupContainer.rootDirectory()
        let writer = LineWriter()
        let json = self.json
        let prefix = group.map { $0.rawValue + "/" }
        let (connection, subscription) = try withCLIErrors {
            let path = try ObjectPath(NotifyContract.objectPath)
            let member = try MemberName(NotifyContract.member)
            let rule =
                prefix.map { MatchRule(member: member, path: path, argumentPaths: [0: $0]) }
                ?? MatchRule(member: member, path: path)
            var logger = Logger(label: "wormhole.monitor")
            logger.logLevel = .critical
            let connection = try BusConnection(address: address, reconnect: .automatic, logger: logger)
            // On the I/O thread, where the signal was read: its arrival time is taken first.
            let subscription = try connection.subscribe(rule, on: .ioThread) { signal in
                let arrived = Doctor.now()
                guard case .string(let name)? = signal.arguments.first else {
                    // Every receiver drops it (contract §1): say so, it is why nothing arrived.
                    // (A group rule never matches one: arg0path needs a string.)
                    let event = MonitorEvent(malformed: signal, arrived: arrived)
                    writer.writeLine { line in json ? event.appendJSON(to: &line) : event.appendText(to: &line) }
                    counter.delivered()
                    return
                }
                // The daemon also sends names that are prefixes of the rule's path (`group/`).
                if let prefix, !name.hasPrefix(prefix) || name == prefix { return }
                let event = MonitorEvent(name: name, signal: signal, arrived: arrived, root: root)
                writer.writeLine { line in json ? event.appendJSON(to: &line) : event.appendText(to: &line) }
                counter.delivered()
            }
            return (connection, subscription)
        }
        announceReadyAndServe(keeping: (connection, subscription))
    }
}

/// One `Posted` signal, decoded for `wormholectl monitor`.
struct MonitorEvent {
    enum Kind: String {
        case message, defaults, journal, notification
        /// A `Posted` whose first argument is not a string: every receiver drops it.
        case malformed
    }

    var name: String
    var state: UInt64?
    var sender: String
    var arrived: UInt64
    var kind = Kind.notification
    var group: String?
    var directory: String?
    /// The message identifier, or the defaults suite.
    var identifier: String?
    /// The defaults key.
    var key: String?
    /// What the name points to, abbreviated: the stored message or the key's value.
    var preview: String?
    /// Why the file could not be read, when it could not.
    var problem: String?
    /// How old the stored file was when the signal arrived (ns).
    var age: UInt64?

    init(name: String, signal: Signal, arrived: UInt64, root: String?) {
        self.name = name
        if signal.arguments.count > 1, case .uint64(let state) = signal.arguments[1] { self.state = state }
        sender = signal.sender ?? "?"
        self.arrived = arrived
        decode(root: root)
    }

    /// A `Posted` without a string first argument.
    init(malformed signal: Signal, arrived: UInt64) {
        name = ""
        sender = signal.sender ?? "?"
        self.arrived = arrived
        kind = .malformed
        let first = signal.arguments.first.map(\.description) ?? "no argument"
        problem =
            "malformed Posted on \(signal.interface): its first argument is \(first), not a string; every receiver drops it"
    }

    private mutating func decode(root: String?) {
        let parts = name.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, let group = try? GroupIdentifier(parts[0]) else { return }
        let container = root.flatMap { try? GroupContainer(group: group, root: $0) }
        if parts[1] == WormholeDirectoryName.reservedForDefaults, parts.count == 4, (try? SuiteName(parts[2])) != nil {
            kind = .defaults
            self.group = parts[0]
            directory = parts[1]
            identifier = parts[2]
            key = parts[3]
            guard let container else { return }
            readDefaults(container, suite: parts[2], key: parts[3])
            return
        }
        guard (try? WormholeDirectoryName(parts[1])) != nil, (try? MessageIdentifier(parts[2])) != nil else { return }
        if parts.count == 4 {
            guard parts[3] == "journal" else { return }
            kind = .journal
        } else {
            kind = .message
        }
        self.group = parts[0]
        directory = parts[1]
        identifier = parts[2]
        guard kind == .message, let container else { return }
        do {
            guard
                let (data, modified) = try ContainerInspection.read(
                    container, directory: parts[1], file: parts[2] + ".json")
            else {
                problem = "no stored message"
                return
            }
            age = arrived >= modified ? arrived - modified : 0
            if let compacted = Self.compact(data) {
                preview = Self.abbreviated(compacted)
            } else {
                problem = "not JSON: " + (ContainerInspection.jsonProblem(data) ?? "undecodable")
            }
        } catch {
            problem = error.message
        }
    }

    private mutating func readDefaults(_ container: GroupContainer, suite: String, key: String) {
        do {
            guard
                let (data, modified) = try ContainerInspection.read(
                    container, directory: WormholeDirectoryName.reservedForDefaults, file: suite + ".json")
            else {
                problem = "no suite file"
                return
            }
            age = arrived >= modified ? arrived - modified : 0
            let stored: String?
            do throws(WormholeError) {
                stored = try ContainerInspection.suiteValueJSON(data, forKey: key)
            } catch {
                problem = "the suite is not a JSON object"
                return
            }
            guard let value = stored else {
                preview = "(removed)"
                return
            }
            preview = Self.abbreviated(value)
        } catch {
            problem = error.message
        }
    }

    /// The document without insignificant white space, or nil when it is not JSON.
    static func compact(_ data: [UInt8]) -> String? {
        guard let document = try? JSONDocument(data: Data(data)) else { return nil }
        var bytes: [UInt8] = []
        document.appendCompact(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// At most 80 characters, with `…` when cut.
    static func abbreviated(_ text: String) -> String {
        text.count <= 80 ? text : String(text.prefix(79)) + "…"
    }

    /// `HH:MM:SS.uuuuuu` in local time.
    static func clock(_ nanoseconds: UInt64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        func padded(_ value: some BinaryInteger, _ width: Int) -> String {
            let digits = "\(value)"
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return padded(parts.tm_hour, 2) + ":" + padded(parts.tm_min, 2) + ":" + padded(parts.tm_sec, 2) + "."
            + padded((nanoseconds % 1_000_000_000) / 1000, 6)
    }

    func appendText(to line: inout JSONLine) {
        if kind == .malformed {
            line.bytes.append(contentsOf: Array("\(Self.clock(arrived))  \(problem ?? "")  from \(sender)".utf8))
            return
        }
        var text = "\(Self.clock(arrived))  \(name)  state=\(state.map(String.init) ?? "none")  from \(sender)"
        switch kind {
        case .message: text += "  message"
        case .defaults: text += "  defaults \(identifier ?? "")[\(key ?? "")]"
        case .journal: text += "  journal record \(state.map(String.init) ?? "?")"
        case .notification, .malformed: break
        }
        if let preview { text += " " + preview }
        if let problem { text += "  (\(problem))" }
        if let age { text += "  age " + Doctor.age(nanoseconds: age) }
        line.bytes.append(contentsOf: Array(text.utf8))
    }

    func appendJSON(to line: inout JSONLine) {
        line.raw(#"{"time":"#)
        line.number(arrived)
        line.raw(#","name":"#)
        line.string(name)
        line.raw(#","state":"#)
        if let state { line.number(state) } else { line.raw("null") }
        line.raw(#","sender":"#)
        line.string(sender)
        line.raw(#","kind":"#)
        line.string(kind.rawValue)
        for (field, value) in [
            ("group", group), ("directory", directory), (kind == .defaults ? "suite" : "identifier", identifier),
            ("key", key), ("preview", preview), ("problem", problem),
        ] {
            guard let value else { continue }
            line.bytes.append(contentsOf: Array(",\"\(field)\":".utf8))
            line.string(value)
        }
        if let age {
            line.raw(#","ageMicroseconds":"#)
            line.number(age / 1000)
        }
        line.raw("}")
    }
}

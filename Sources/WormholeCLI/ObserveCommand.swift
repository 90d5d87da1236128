import ArgumentParser
import Wormhole
import WormholeDBus

/// `wormholectl observe NAME... | --all [--prefix] [--count N] [--timeout S]` (contract §4).
struct ObserveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "observe",
        abstract: "Print one JSON line per notification posted for the names.",
        discussion: """
            Writes `ready` to standard error once the bus has accepted every match rule, then \
            {"name":"NAME","state":N,"reason":"posted"} per notification ("state":null when the signal \
            carried none). Lines are JSON objects: read the keys you need and ignore the others. \
            When the bus is lost, and when it is back, one line on standard error says so.
            """)

    @Argument(help: "Names to observe (with --prefix: prefixes ending in '/').")
    var names: [String] = []

    @Flag(help: "Observe every name below each prefix.")
    var prefix = false

    @Flag(help: "Observe every post on the bus, whatever its name (one rule on path and member).")
    var all = false

    @OptionGroup var limits: ServingLimits

    @OptionGroup var bus: BusOptions

    func validate() throws {
        if names.isEmpty && !all { throw ValidationError("give at least one name, or --all") }
        if all && (!names.isEmpty || prefix) { throw ValidationError("--all takes no names and no --prefix") }
    }

    func run() throws {
        let counter = limits.start()
        // Each name once: observing a name twice would print every post twice.
        var seen = Set<String>()
        let unique = self.names.filter { seen.insert($0).inserted }
        let names = try withCLIErrors { try unique.map { try NotificationName($0) } }
        if prefix, let bad = names.first(where: { !$0.isPrefix }) {
            throw CLIFailure(message: "prefix '\(bad)' must end with '/'", status: 64)
        }
        let address = try bus.address()
        let writer = LineWriter()
        // A bus that is not there yet is waited for (one line says so), not an error.
        let center = try withCLIErrors {
            try retryingUntilBusReachable(address) { try DarwinNotificationCenter(busAddress: address) }
        }
        // On the I/O thread, where the signal was read: no hop, one write(2) per line, and the
        // count is taken only once the line is written. A catch-up is not a post: the line on
        // standard error says that posts were missed.
        let printLine: @Sendable (String, UInt64?) -> Void = { name, state in
            writer.writeLine { line in
                line.raw(#"{"name":"#)
                line.string(name)
                line.raw(#","state":"#)
                if let state { line.number(state) } else { line.raw("null") }
                line.raw(#","reason":"posted"}"#)
            }
            counter.delivered()
        }
        var subscriptions: [any Sendable] = []
        if all {
            subscriptions.append(try withCLIErrors { try Self.observeEveryPost(on: center.connection, printLine) })
        }
        for name in names {
            let observer = try withCLIErrors {
                let handler: @Sendable (DarwinNotification) -> Void = { note in
                    if note.reason == .posted { printLine(note.name.rawValue, note.state) }
                }
                return prefix
                    ? try center.listen(prefix: name, on: .ioThread, handler: handler)
                    : try center.listen(name: name, on: .ioThread, handler: handler)
            }
            subscriptions.append(observer)
        }
        let reports = BusReports(.observe, address: center.connection.address).watch(center.connection)
        announceReadyAndServe(keeping: (center, subscriptions, reports))
    }

    /// `--all`: one rule on the path and the member, no interface and no name, so every post
    /// on the bus arrives: Wormhole's on their bucket interfaces and hand-typed ones on the
    /// plain interface. A signal is printed as an observer would receive it: a string name,
    /// on the plain interface or the name's own bucket; anything else is dropped.
    static func observeEveryPost(
        on connection: BusConnection, _ printLine: @escaping @Sendable (String, UInt64?) -> Void
    ) throws -> SignalSubscription {
        let rule = MatchRule(
            member: try MemberName(NotifyContract.member), path: try ObjectPath(NotifyContract.objectPath))
        return try connection.subscribe(rule, on: .ioThread) { signal in
            guard case .string(let name)? = signal.arguments.first else { return }
            let interface = signal.interface.rawValue
            guard interface == NotifyContract.plainInterface || interface == NotifyContract.bucketInterface(for: name)
            else { return }
            printLine(name, signal.arguments.count > 1 ? signal.arguments[1].nonNegativeInteger : nil)
        }
    }
}

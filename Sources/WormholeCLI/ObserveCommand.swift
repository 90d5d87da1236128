import ArgumentParser
import Wormhole
import WormholeDBus

/// `wormhole observe NAME... [--prefix] [--count N] [--timeout S]` (contract §4).
struct ObserveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "observe",
        abstract: "Print one JSON line per notification posted for the names.",
        discussion: """
            Writes `ready` to standard error once the bus has accepted every match rule, then \
            {"name":"NAME","state":N} per notification ("state":null when the signal carried none).
            """)

    @Argument(help: "Names to observe (with --prefix: prefixes ending in '/').")
    var names: [String]

    @Flag(help: "Observe every name below each prefix.")
    var prefix = false

    @Option(help: "Exit 0 after this many notifications.")
    var count: Int?

    @Option(help: "Give up after this many seconds: exit 124 if --count was given, 0 if not.")
    var timeout: Double?

    @OptionGroup var bus: BusOptions

    func validate() throws {
        if names.isEmpty { throw ValidationError("give at least one name") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1, not \(count)") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() throws {
        armTimeout(timeout, countGiven: count != nil)
        // Each name once: observing a name twice would print every post twice.
        var seen = Set<String>()
        let unique = self.names.filter { seen.insert($0).inserted }
        let names = try withCLIErrors { try unique.map(NotificationName.init) }
        if prefix, let bad = names.first(where: { !$0.isPrefix }) {
            throw CLIFailure(message: "prefix '\(bad)' must end with '/'", status: 64)
        }
        let address = try bus.address()
        let writer = LineWriter()
        let counter = DeliveryCounter(limit: count)
        // A bus that is not there yet is waited for (one line says so), not an error.
        let center = try withCLIErrors { try retryingUntilBusReachable(address) { try DarwinNotificationCenter(busAddress: address) } }
        var observers: [NotificationObserver] = []
        for name in names {
            let observer = try withCLIErrors {
                // On the I/O thread, where the signal was read: no hop, one write(2) per line,
                // and the count is taken only once the line is written.
                let handler: @Sendable (DarwinNotification) -> Void = { note in
                    guard note.reason == .posted else { return }
                    writer.writeLine { line in
                        line.raw(#"{"name":"#)
                        line.string(note.name.rawValue)
                        line.raw(#","state":"#)
                        if let state = note.state { line.number(state) } else { line.raw("null") }
                        line.raw("}")
                    }
                    counter.delivered()
                }
                return prefix
                    ? try center.addObserver(forPrefix: name, on: .ioThread, handler: handler)
                    : try center.addObserver(for: name, on: .ioThread, handler: handler)
            }
            observers.append(observer)
        }
        announceReadyAndServe(keeping: (center, observers))
    }
}

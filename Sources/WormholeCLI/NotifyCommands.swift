import ArgumentParser
import Dispatch
import Foundation
import Synchronization
import Wormhole
import WormholeDBus

struct PostCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "post", abstract: "Post one Darwin-style notification (like notify_post).")

    @Argument(help: "The notification name (1 to 900 bytes of UTF-8).")
    var name: String

    @Option(help: "A 64-bit state to carry (like notify_set_state).")
    var state: UInt64?

    @OptionGroup var bus: BusOptions

    func run() throws {
        let name = try withCLIErrors { try NotificationName(self.name) }
        let address = try bus.address()
        try withCLIErrors {
            let center = try DarwinNotificationCenter(busAddress: address)
            try center.post(name, state: state)
            center.flush()
        }
    }
}

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
        // Each name once: observing a name twice would print every post twice.
        var seen = Set<String>()
        let unique = self.names.filter { seen.insert($0).inserted }
        let names = try withCLIErrors { try unique.map(NotificationName.init) }
        if prefix, let bad = names.first(where: { !$0.isPrefix }) {
            throw CLIFailure(message: "prefix '\(bad)' must end with '/'", status: 64)
        }
        let address = try bus.address()
        let output = DispatchQueue(label: "wormhole.observe.output")
        let counter = DeliveryCounter(limit: count)
        let center = try withCLIErrors { try DarwinNotificationCenter(busAddress: address) }
        var observers: [NotificationObserver] = []
        for name in names {
            let observer = try withCLIErrors {
                let handler: @Sendable (DarwinNotification) -> Void = { note in
                    guard note.kind == .posted else { return }
                    writeOutput(notificationJSON(note))
                    counter.delivered()
                }
                return prefix
                    ? try center.addObserver(forPrefix: name, queue: output, handler: handler)
                    : try center.addObserver(for: name, queue: output, handler: handler)
            }
            observers.append(observer)
        }
        announceReadyAndServe(keeping: (center, observers), timeout: timeout, countGiven: count != nil)
    }
}

/// `{"name":"NAME","state":N}` with `null` for a missing state.
func notificationJSON(_ note: DarwinNotification) -> String {
    "{\"name\":\(jsonString(note.name)),\"state\":\(note.state.map(String.init) ?? "null")}"
}

/// A JSON string literal for `text`.
func jsonString(_ text: String) -> String {
    let data = try! JSONEncoder().encode(text)
    return String(decoding: data, as: UTF8.self)
}

/// Counts deliveries and exits 0 when the limit is reached.
final class DeliveryCounter: Sendable {
    private let limit: Int?
    private let count = Atomic<Int>(0)

    init(limit: Int?) { self.limit = limit }

    func delivered() {
        let now = count.wrappingAdd(1, ordering: .relaxed).newValue
        if let limit, now >= limit { exit(0) }
    }
}

/// Writes the readiness line (the subscriptions in `keeping` are active), arms the timeout, and
/// serves deliveries until a handler or the timeout exits the process.
func announceReadyAndServe(keeping subscriptions: Any, timeout: Double? = nil, countGiven: Bool = false) -> Never {
    writeError("ready")
    armTimeout(timeout, countGiven: countGiven)
    withExtendedLifetime(subscriptions) { dispatchMain() }
}

/// After `seconds`, exits 124 when a count was asked for and 0 otherwise.
func armTimeout(_ seconds: Double?, countGiven: Bool) {
    guard let seconds else { return }
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
        if countGiven {
            writeError("wormhole: timed out after \(seconds) s before the requested count")
            exit(124)
        }
        exit(0)
    }
}

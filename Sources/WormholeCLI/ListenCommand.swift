import ArgumentParser
import Wormhole
import WormholeDBus

/// `wormhole listen --group G [--directory D] ID... | --all [--stored] [--count N] [--timeout S]` (contract §4).
struct ListenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Print one JSON line per message delivered for the identifiers.",
        discussion: """
            Writes `ready` to standard error once listening, then \
            {"identifier":"ID","message":<the message>} per delivery. A failed delivery (no message, \
            unreadable or undecodable file) is one line on standard error; listening goes on.
            """)

    @Argument(help: "Message identifiers to listen to.")
    var identifiers: [String] = []

    @Option(help: ArgumentHelp(
        "Also listen to the identifiers in this file, one per line ('-': standard input); for thousands.",
        valueName: "file"))
    var identifiersFrom: String?

    @Flag(help: "Listen to every identifier of the wormhole.")
    var all = false

    @Flag(help: "First deliver the messages already stored.")
    var stored = false

    @Option(help: "Exit 0 after this many deliveries.")
    var count: Int?

    @Option(help: "Give up after this many seconds: exit 124 if --count was given, 0 if not.")
    var timeout: Double?

    @OptionGroup var options: WormholeOptions

    @OptionGroup var sizeLimit: SizeLimitOption

    func validate() throws {
        if (identifiers.isEmpty && identifiersFrom == nil) != all {
            throw ValidationError("give identifiers or --all (not both)")
        }
        if let count, count < 1 { throw ValidationError("--count must be at least 1, not \(count)") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() throws {
        armTimeout(timeout, countGiven: count != nil)
        let identifiers = try identifiers + (identifiersFrom.map(readIdentifierList) ?? [])
        let wormhole = try options.wormhole(identifiers: identifiers, maximumMessageSize: sizeLimit.bytes)
        let writer = LineWriter()
        let counter = DeliveryCounter(limit: count)
        // On the I/O thread: the file is read, the line built and written where the signal was
        // read, with no hop; the count is taken only once the line is written.
        let handler: @Sendable (MessageDelivery<JSONDocument>) -> Void = { delivery in
            switch delivery.result {
            case .success(let message):
                writer.writeLine { line in
                    line.raw(#"{"identifier":"#)
                    line.string(delivery.identifier.rawValue)
                    line.raw(#","message":"#)
                    message.appendCompact(to: &line.bytes)
                    line.raw("}")
                }
                counter.delivered()
            case .failure(let error):
                writeError("wormhole: \(delivery.identifier): \(error.message)")
            }
        }
        let address = try options.bus.address()
        // A bus that is not there yet is waited for (one line says so), not an error.
        let listeners = try withCLIErrors { try retryingUntilBusReachable(address) {
            if all {
                return [try wormhole.listenToAllMessages(as: JSONDocument.self, on: .ioThread, handler: handler)]
            }
            return try wormhole.listen(identifiers: identifiers, as: JSONDocument.self, on: .ioThread, handler: handler)
        } }
        // The stored messages come after `ready`, so nothing precedes it on standard error.
        announceReadyAndServe(keeping: (wormhole, listeners)) {
            if stored { for listener in listeners { listener.deliverStoredMessages() } }
        }
    }
}

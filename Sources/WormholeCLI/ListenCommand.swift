// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Wormhole
import WormholeDBus

/// `wormholectl listen --group G [--directory D] ID... | --all [--stored] [--count N] [--timeout S]` (contract §4).
struct ListenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Print one JSON line per message delivered for the identifiers.",
        discussion: """
            Writes `ready` to standard error once listening, then \
            {"identifier":"ID","message":<the message>,"reason":R,"sentAt":T} per delivery: R is \
            posted, stored (--stored), catchUp (changed while the bus was away), transient (sent with \
            send --transient, never stored) or cleared (the mailbox is empty: "message":null); T is the \
            sender's write time in ns since 1970, or null. Lines are JSON objects: read the keys you \
            need and ignore the others. A mailbox is printed again only when its file changed since it \
            was last printed, unless --every-post. A failed delivery (unreadable or undecodable file) \
            is one line on standard error; listening goes on. When the bus cannot be reached, listen \
            still starts: it is woken through the wormhole directory (inotify on ID.json) until the bus \
            can be reached (lines then have "sentAt":null), unless --require-bus. On the bus it watches \
            the wormhole directory too, so a message whose sender died before its signal is printed \
            within about half a second ("reason":"catchUp"), unless --no-catch-unsignalled. When the bus is lost, \
            and when it is back and listening has caught up, one line on standard error says so.
            """)

    @Argument(help: "Message identifiers to listen to.")
    var identifiers: [String] = []

    @Option(
        help: ArgumentHelp(
            "Also listen to the identifiers in this file, one per line ('-': standard input); for thousands.",
            valueName: "file"))
    var identifiersFrom: String?

    @Flag(help: "Listen to every identifier of the wormhole.")
    var all = false

    @Flag(help: "First deliver the messages already stored.")
    var stored = false

    @Flag(help: "Print a message on every post, even when the file is the one printed last.")
    var everyPost = false

    @Flag(
        help: "Without a bus, wait for it before printing ready, instead of listening through the wormhole directory.")
    var requireBus = false

    @Flag(
        help:
            "Do not watch the wormhole directory beside the bus: saves an inotify instance, but a message whose sender died before its signal then waits for the next post."
    )
    var noCatchUnsignalled = false

    @OptionGroup var limits: ServingLimits

    @Flag(help: "Print the records of the identifier's journal, in order (one identifier).")
    var journal = false

    @Option(
        help: "With --journal: a durable consumer name; a later listen with it starts after the last record printed.")
    var consumer: String?

    @Option(help: "With --journal: start, end (the default) or a sequence number (a stored --consumer cursor wins).")
    var from: String?

    @OptionGroup var options: MessageOptions

    func validate() throws {
        if !journal && (consumer != nil || from != nil) {
            throw ValidationError("--consumer and --from need --journal")
        }
        if journal && noCatchUnsignalled {
            throw ValidationError("--no-catch-unsignalled is for mailboxes: a journal reader reads every record anyway")
        }
        if journal && (identifiers.count != 1 || identifiersFrom != nil || all || stored) {
            throw ValidationError("--journal takes exactly one identifier (no --all, --stored or --identifiers-from)")
        }
        if let from, JournalListen.position(from) == nil {
            throw ValidationError("--from must be start, end or a sequence number of at least 1, not '\(from)'")
        }
        if (identifiers.isEmpty && identifiersFrom == nil) != all {
            throw ValidationError("give identifiers or --all (not both)")
        }
    }

    func run() throws {
        if journal {
            try JournalListen(
                identifier: identifiers[0], consumer: consumer, from: from.flatMap(JournalListen.position) ?? .end,
                count: limits.count, timeout: limits.timeout, options: options.wormholeOptions
            ).run()
        }
        let counter = limits.start()
        let identifiers = try identifiers + (identifiersFrom.map(readIdentifierList) ?? [])
        let wormhole = try options.wormhole(identifiers: identifiers)
        let writer = LineWriter()
        // On the I/O thread: the file is read, the line built and written where the signal was
        // read, with no hop; the count is taken only once the line is written.
        // No session bus at all is not an error here unless --require-bus: the directory wakes it.
        let address = try requireBus ? options.bus.address() : options.bus.addressIfAny()
        let reports = BusReports(.listen, address: address)
        let handler: @Sendable (MessageDelivery<JSONDocument>) -> Void = { delivery in
            let message: JSONDocument?
            switch delivery.result {
            case .success(let document): message = document
            case .failure(let error) where error.code == .noMessage: message = nil  // cleared: an event
            case .failure(let error):
                writeError("wormhole: \(delivery.identifier): \(error.message)")
                return
            }
            writer.writeLine { line in
                line.raw(#"{"identifier":"#)
                line.string(delivery.identifier.rawValue)
                line.raw(#","message":"#)
                if let message { message.appendCompact(to: &line.bytes) } else { line.raw("null") }
                switch (message == nil, delivery.reason) {
                case (true, _): line.raw(#","reason":"cleared","sentAt":"#)
                case (false, .posted): line.raw(#","reason":"posted","sentAt":"#)
                case (false, .stored): line.raw(#","reason":"stored","sentAt":"#)
                case (false, .catchUp): line.raw(#","reason":"catchUp","sentAt":"#)
                case (false, .transient): line.raw(#","reason":"transient","sentAt":"#)
                }
                if let sentAt = delivery.sentAt { line.number(sentAt) } else { line.raw("null") }
                line.raw("}")
            }
            if delivery.reason == .catchUp { reports.caughtUpOne() }
            counter.delivered()
        }
        let listenOptions = MessageCenter.ListenOptions(
            deliversEveryPost: everyPost, wakesThroughDirectoryWithoutBus: !requireBus,
            catchesWritesWithoutSignal: !noCatchUnsignalled)
        let listen = {
            if all {
                return [
                    try wormhole.listen(
                        as: JSONDocument.self, on: .ioThread, options: listenOptions, handler: handler)
                ]
            }
            return try wormhole.listen(
                identifiers: try identifiers.map { try MessageIdentifier($0) }, as: JSONDocument.self, on: .ioThread,
                options: listenOptions, handler: handler)
        }
        let listeners: [Subscription]
        let watching: any SubscriptionHandle
        if requireBus {
            // A bus that is not there yet is waited for (one line says so), not an error.
            listeners = try withCLIErrors { try retryingUntilBusReachable(address!, listen) }
            watching = reports.watch(try withCLIErrors { try wormhole.notificationCenter().connection })
        } else {
            // Without a bus the listeners are woken through the directory until it can be reached.
            listeners = try withCLIErrors(listen)
            watching = reports.watch(wormhole)
        }
        // The stored messages come after `ready`, so nothing precedes it on standard error.
        announceReadyAndServe(keeping: (wormhole, listeners, watching)) {
            reports.sayWhereListening(wormhole)
            if stored { for listener in listeners { listener.deliverStoredMessages() } }
        }
    }
}

import ArgumentParser
import Dispatch
import Foundation
import Wormhole
import WormholeDBus

/// `--group` and `--directory`, checked before anything touches the disk or the bus.
struct WormholeOptions: ParsableArguments {
    @Option(help: "The application group identifier, such as group.com.example.lines.")
    var group: String

    @Option(help: "The wormhole directory inside the group container.")
    var directory = "wormhole"

    @OptionGroup var bus: BusOptions

    /// The wormhole, with every name validated first.
    func wormhole(identifiers: [String] = []) throws -> Wormhole {
        try withCLIErrors {
            let wormhole = try Wormhole(
                applicationGroupIdentifier: group, directory: directory, busAddress: bus.busAddress.map(BusAddress.init))
            for identifier in identifiers { _ = try MessageIdentifier(identifier) }
            return wormhole
        }
    }
}

struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Store a JSON message for an identifier and notify listeners.",
        discussion: """
            The message is the JSON argument, or standard input when it is absent; any JSON value, \
            checked before it is stored. Exits 0 once the message is stored, even when the bus is \
            down (a warning says that nobody was notified).
            """)

    @Argument(help: "The message identifier (1 to 200 bytes of A-Z a-z 0-9 . _ -).")
    var identifier: String

    @Argument(help: "The JSON message (default: read standard input).")
    var json: String?

    @OptionGroup var options: WormholeOptions

    func run() throws {
        let wormhole = try options.wormhole(identifiers: [identifier])
        let text = json ?? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        let document = Data(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        let report = try withCLIErrors {
            try wormhole.passMessageData(document, identifier: MessageIdentifier(identifier))
        }
        if let error = report.notificationError {
            writeError("wormhole: warning: message stored, but listeners were not notified: \(error)")
        }
        wormhole.flush()
    }
}

struct ReadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read", abstract: "Print the JSON message stored for an identifier.")

    @Argument(help: "The message identifier.")
    var identifier: String

    @OptionGroup var options: WormholeOptions

    func run() throws {
        let wormhole = try options.wormhole(identifiers: [identifier])
        let data = try withCLIErrors { try wormhole.messageData(identifier: MessageIdentifier(identifier)) }
        guard let data else {
            throw CLIFailure(
                message: "no message is stored for '\(identifier)' in \(wormhole.container.directoryPath(wormhole.directory))")
        }
        guard (try? JSONDocument(data: data)) != nil else {
            throw CLIFailure(
                message: "the file stored for '\(identifier)' (\(data.count) bytes) is not a JSON document; "
                    + "it was not written by a Wormhole sender, or was damaged")
        }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

struct ClearCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear", abstract: "Remove the message of an identifier (or all messages) and notify listeners.")

    @Argument(help: "The message identifier.")
    var identifier: String?

    @Flag(help: "Remove every message of the wormhole.")
    var all = false

    @OptionGroup var options: WormholeOptions

    func validate() throws {
        if (identifier == nil) == !all { throw ValidationError("give an identifier or --all (not both)") }
    }

    func run() throws {
        let wormhole = try options.wormhole(identifiers: identifier.map { [$0] } ?? [])
        let reports = try withCLIErrors {
            if let identifier { return [try wormhole.clearMessage(identifier: identifier)] }
            return try wormhole.clearAllMessages()
        }
        if let error = reports.compactMap(\.notificationError).first {
            writeError("wormhole: warning: cleared, but listeners were not notified: \(error)")
        }
        wormhole.flush()
    }
}

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

    @Flag(help: "Listen to every identifier of the wormhole.")
    var all = false

    @Flag(help: "First deliver the messages already stored.")
    var stored = false

    @Option(help: "Exit 0 after this many deliveries.")
    var count: Int?

    @Option(help: "Give up after this many seconds: exit 124 if --count was given, 0 if not.")
    var timeout: Double?

    @OptionGroup var options: WormholeOptions

    func validate() throws {
        if identifiers.isEmpty != all { throw ValidationError("give identifiers or --all (not both)") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1, not \(count)") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() throws {
        let wormhole = try options.wormhole(identifiers: identifiers)
        let output = DispatchQueue(label: "wormhole.listen.output")
        let counter = DeliveryCounter(limit: count)
        let listenOptions = Wormhole.ListenOptions(deliversStoredMessageOnStart: stored)
        let handler: @Sendable (MessageDelivery<JSONDocument>) -> Void = { delivery in
            switch delivery.result {
            case .success(let message):
                writeOutput("{\"identifier\":\(jsonString(delivery.identifier.rawValue)),\"message\":\(message.compactText)}")
                counter.delivered()
            case .failure(let error):
                writeError("wormhole: \(delivery.identifier): \(error.message)")
            }
        }
        let listeners = try withCLIErrors {
            if all {
                return [try wormhole.listenToAllMessages(as: JSONDocument.self, queue: output, options: listenOptions, handler: handler)]
            }
            return try identifiers.map {
                try wormhole.listen(identifier: $0, as: JSONDocument.self, queue: output, options: listenOptions, handler: handler)
            }
        }
        announceReadyAndServe(keeping: (wormhole, listeners), timeout: timeout, countGiven: count != nil)
    }
}


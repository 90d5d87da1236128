import ArgumentParser
import Foundation
import Wormhole
import WormholeDBus

/// `wormhole send --group G [--directory D] ID [JSON]` (contract §4).
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

    @Flag(help: "Append a record to the identifier's journal instead of replacing its mailbox.")
    var journal = false

    @OptionGroup var options: WormholeOptions

    func run() throws {
        if journal { return try JournalSend(identifier: identifier, json: json, options: options).run() }
        let wormhole = try options.wormhole(identifiers: [identifier])
        let text = json ?? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        let bytes = Data(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        let report = try withCLIErrors {
            let document: JSONDocument
            do {
                document = try JSONDocument(data: bytes)
            } catch let error as WormholeError {
                throw WormholeError(
                    .invalidJSON, value: identifier, "message for '\(identifier)' is \(error.message)")
            }
            return try wormhole.passMessage(document, identifier: identifier)
        }
        if let error = report.notificationError {
            writeError("wormhole: warning: message stored, but listeners were not notified: \(error)")
        }
        wormhole.flush()
    }
}

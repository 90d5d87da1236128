// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus

/// `wormholectl send [--journal | --transient] --group G [--directory D] ID [JSON]` (contract §4, §6, §7).
struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Store a JSON message for an identifier and notify listeners.",
        discussion: """
            The message is the JSON argument, or standard input when it is absent; any JSON value, \
            checked before it is stored. Exits 0 once the message is stored, even when the bus is \
            down (a warning says that nobody was notified).

            With --transient the message is not stored: it travels in the notification itself \
            (at most 65536 bytes of compact JSON) to the listeners running now. Exits 0 once it \
            is sent; 1 when the bus cannot be reached, since nothing is kept to deliver later.

            With --journal the message is appended to the identifier's journal (every message \
            kept, in order) instead of replacing its mailbox; exits 0 once appended.
            """)

    @Argument(help: "The message identifier (1 to 200 bytes of A-Z a-z 0-9 . _ -).")
    var identifier: String

    @Argument(help: "The JSON message (default: read standard input).")
    var json: String?

    @Flag(help: "Append a record to the identifier's journal instead of replacing its mailbox.")
    var journal = false

    @Flag(help: "Send in the notification only, to running listeners; nothing is stored (at most 64 KiB).")
    var transient = false

    @OptionGroup var options: MessageOptions

    func validate() throws {
        if journal && transient {
            throw ValidationError(
                "--journal and --transient exclude each other: a journal record is stored, a transient message is not")
        }
    }

    func run() throws {
        OneShot.arm(
            "the transient message for '\(identifier)'",
            done: transient ? nil : journal ? "record appended" : "message stored")
        if journal {
            return try JournalSend(identifier: identifier, json: json, options: options.wormholeOptions).run()
        }
        let wormhole = try options.wormhole(identifiers: [identifier])
        // Read into one buffer and trimmed in place: passing a document costs about its size.
        var bytes =
            try json.map { Data($0.utf8) }
            ?? readStandardInput(limit: options.maximumMessageSize, identifier: identifier)
        trimJSONWhitespace(&bytes)
        let report: MessageCenter.SendReport? = try withCLIErrors {
            let document: JSONDocument
            do {
                document = try JSONDocument(data: bytes)
            } catch let error as WormholeError {
                throw WormholeError(
                    .invalidJSON, value: identifier,
                    "message for '\(identifier)' is \(error.message)" + bareWordHint(json))
            }
            if transient {
                try sendTransient(document, through: wormhole)
                return nil
            }
            return try wormhole.passMessage(document, identifier: MessageIdentifier(identifier))
        }
        if let error = report?.notificationError {
            writeError(
                "wormhole: warning: message stored, but listeners were not notified on the bus (listeners without a bus see the file): \(error)"
            )
        }
        if transient {
            if let error = wormhole.flush(timeout: OneShot.flushTimeout) {
                throw CLIFailure(message: "the transient message for '\(identifier)' may not have been sent: \(error)")
            }
            return
        }
        OneShot.confirm("message stored", alreadyReported: report?.notificationError != nil) {
            wormhole.flush(timeout: $0)
        }
    }

    /// Emits the transient message and flushes it to the bus: it is not stored, so a bus that
    /// cannot be reached is a failure (exit 1), not a warning.
    private func sendTransient(_ document: JSONDocument, through wormhole: MessageCenter) throws {
        do {
            try wormhole.passTransientMessage(document, identifier: MessageIdentifier(identifier))
        } catch let error as BusError {
            throw CLIFailure(
                message: "cannot send transient message for '\(identifier)': \(error.message) "
                    + "(a transient message is not stored, so nothing will be delivered)")
        }
    }
}

/// Removes JSON white space (space, tab, line feed, carriage return) from both ends of `data`,
/// in place.
private func trimJSONWhitespace(_ data: inout Data) {
    func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
    var end = data.count
    var start = 0
    data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
        while end > 0 && isSpace(buffer[end - 1]) { end -= 1 }
        while start < end && isSpace(buffer[start]) { start += 1 }
    }
    data.count = end
    if start > 0 { data.removeSubrange(0..<start) }
}

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

    @OptionGroup var options: WormholeOptions

    @OptionGroup var sizeLimit: SizeLimitOption

    func run() throws {
        let wormhole = try options.wormhole(identifiers: [identifier], maximumMessageSize: sizeLimit.bytes)
        // Read into one buffer and trimmed in place: passing a document costs about its size.
        var bytes = try json.map { Data($0.utf8) } ?? readStandardInput(limit: sizeLimit.bytes, identifier: identifier)
        trimJSONWhitespace(&bytes)
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

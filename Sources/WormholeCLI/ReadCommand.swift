// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus

/// `wormholectl read --group G [--directory D] ID` (contract §4).
struct ReadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read", abstract: "Print the JSON message stored for an identifier.")

    @Argument(help: "The message identifier.")
    var identifier: String

    @OptionGroup var options: MessageOptions

    func run() throws {
        let wormhole = try options.wormhole(identifiers: [identifier])
        let data = try withCLIErrors { try wormhole.messageData(identifier: MessageIdentifier(identifier)) }
        guard let data else {
            // Which part is missing (container, directory, or just this identifier), and the
            // nearest name that exists: most "no message" reports are a typo.
            let why = absence(in: wormhole, identifier: identifier).map { ": " + $0 } ?? ""
            throw CLIFailure(
                message:
                    "no message is stored for '\(identifier)' in \(wormhole.container.directoryPath(wormhole.directory))"
                    + why)
        }
        guard (try? JSONDocument(data: data)) != nil else {
            throw CLIFailure(
                message: "the file stored for '\(identifier)' (\(data.count) bytes) is not a JSON document; "
                    + "it was not written by a Wormhole sender, or was damaged")
        }
        // One line: the document, and a newline unless it already ends with one (written
        // apart, so the document is never copied).
        LineWriter.writeAll(
            STDOUT_FILENO, data.last == UInt8(ascii: "\n") ? Array(data) : Array(data) + [UInt8(ascii: "\n")])
    }
}

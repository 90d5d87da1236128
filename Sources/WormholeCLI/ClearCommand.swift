import ArgumentParser
import Wormhole
import WormholeDBus

/// `wormholectl clear --group G [--directory D] ID | --all`.
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
        OneShot.arm("the clear", done: "cleared")
        let wormhole = try options.wormhole(identifiers: identifier.map { [$0] } ?? [])
        let reports = try withCLIErrors {
            if let identifier { return [try wormhole.clearMessage(identifier: MessageIdentifier(identifier))] }
            return try wormhole.clearAllMessages()
        }
        let failure = reports.compactMap(\.notificationError).first
        if let error = failure {
            writeError(
                "wormhole: warning: cleared, but listeners were not notified on the bus (listeners without a bus see the file): \(error)"
            )
        }
        OneShot.confirm("cleared", alreadyReported: failure != nil) { wormhole.flush(timeout: $0) }
    }
}

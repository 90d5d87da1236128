import ArgumentParser
import Foundation

/// The echo side of the message ping-pong (run by the bench): answers each `ping` message with
/// the same payload as `pong` (stored, or with `--transient` carried in the signal); exits on
/// sequence number 2^64-1.
struct BenchMessageEchoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-message-echo", shouldDisplay: false)

    @Option var group: String
    @Option var root: String
    @Flag var transient = false
    /// With `--transient`: forward raw JSON documents (no encoder or decoder).
    @Flag var raw = false
    @OptionGroup var bus: BusOptions

    func run() throws {
        let mailbox = try LibraryAPI.mailbox(group: group, root: root, address: try bus.required())
        if raw {
            let listener = try LibraryAPI.listenDocument(mailbox, identifier: "ping") { document in
                if LibraryAPI.sequence(of: document) == UInt64.max { Foundation.exit(0) }
                try? LibraryAPI.sendTransient(mailbox, document, identifier: "pong")
            }
            HelperProcess.announceReadyAndServe(keeping: (mailbox, listener))
        }
        let listener = try LibraryAPI.listen(mailbox, identifier: "ping") { payload in
            if payload.seq == UInt64.max { Foundation.exit(0) }
            if transient {
                try? LibraryAPI.sendTransient(mailbox, payload, identifier: "pong")
            } else {
                try? LibraryAPI.send(mailbox, payload, identifier: "pong")
            }
        }
        HelperProcess.announceReadyAndServe(keeping: (mailbox, listener))
    }
}

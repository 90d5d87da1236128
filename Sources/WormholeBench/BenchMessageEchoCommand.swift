import ArgumentParser
import Foundation

/// The echo side of the message ping-pong (run by the bench): answers each `ping` message with
/// the same payload as `pong`; exits on sequence number 2^64-1. With `--raw`, listens to
/// `rawping` as raw documents and stores each one, as it came, as `rawpong` (no codec).
struct BenchMessageEchoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-message-echo", shouldDisplay: false)

    @Option var group: String
    @Option var root: String
    @Flag var raw = false
    @OptionGroup var bus: BusOptions

    func run() throws {
        let mailbox = try LibraryAPI.mailbox(group: group, root: root, address: try bus.required())
        if raw {
            let listener = try LibraryAPI.listenRaw(mailbox, identifier: MessageSession.rawPing) { document in
                try? LibraryAPI.sendRaw(mailbox, document, identifier: MessageSession.rawPong)
            }
            HelperProcess.announceReadyAndServe(keeping: (mailbox, listener))
        }
        let listener = try LibraryAPI.listen(mailbox, identifier: "ping") { payload in
            if payload.seq == UInt64.max { Foundation.exit(0) }
            try? LibraryAPI.send(mailbox, payload, identifier: "pong")
        }
        HelperProcess.announceReadyAndServe(keeping: (mailbox, listener))
    }
}

import ArgumentParser
import Wormhole
import WormholeDBus

/// `wormhole post NAME [--state N]`.
struct PostCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "post", abstract: "Post one Darwin-style notification (like notify_post).")

    @Argument(help: "The notification name (1 to 900 bytes of UTF-8).")
    var name: String

    @Option(help: "A 64-bit state to carry (like notify_set_state).")
    var state: UInt64?

    @OptionGroup var bus: BusOptions

    func run() throws {
        let name = try withCLIErrors { try NotificationName(self.name) }
        let address = try bus.address()
        try withCLIErrors {
            let center = try DarwinNotificationCenter(busAddress: address)
            try center.post(name, state: state)
            center.flush()
        }
    }
}

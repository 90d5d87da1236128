import ArgumentParser
import Wormhole
import WormholeDBus

/// `wormholectl post NAME [--state N]`.
struct PostCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "post", abstract: "Post one Darwin-style notification (like notify_post).")

    @Argument(help: "The notification name (1 to 900 bytes of UTF-8).")
    var name: String

    // Read as text, so that `--state -1` is this option's value (and refused as negative), not
    // an unknown option.
    @Option(
        parsing: .unconditional, help: ArgumentHelp("A 64-bit state to carry (like notify_set_state).", valueName: "n"))
    var state: String?

    func validate() throws {
        if let state, UInt64(state) == nil {
            let why =
                state.hasPrefix("-") && Int64(state) != nil
                ? "must be 0 or more" : "must be an integer from 0 to 2^64-1"
            throw ValidationError("--state \(why), not '\(state)'")
        }
    }

    @OptionGroup var bus: BusOptions

    func run() throws {
        let name = try withCLIErrors { try NotificationName(self.name) }
        let address = try bus.address()
        OneShot.arm("the post of '\(name)'", done: nil)
        try withCLIErrors {
            let center = try DarwinNotificationCenter(busAddress: address)
            try center.post(name, state: state.flatMap { UInt64($0) })
            // Accepted by the connection (a post that was not sent threw, and rang nobody), so an
            // observer may have it: what the bus did not confirm in time is "not confirmed".
            if let error = center.flush(timeout: OneShot.flushTimeout) {
                throw CLIFailure(message: "the post of '\(name)' was not confirmed: \(error)")
            }
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import Wormhole

/// The echo side of the notification ping-pong (run by the bench): answers each ping with a
/// pong carrying the same state; exits on state 2^64-1.
struct BenchEchoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-echo", shouldDisplay: false)

    @Option var ping: String
    @Option var pong: String
    @Option var delivery: LibraryAPI.Delivery = .ioThread
    @Option var wake: LibraryAPI.Wake = .busOnly
    @OptionGroup var bus: BusOptions

    func run() throws {
        let center = try LibraryAPI.center(address: try bus.required(), wake: wake)
        let ping = try NotificationName(self.ping)
        let pong = try NotificationName(self.pong)
        let observer = try LibraryAPI.observe(center, ping, on: delivery) { state in
            guard let state else { return }
            if state == UInt64.max { Foundation.exit(0) }
            try? center.post(pong, state: state)
        }
        HelperProcess.announceReadyAndServe(keeping: observer)
    }
}

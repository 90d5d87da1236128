// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Wormhole

/// Observes many names, to load the bus daemon's match-rule tables (run by the bench).
struct BenchLoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-load", shouldDisplay: false)

    @Option var names: Int
    @OptionGroup var bus: BusOptions

    func run() throws {
        let center = try DarwinNotificationCenter(busAddress: try bus.required())
        var observers: [Subscription] = []
        for index in 0..<names {
            let name = try NotificationName("org.wormhole.bench.load.name\(index)")
            observers.append(try LibraryAPI.observe(center, name, on: .ioThread) { _ in })
        }
        HelperProcess.announceReadyAndServe(keeping: (center, observers))
    }
}

// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Wormhole
import WormholeDBus

/// `--group` and `--directory`, checked before anything touches the disk or the bus.
struct WormholeOptions: ParsableArguments {
    @Option(help: "The application group identifier, such as group.com.example.lines.")
    var group: String

    @Option(help: "The wormhole directory inside the group container.")
    var directory = "wormhole"

    @OptionGroup var bus: BusOptions

    /// The wormhole, with every name validated first.
    func wormhole(
        identifiers: [String] = [], maximumMessageSize: Int = FileTransiting.defaultMaximumMessageSize
    ) throws -> MessageCenter {
        try withCLIErrors {
            let wormhole = try MessageCenter(
                applicationGroupIdentifier: GroupIdentifier(group), directory: WormholeDirectoryName(directory),
                busAddress: bus.busAddress.map(BusAddress.init),
                maximumMessageSize: maximumMessageSize)
            for identifier in identifiers { _ = try MessageIdentifier(identifier) }
            return wormhole
        }
    }
}

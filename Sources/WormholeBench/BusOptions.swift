// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import WormholeDBus

/// `--bus-address`, taken by the bench and its helpers.
struct BusOptions: ParsableArguments {
    @Option(name: .customLong("bus-address"), help: "The D-Bus address to use (default: a private dbus-daemon).")
    var busAddress: String?

    /// The given address, checked.
    func address() throws -> BusAddress? {
        guard let busAddress else { return nil }
        do {
            return try BusAddress(busAddress)
        } catch let error as BusError {
            throw BenchFailure(error.message, status: 64)
        }
    }
}

extension BusOptions {
    /// The address a helper process was given (the bench always passes one).
    func required() throws -> BusAddress {
        guard let address = try address() else { throw BenchFailure("--bus-address is required", status: 64) }
        return address
    }
}

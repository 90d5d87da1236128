// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus

/// `--bus-address`, taken by every command.
struct BusOptions: ParsableArguments {
    @Option(name: .customLong("bus-address"), help: "The D-Bus address to use (default: DBUS_SESSION_BUS_ADDRESS).")
    var busAddress: String?

    @OptionGroup var log: LogOptions

    /// The address, checked; the session bus when none was given; `nil` when none was given and
    /// there is no session bus (`DBUS_SESSION_BUS_ADDRESS` unset or empty).
    func addressIfAny() throws -> BusAddress? {
        if busAddress == nil && (ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? "").isEmpty {
            return nil
        }
        return try address()
    }

    /// The address, checked; the session bus when none was given.
    func address() throws -> BusAddress {
        do {
            if let busAddress { return try BusAddress(busAddress) }
            return try BusAddress.session()
        } catch let error as BusError {
            throw CLIFailure(message: error.message, status: error.code == .invalidAddress ? 64 : 1)
        }
    }
}

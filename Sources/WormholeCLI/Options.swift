import ArgumentParser
import Wormhole
import WormholeDBus

/// `--bus-address`, taken by every command.
struct BusOptions: ParsableArguments {
    @Option(name: .customLong("bus-address"), help: "The D-Bus address to use (default: DBUS_SESSION_BUS_ADDRESS).")
    var busAddress: String?

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

/// Turns a library error into a CLI failure: validation errors are usage errors (64).
func cliFailure(_ error: any Error) -> CLIFailure {
    if let error = error as? WormholeError {
        switch error.code {
        case .invalidName, .invalidGroup, .invalidDirectory, .invalidIdentifier, .invalidJSON:
            return CLIFailure(message: error.message, status: 64)
        default:
            return CLIFailure(message: error.message)
        }
    }
    if let error = error as? BusError {
        return CLIFailure(message: error.message, status: error.code == .invalidAddress ? 64 : 1)
    }
    if let error = error as? CLIFailure { return error }
    return CLIFailure(message: "\(error)")
}

/// Runs `body`, mapping library errors to CLI failures.
func withCLIErrors<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw cliFailure(error) }
}

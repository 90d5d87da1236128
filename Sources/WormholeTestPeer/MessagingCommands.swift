import Foundation
import Wormhole
import WormholeDBus

/// Commands that exercise wormhole messaging from another process:
///
/// - `send-many ROOT GROUP IDENTIFIER COUNT BUS`: passes `{"n":0}` … `{"n":COUNT-1}` to IDENTIFIER
///   as fast as it can, through `MessageCenter.passMessage` (container root ROOT, default directory, bus
///   address BUS), flushes and exits; fails when a notification could not be sent. The shared
///   notification table lives under `$XDG_RUNTIME_DIR/wormhole`: tests give the peer a fresh one.
let messagingCommands: [String: @Sendable ([String]) throws -> Void] = [
    "send-many": sendMany
]

private func sendMany(_ arguments: [String]) throws {
    guard arguments.count == 5, let count = Int(arguments[3]), count >= 0 else {
        throw PeerError("send-many ROOT GROUP IDENTIFIER COUNT BUS")
    }
    let wormhole = try MessageCenter(
        applicationGroupIdentifier: arguments[1], containerRoot: arguments[0], busAddress: BusAddress(arguments[4]))
    for n in 0..<count {
        let report = try wormhole.passMessage(["n": n], identifier: arguments[2])
        if let error = report.notificationError {
            throw MessagingCommandError(description: "message \(n) was stored but not posted: \(error)")
        }
    }
    wormhole.flush()
}

struct MessagingCommandError: Error, CustomStringConvertible {
    var description: String
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Wormhole
import WormholeDBus

/// Commands that exercise wormhole messaging from another process:
///
/// - `send-many ROOT GROUP IDENTIFIER COUNT BUS [TAG]`: passes `{"n":0}` … `{"n":COUNT-1}` to
///   IDENTIFIER as fast as it can, through `MessageCenter.passMessage` (container root ROOT, default
///   directory, bus address BUS), flushes and exits; fails when a notification could not be sent.
///   With TAG, the messages are `{"n":N,"w":"TAG"}` (distinct between writers). The shared
///   notification table lives under `$XDG_RUNTIME_DIR/wormhole`: tests give the peer a fresh one.
/// - `store-many ROOT GROUP IDENTIFIER COUNT BUS`: as `send-many`, but a notification that could
///   not be sent (no bus) is not a failure: for listeners woken through the directory.
/// - `send-transient-many ROOT GROUP IDENTIFIER COUNT BUS`: sends `{"n":0}` … `{"n":COUNT-1}` as
///   transient messages (`passTransientMessage`), flushes and exits.
let messagingCommands: [String: @Sendable ([String]) throws -> Void] = [
    "send-many": { try sendMany($0, requireBus: true) },
    "store-many": { try sendMany($0, requireBus: false) },
    "send-transient-many": sendTransientMany,
]

private struct Tagged: Encodable {
    var n: Int
    var w: String
}

private func sendMany(_ arguments: [String], requireBus: Bool) throws {
    guard arguments.count == 5 || arguments.count == 6, let count = Int(arguments[3]), count >= 0 else {
        throw PeerError("send-many ROOT GROUP IDENTIFIER COUNT BUS [TAG]")
    }
    let wormhole = try MessageCenter(
        applicationGroupIdentifier: GroupIdentifier(arguments[1]), containerRoot: arguments[0],
        busAddress: BusAddress(arguments[4]))
    let tag = arguments.count == 6 ? arguments[5] : nil
    for n in 0..<count {
        let report =
            if let tag {
                try wormhole.passMessage(Tagged(n: n, w: tag), identifier: MessageIdentifier(arguments[2]))
            } else {
                try wormhole.passMessage(["n": n], identifier: MessageIdentifier(arguments[2]))
            }
        if requireBus, let error = report.notificationError {
            throw MessagingCommandError(description: "message \(n) was stored but not posted: \(error)")
        }
    }
    wormhole.flush()
}

private func sendTransientMany(_ arguments: [String]) throws {
    guard arguments.count == 5, let count = Int(arguments[3]), count >= 0 else {
        throw PeerError("send-transient-many ROOT GROUP IDENTIFIER COUNT BUS")
    }
    let wormhole = try MessageCenter(
        applicationGroupIdentifier: GroupIdentifier(arguments[1]), containerRoot: arguments[0],
        busAddress: BusAddress(arguments[4]))
    for n in 0..<count {
        try wormhole.passTransientMessage(["n": n], identifier: MessageIdentifier(arguments[2]))
    }
    wormhole.flush()
}

struct MessagingCommandError: Error, CustomStringConvertible {
    var description: String
}

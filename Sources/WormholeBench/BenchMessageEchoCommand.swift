// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation

/// How the two sides of a message ping-pong send and receive (`_bench-message-echo --mode`).
enum MessageMode: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// Codable payloads stored in the mailbox (JSONEncoder/JSONDecoder, a file per message).
    case mailbox
    /// Raw `JSONDocument`s stored in the mailbox (checked, no encoder or decoder).
    case raw
    /// Codable payloads as transient messages (carried in the signal, nothing stored).
    case transient
    /// Raw `JSONDocument`s as transient messages (no encoder or decoder, nothing stored).
    case transientRaw = "transient-raw"
    /// Raw `JSONDocument`s stored in the mailbox with no bus to reach: both sides are woken
    /// through the directory watch (inotify), each send's post fails fast.
    case directory
    /// Raw `JSONDocument`s stored in the mailbox, listened to on the bus alone: no watch on the
    /// wormhole directory beside the bus (`catchesWritesWithoutSignal: false`), so the row
    /// against `raw` is what that default watch costs per message.
    case rawBusOnly = "raw-bus-only"

    /// Whether payloads travel in the signal (nothing stored).
    var isTransient: Bool { self == .transient || self == .transientRaw }
    /// Whether payloads are raw documents (no codec).
    var isRaw: Bool { self == .raw || self == .transientRaw || self == .directory || self == .rawBusOnly }
    /// Whether listeners keep the default watch on the wormhole directory beside the bus.
    var watchesBesideBus: Bool { self != .rawBusOnly }
}

/// The echo side of the message ping-pong (run by the bench): answers each `ping` message with
/// the same payload as `pong`, in the way `--mode` names (stored or transient, Codable or raw
/// `JSONDocument` forwarded as it came); exits on sequence number 2^64-1.
struct BenchMessageEchoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-message-echo", shouldDisplay: false)

    @Option var group: String
    @Option var root: String
    @Option var mode: MessageMode = .mailbox
    @OptionGroup var bus: BusOptions

    func run() throws {
        let mailbox = try LibraryAPI.mailbox(group: group, root: root, address: try bus.required())
        let transient = mode.isTransient
        if mode.isRaw {
            let listener = try LibraryAPI.listenDocument(
                mailbox, identifier: "ping", watchBesideBus: mode.watchesBesideBus
            ) { document in
                if LibraryAPI.sequence(of: document) == UInt64.max { Foundation.exit(0) }
                if transient {
                    try? LibraryAPI.sendTransient(mailbox, document, identifier: "pong")
                } else {
                    try? LibraryAPI.send(mailbox, document, identifier: "pong")
                }
            }
            HelperProcess.announceReadyAndServe(keeping: (mailbox, listener))
        }
        let listener = try LibraryAPI.listen(mailbox, identifier: "ping") { payload in
            if payload.seq == UInt64.max { Foundation.exit(0) }
            if transient {
                try? LibraryAPI.sendTransient(mailbox, payload, identifier: "pong")
            } else {
                try? LibraryAPI.send(mailbox, payload, identifier: "pong")
            }
        }
        HelperProcess.announceReadyAndServe(keeping: (mailbox, listener))
    }
}

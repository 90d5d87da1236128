// SPDX-License-Identifier: Apache-2.0
import Foundation
import Histogram
import Wormhole
import WormholeDBus

/// Our side of the message ping-pong: this process sends `ping` and listens to `pong` through a
/// wormhole; a `_bench-message-echo` process listens to `ping` and answers with the same payload.
/// The `mode` says how: stored or transient (in the signal, nothing stored), Codable payloads or
/// raw `JSONDocument`s (no encoder or decoder).
final class MessageSession {
    private let echo: ChildProcess
    private let mailbox: LibraryAPI.Mailbox
    private let size: Int
    private let mode: MessageMode
    private var sequence: UInt64 = 0

    init(address: BusAddress, root: String, size: Int, mode: MessageMode = .mailbox) throws {
        // A group per mode: sessions of several modes run side by side.
        let group = "group.org.wormhole.bench." + mode.rawValue
        // No bus: an address where nothing listens (connecting fails at once, as without a session bus).
        let address = mode == .directory ? try BusAddress("unix:path=\(root)/no-bus-here") : address
        echo = try .echo("_bench-message-echo", ["--mode", mode.rawValue], group: group, root: root, address: address)
        mailbox = try LibraryAPI.mailbox(group: group, root: root, address: address)
        self.size = size
        self.mode = mode
    }

    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (mailbox, pad, transient) = (self.mailbox, BenchPayload.pad(size: size), mode.isTransient)
        if mode.isRaw {
            let bytes = Array(pad.utf8)
            let sendRaw: @Sendable (UInt64) throws -> Void = { sequence in
                let document = try LibraryAPI.document(seq: sequence, pad: bytes)
                if transient {
                    try LibraryAPI.sendTransient(mailbox, document, identifier: "ping")
                } else {
                    try LibraryAPI.send(mailbox, document, identifier: "ping")
                }
            }
            let listener = try LibraryAPI.listenDocument(
                mailbox, identifier: "pong", watchBesideBus: mode.watchesBesideBus
            ) { document in
                guard let sequence = LibraryAPI.sequence(of: document), let next = driver.received(sequence) else {
                    return
                }
                try? sendRaw(next)
            }
            defer { listener.cancel() }
            return try driver.run(sendFirst: sendRaw)
        }
        let send: @Sendable (UInt64) throws -> Void = { sequence in
            let payload = BenchPayload(seq: sequence, pad: pad)
            if transient {
                try LibraryAPI.sendTransient(mailbox, payload, identifier: "ping")
            } else {
                try LibraryAPI.send(mailbox, payload, identifier: "ping")
            }
        }
        let listener = try LibraryAPI.listen(mailbox, identifier: "pong") { payload in
            guard let next = driver.received(payload.seq) else { return }
            try? send(next)
        }
        defer { listener.cancel() }
        return try driver.run(sendFirst: send)
    }

    /// Stops the echo process (it writes into the container root: stop it before removing that).
    func stop() {
        echo.terminate()
    }

    deinit {
        stop()
    }
}

/// The codec's own cost on the Codable message path: one hop encodes the payload (sender) and
/// decodes it (receiver); timed here in one process, nothing else.
enum CodecCost {
    static func run(count: Int, warmup: Int, size: Int) throws -> Histogram<UInt64> {
        var histogram = BenchRow.makeHistogram()
        let pad = BenchPayload.pad(size: size)
        for index in 0..<(warmup + count) {
            let start = MonotonicClock.now()
            let decoded = try LibraryAPI.codecRoundTrip(BenchPayload(seq: UInt64(index), pad: pad))
            let elapsed = MonotonicClock.now() - start
            guard decoded.seq == UInt64(index) else { throw BenchFailure("codec round trip changed the payload") }
            if index >= warmup { histogram.record(elapsed) }
        }
        return histogram
    }
}

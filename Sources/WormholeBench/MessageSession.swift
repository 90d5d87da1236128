import Foundation
import Histogram
import Wormhole
import WormholeDBus

/// Our side of the message ping-pong: this process sends `ping` and listens to `pong` through a
/// wormhole; a `_bench-message-echo` process listens to `ping` and answers with the same payload.
/// With `raw`, both sides pass raw documents (`JSONDocument`, no Codable) as `rawping`/`rawpong`.
final class MessageSession {
    static let rawPing = "rawping"
    static let rawPong = "rawpong"

    private let echo: ChildProcess
    private let mailbox: LibraryAPI.Mailbox
    private let size: Int
    private let raw: Bool
    private var sequence: UInt64 = 0

    init(address: BusAddress, root: String, size: Int, raw: Bool = false) throws {
        let group = "group.org.wormhole.bench"
        echo = try ChildProcess(
            executable: Executables.current,
            arguments: [
                "_bench-message-echo", "--group", group, "--root", root, "--bus-address", address.rawValue,
            ] + (raw ? ["--raw"] : []))
        try echo.waitForReady()
        mailbox = try LibraryAPI.mailbox(group: group, root: root, address: address)
        self.size = size
        self.raw = raw
    }

    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (mailbox, pad) = (self.mailbox, BenchPayload.pad(size: size))
        if raw {
            let bytes = Array(pad.utf8)
            let listener = try LibraryAPI.listenRaw(mailbox, identifier: Self.rawPong) { document in
                guard let seq = LibraryAPI.rawSequence(document), let next = driver.received(seq) else { return }
                if let ping = try? LibraryAPI.rawDocument(seq: next, pad: bytes) {
                    try? LibraryAPI.sendRaw(mailbox, ping, identifier: Self.rawPing)
                }
            }
            defer { listener.cancel() }
            return try driver.run {
                try LibraryAPI.sendRaw(mailbox, try LibraryAPI.rawDocument(seq: $0, pad: bytes), identifier: Self.rawPing)
            }
        }
        let listener = try LibraryAPI.listen(mailbox, identifier: "pong") { payload in
            guard let next = driver.received(payload.seq) else { return }
            try? LibraryAPI.send(mailbox, BenchPayload(seq: next, pad: pad), identifier: "ping")
        }
        defer { listener.cancel() }
        return try driver.run { try LibraryAPI.send(mailbox, BenchPayload(seq: $0, pad: pad), identifier: "ping") }
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

import Histogram
import Wormhole
import WormholeDBus

/// Our side of the message ping-pong: this process sends `ping` and listens to `pong` through a
/// wormhole; a `_bench-message-echo` process listens to `ping` and answers with the same payload.
/// With `transient`, both sides send transient messages (in the signal, nothing stored).
final class MessageSession {
    private let echo: ChildProcess
    private let mailbox: LibraryAPI.Mailbox
    private let size: Int
    private let transient: Bool
    private let raw: Bool
    private var sequence: UInt64 = 0

    /// With `raw` (and `transient`), both sides send and receive `JSONDocument`s: no encoder or decoder.
    init(address: BusAddress, root: String, size: Int, transient: Bool = false, raw: Bool = false) throws {
        // Its own group: mailbox and transient sessions may run side by side.
        let group = "group.org.wormhole.bench" + (transient ? ".transient" : "") + (raw ? ".raw" : "")
        echo = try ChildProcess(
            executable: Executables.current,
            arguments: [
                "_bench-message-echo", "--group", group, "--root", root, "--bus-address", address.rawValue,
            ] + (transient ? ["--transient"] : []) + (raw ? ["--raw"] : []))
        try echo.waitForReady()
        mailbox = try LibraryAPI.mailbox(group: group, root: root, address: address)
        self.size = size
        self.transient = transient
        self.raw = raw
    }

    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (mailbox, pad, transient) = (self.mailbox, BenchPayload.pad(size: size), self.transient)
        if raw {
            let sendRaw: @Sendable (UInt64) throws -> Void = { sequence in
                try LibraryAPI.sendTransient(mailbox, try LibraryAPI.document(seq: sequence, pad: pad), identifier: "ping")
            }
            let listener = try LibraryAPI.listenDocument(mailbox, identifier: "pong") { document in
                guard let sequence = LibraryAPI.sequence(of: document), let next = driver.received(sequence) else { return }
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

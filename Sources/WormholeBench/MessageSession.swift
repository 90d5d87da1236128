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
    private var sequence: UInt64 = 0

    init(address: BusAddress, root: String, size: Int, transient: Bool = false) throws {
        // Its own group: a mailbox session and a transient one may run side by side.
        let group = transient ? "group.org.wormhole.bench.transient" : "group.org.wormhole.bench"
        echo = try ChildProcess(
            executable: Executables.current,
            arguments: [
                "_bench-message-echo", "--group", group, "--root", root, "--bus-address", address.rawValue,
            ] + (transient ? ["--transient"] : []))
        try echo.waitForReady()
        mailbox = try LibraryAPI.mailbox(group: group, root: root, address: address)
        self.size = size
        self.transient = transient
    }

    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (mailbox, pad, transient) = (self.mailbox, BenchPayload.pad(size: size), self.transient)
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

import Histogram
import Wormhole
import WormholeDBus

/// Our side of the message ping-pong: this process sends `ping` and listens to `pong` through a
/// wormhole; a `_bench-message-echo` process listens to `ping` and answers with the same payload.
final class MessageSession {
    private let echo: ChildProcess
    private let mailbox: LibraryAPI.Mailbox
    private let size: Int
    private var sequence: UInt64 = 0

    init(address: BusAddress, root: String, size: Int) throws {
        let group = "group.org.wormhole.bench"
        echo = try ChildProcess(
            executable: Executables.current,
            arguments: [
                "_bench-message-echo", "--group", group, "--root", root, "--bus-address", address.rawValue,
            ])
        try echo.waitForReady()
        mailbox = try LibraryAPI.mailbox(group: group, root: root, address: address)
        self.size = size
    }

    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (mailbox, pad) = (self.mailbox, BenchPayload.pad(size: size))
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

// SPDX-License-Identifier: Apache-2.0
import Histogram
import Wormhole
import WormholeDBus

/// Our side of the journal ping-pong: this process appends to journal `ping` and listens to
/// journal `pong`; a `_bench-journal --mode echo` process appends each `ping` record to `pong`.
final class JournalSession {
    private let echo: ChildProcess
    private let ping: Journal
    private let pong: Journal
    private var sequence: UInt64 = 0

    init(address: BusAddress, root: String, group: String) throws {
        echo = try .echo(
            "_bench-journal", ["--mode", "echo", "--identifier", "ping"], group: group, root: root, address: address)
        ping = try LibraryAPI.journal(group: group, root: root, address: address, identifier: "ping")
        pong = try LibraryAPI.journal(group: group, root: root, address: address, identifier: "pong")
    }

    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (ping, pad) = (self.ping, BenchPayload.pad(size: 100))
        let listener = try LibraryAPI.listen(pong, from: .end, consumer: nil) { result in
            guard case .success(let record) = result, let payload = try? record.message.decode(as: BenchPayload.self),
                let next = driver.received(payload.seq)
            else { return }
            _ = try? LibraryAPI.append(ping, BenchPayload(seq: next, pad: pad))
        }
        defer { listener.cancel() }
        return try driver.run { try LibraryAPI.append(ping, BenchPayload(seq: $0, pad: pad)) }
    }

    func stop() {
        echo.terminate()
    }

    deinit {
        stop()
    }
}

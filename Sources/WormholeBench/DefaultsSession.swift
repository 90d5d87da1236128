// SPDX-License-Identifier: Apache-2.0
import Histogram
import Wormhole
import WormholeDBus

/// Our side of the defaults ping-pong: this process sets key `ping` and observes key `pong`; a
/// `_bench-defaults --mode echo` process observes `ping` and sets `pong` to the same value.
final class DefaultsSession {
    private let echo: ChildProcess
    private let defaults: GroupDefaults
    private var sequence: UInt64 = 1

    init(address: BusAddress, root: String, group: String) throws {
        echo = try .echo("_bench-defaults", ["--mode", "echo"], group: group, root: root, address: address)
        defaults = try LibraryAPI.defaults(group: group, root: root, address: address)
    }

    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let defaults = self.defaults
        let observer = try LibraryAPI.observe(defaults, key: "pong") { value in
            guard value >= 0, let next = driver.received(UInt64(value)) else { return }
            try? LibraryAPI.set(defaults, Int(next), forKey: "ping")
        }
        defer { observer.cancel() }
        return try driver.run { try LibraryAPI.set(defaults, Int($0), forKey: "ping") }
    }

    /// Stops the echo process (it writes into the container root: stop it before removing that).
    func stop() {
        echo.terminate()
    }

    deinit {
        stop()
    }
}

// SPDX-License-Identifier: Apache-2.0
import Histogram
import Wormhole
import WormholeDBus

/// Our side of the notification ping-pong: this process pings through a
/// DarwinNotificationCenter, a `_bench-echo` process answers through its own. Both sides run
/// their handlers where `delivery` says.
final class NotifySession {
    private let echo: ChildProcess
    private let center: DarwinNotificationCenter
    private let ping: NotificationName
    private let pong: NotificationName
    private let delivery: LibraryAPI.Delivery
    /// Observers of other names held by the pinging center (the route-table row).
    private var extraObservers: [Subscription] = []
    private var sequence: UInt64 = 0

    /// Starts the echo process and connects; with `extraRoutes`, the pinging center first
    /// observes that many other names (no-op handlers), so each pong is routed among them.
    init(address: BusAddress, delivery: LibraryAPI.Delivery, extraRoutes: Int = 0) throws {
        let names = BenchNames()
        echo = try ChildProcess(
            executable: Executables.current,
            arguments: [
                "_bench-echo", "--ping", names.ping, "--pong", names.pong, "--delivery", delivery.rawValue,
                "--bus-address", address.rawValue,
            ])
        try echo.waitForReady()
        center = try DarwinNotificationCenter(busAddress: address)
        ping = try NotificationName(names.ping)
        pong = try NotificationName(names.pong)
        self.delivery = delivery
        extraObservers.reserveCapacity(extraRoutes)
        for index in 0..<extraRoutes {
            if index > 0 && index % 2_500 == 0 { Console.progress("  \(index) of \(extraRoutes) extra routes added") }
            let name = try NotificationName(names.name("route.\(index)"))
            extraObservers.append(try LibraryAPI.observe(center, name, on: .ioThread) { _ in })
        }
    }

    /// Runs `warmup` unmeasured then `count` measured round trips.
    func run(count: Int, warmup: Int) throws -> Histogram<UInt64> {
        let driver = PingPongDriver(first: sequence, count: count, warmup: warmup)
        sequence += UInt64(count + warmup)
        let (center, ping) = (self.center, self.ping)
        let observer = try LibraryAPI.observe(center, pong, on: delivery) { state in
            guard let state, let next = driver.received(state) else { return }
            try? center.post(ping, state: next)
        }
        defer { observer.cancel() }
        return try driver.run { try center.post(ping, state: $0) }
    }

    deinit {
        for observer in extraObservers { observer.cancel() }
        // The echo exits on this state; if the post fails, releasing `echo` kills it.
        try? center.post(ping, state: UInt64.max)
        center.flush()
        echo.terminate()
    }
}

// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FoundationEssentials
import Wormhole
import WormholeDBus
import WormholeSystem

/// Runs `body`, which connects to the bus at `address` and registers match rules. While it fails
/// because the bus cannot be reached, says so once on standard error and runs it again as soon as
/// the bus can be reached (a `unix:path=` socket is watched with inotify; other addresses are
/// tried again after 10 ms, doubling to 2 s). A bus whose socket accepts but that refuses or
/// never answers is tried again with the same backoff. `--timeout`, armed before, bounds it all.
func retryingUntilBusReachable<T>(_ address: BusAddress, _ body: () throws -> T) throws -> T {
    var told = false
    var backoff = 0.0
    while true {
        do {
            return try body()
        } catch let error as BusError where error.code == .connectionFailed || error.code == .disconnected {
            if !told {
                writeError("wormhole: \(error.message); still trying: `ready` follows once the bus is back")
                told = true
            }
            // A bus whose socket accepts but that refuses or does not answer gives no event to wait
            // for: from the second failure on, back off (10 ms, doubling to 2 s) rather than spin.
            if backoff > 0 { Syscall.pause(nanoseconds: Int(backoff * 1e9)) }
            backoff = min(max(backoff * 2, 0.01), 2)
            // As long as the user wants: `--timeout` (armed before) or a signal ends the process.
            BusWait.untilReachable(address, deadline: .distantFuture)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Wormhole

/// Fresh notification names for one measurement, so no two runs on one bus cross.
struct BenchNames {
    let tag: UInt32
    let ping: String
    let pong: String
    var pingInterface: String { NotifyContract.bucketInterface(for: ping) }
    var pongInterface: String { NotifyContract.bucketInterface(for: pong) }

    init() {
        tag = UInt32.random(in: 0...UInt32.max)
        ping = "org.wormhole.bench.\(tag).ping"
        pong = "org.wormhole.bench.\(tag).pong"
    }

    /// Another name of this measurement: `org.wormhole.bench.<tag>.<suffix>`.
    func name(_ suffix: String) -> String { "org.wormhole.bench.\(tag).\(suffix)" }
}

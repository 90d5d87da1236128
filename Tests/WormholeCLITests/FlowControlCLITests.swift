// SPDX-License-Identifier: Apache-2.0
// A stopped transient receiver toward which the bus stops reading the sender (contract v1.2
// section 7): the sender's transient messages are refused at the call once its bounded queue is
// full, while its mailbox notifications, on the process's other connection, still reach a
// healthy listener in another process.

import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

@Suite("Flow control: a stopped transient receiver")
struct FlowControlCLITests {
    /// dbus/wormhole-session.conf with `max_incoming_bytes` at 2 MB: the daemon stops reading a
    /// sender once 2 MB of its messages wait for a receiver (1 GB by default, too much for a test).
    static func smallIncomingConfig(in directory: CLITempDirectory) throws -> String {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let stock = try String(contentsOfFile: repository.path + "/dbus/wormhole-session.conf", encoding: .utf8)
        let small = stock.replacingOccurrences(
            of: #"<limit name="max_incoming_bytes">1000000000</limit>"#,
            with: #"<limit name="max_incoming_bytes">2000000</limit>"#)
        guard small != stock else { throw TestFailure("dbus/wormhole-session.conf has no max_incoming_bytes of 1 GB") }
        let path = directory.path + "/small-incoming.conf"
        try small.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(
        "transient messages toward a stopped listener are refused at the call; mailbox posts still reach another listener",
        .disabled(
            if: TestBusDaemon.isBroker,
            "dbus-broker cuts a stopped receiver off instead of holding its sender (Tests/faults-flow.sh covers it)"))
    func stoppedTransientReceiver() async throws {
        let configuration = try CLITempDirectory("flow-config")
        let world = try CLIWorld(bus: TestBus(configFile: Self.smallIncomingConfig(in: configuration)))
        let stopped = try await world.listen(["slow", "--timeout", "120"])
        stopped.signal(SIGSTOP)
        defer {
            stopped.signal(SIGCONT)
            stopped.signal(SIGTERM)
        }
        let healthy = try await world.listen(["healthy", "--count", "1", "--timeout", "120"])
        let sender = try world.inProcess()
        let pad = String(repeating: "x", count: 60 * 1024)
        var refusal: BusError?
        var accepted = 0
        for n in 0..<2_000 {
            do {
                try sender.passTransientMessage(["n": "\(n)", "pad": pad], identifier: "slow")
                accepted += 1
            } catch let error as BusError {
                refusal = error
                break
            }
        }
        let error = try #require(refusal, "2,000 messages of 60 KiB were all accepted toward a stopped receiver")
        #expect(error.code == .queueFull, "\(error)")
        #expect(error.message.contains("not sent"), "\(error.message)")
        #expect(sender.refusedTransientMessages == 1)
        #expect(accepted > 0)
        // The mailbox's notification travels on the other connection, which the bus still reads.
        let report = try sender.passMessage(["after": 1], identifier: "healthy")
        #expect(report.notificationError == nil)
        let output = try await waitOnOwnThread(healthy)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains(#""message":{"after":1}"#), "\(output.stdout)")
    }
}

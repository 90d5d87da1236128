// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

@Suite("Messaging: across processes", .sharedBus)
struct MessagingCrossProcessTests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    @Test("after 1,000 rapid sends from another process the last delivery is 999, and none goes backwards")
    func burstFromAnotherProcess() async throws {
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }

        let output = try await MessagingHarness.run(
            try productPath("wormhole-test-peer"),
            ["send-many", fixture.root.path, fixture.group, "count", "1000", fixture.bus.address.rawValue],
            environment: ["XDG_RUNTIME_DIR": fixture.state.path])
        #expect(output.status == 0, "\(output.stderr)")
        // The peer has flushed and exited: a post made now reaches the bus after all of its posts.
        try fixture.wormhole().passMessage(MessagingCounter(n: -1), identifier: "sentinel")

        let received = try await MessagingHarness.until(deliveries, "the sentinel") {
            $0.identifier.rawValue == "sentinel"
        }
        let counts = received.dropLast()
        #expect(counts.allSatisfy { $0.identifier.rawValue == "count" && $0.reason == .posted })
        let values = counts.compactMap(\.message?.n)
        #expect(values.count == counts.count, "every delivery decoded")
        #expect(values.last == 999)
        #expect(values == values.sorted(), "deliveries never go backwards")
        #expect(!values.isEmpty && values.count <= 1000)
        #expect(try receiver.message(identifier: "count", as: MessagingCounter.self) == MessagingCounter(n: 999))
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// Every kind of subscription that has files behind it (mailboxes, journals, shared defaults)
/// has the same fallback: without a bus it is woken through its directory, and it moves to the
/// bus when the bus comes (one engine, `WakeEngine`). The writers here are other processes.
@Suite("One engine: journal readers fall back like listeners")
struct SubscriptionFallbackTests {
    /// A journal listener started without a bus gets the records another process appends, moves
    /// to the bus when it starts, and gets the next records from there, each exactly once.
    @Test func aJournalListenerWithoutABusReadsThroughTheDirectoryAndMovesToTheBus() async throws {
        let world = try MessagingFixture(bus: TestBus())
        world.bus.kill()
        let wormhole = try world.wormhole()
        let journal = wormhole.journal("events")
        let (records, continuation) = AsyncStream<UInt64>.makeStream()
        let listener = try journal.listen(as: JSONDocument.self) { result in
            if case .success(let record) = result { continuation.yield(record.sequence) }
        }
        defer { listener.cancel() }
        guard case .directory = wormhole.wakeSource else {
            Issue.record("expected the directory watch without a bus, got \(wormhole.wakeSource)")
            return
        }
        let (sources, sourceChanges) = AsyncStream<WakeSource>.makeStream()
        let watching = wormhole.onWakeSourceChange { sourceChanges.yield($0) }
        defer { watching.cancel() }

        try await world.runCLI(["send", "--journal", "--group", world.group, "events", "1"])
        try await world.runCLI(["send", "--journal", "--group", world.group, "events", "2"])
        #expect(try await MessagingHarness.next(2, from: records, "the records appended without a bus") == [1, 2])

        try world.bus.start()
        _ = try await MessagingHarness.until(sources, "the move to the bus") { $0 == .bus }
        try await world.runCLI(["send", "--journal", "--group", world.group, "events", "3"])
        #expect(try await MessagingHarness.next(1, from: records, "the record appended on the bus") == [3])
    }

    /// A journal stream keeps reading while the bus is killed (through the directory) and after
    /// it is back.
    @Test func aJournalStreamReadsThroughALostBus() async throws {
        let world = try MessagingFixture(bus: TestBus())
        let wormhole = try world.wormhole()
        let journal = wormhole.journal("events")
        let stream = try await journal.records(as: JSONDocument.self)
        let (sources, sourceChanges) = AsyncStream<WakeSource>.makeStream()
        let watching = wormhole.onWakeSourceChange { sourceChanges.yield($0) }
        defer { watching.cancel() }
        let reader = Task {
            var seen: [UInt64] = []
            for try await record in stream {
                seen.append(record.sequence)
                if seen.count == 3 { break }
            }
            return seen
        }
        try await world.runCLI(["send", "--journal", "--group", world.group, "events", "1"])
        world.bus.kill()
        _ = try await MessagingHarness.until(sources, "the switch to the directory") {
            if case .directory(let error) = $0 { return error.code == .disconnected }
            return false
        }
        try await world.runCLI(["send", "--journal", "--group", world.group, "events", "2"])
        try world.bus.start()
        _ = try await MessagingHarness.until(sources, "the return to the bus") { $0 == .bus }
        try await world.runCLI(["send", "--journal", "--group", world.group, "events", "3"])
        #expect(try await reader.value == [1, 2, 3])
    }
}

/// A message stored by a sender that died before its signal reached the bus (a share extension
/// killed right after its write, scenario 4) still reaches a listener on the bus: the wormhole
/// directory is watched beside the bus, and a rename whose post does not follow is caught up.
@Suite("Writes without a signal reach listeners on the bus", .sharedBus)
struct UnsignalledWriteTests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    /// Another process renames a message onto `ID.json` and posts nothing, as a sender killed
    /// between the two would: delivered once as a catch-up. A send after it is delivered as
    /// posted, with its `sentAt`, and nothing twice.
    @Test func aRenameWithoutItsPostIsDeliveredAsACatchUp() async throws {
        let wormhole = try fixture.wormhole()
        try wormhole.passMessage(JSONDocument(data: Data("0".utf8)), identifier: "inbox")
        wormhole.flush()
        let (deliveries, record) = MessagingHarness.recorder(JSONDocument.self)
        // The default options: the watch beside the bus is on.
        let listener = try wormhole.listen(as: JSONDocument.self, handler: record)
        defer { listener.cancel() }
        try await writeWithoutSignal(#"{"orphan":1}"#, identifier: "inbox")
        let orphan = try await MessagingHarness.next(1, from: deliveries, "the message stored without a signal")
        #expect(orphan.first?.reason == .catchUp)
        #expect(orphan.first?.sentAt == nil)
        #expect(orphan.first?.message.map { String(decoding: $0.data, as: UTF8.self) } == #"{"orphan":1}"#)

        try await fixture.runCLI(["send", "--group", fixture.group, "inbox", #"{"posted":2}"#])
        try await fixture.runCLI(["send", "--group", fixture.group, "sentinel", "3"])
        let next = try await MessagingHarness.next(2, from: deliveries, "the posted message, then the sentinel")
        #expect(next.map(\.identifier.rawValue) == ["inbox", "sentinel"])
        #expect(next.map(\.reason) == [.posted, .posted])
        #expect(next.allSatisfy { $0.sentAt != nil })
    }

    /// Writes `<identifier>.json` by the contract's atomic replace, from a shell, posting nothing.
    private func writeWithoutSignal(_ json: String, identifier: String) async throws {
        let directory = "\(fixture.root.path)/\(fixture.group)/wormhole"
        let script =
            "printf '%s' \"$1\" > \"$2/.\(identifier).1-1.tmp\" && mv \"$2/.\(identifier).1-1.tmp\" \"$2/\(identifier).json\""
        let output = try await MessagingHarness.run("/bin/sh", ["-c", script, "sh", json, directory])
        #expect(output.status == 0, "\(output.stderr)")
    }
}

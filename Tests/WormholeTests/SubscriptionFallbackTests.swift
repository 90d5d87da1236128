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
        let journal = try wormhole.journal("events")
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
        let journal = try wormhole.journal("events")
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

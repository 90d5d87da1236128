// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import WormholeTestSupport

@testable import WormholeDBus

/// A bus that stops reading a sender (here the daemon itself is stopped, so its socket fills):
/// the sender's outgoing queue is bounded by bytes, a newer `Posted`-like signal replaces a
/// queued one of the same key, and what does not fit is refused at the call, never dropped
/// after it was accepted.
@Suite("Flow control toward a bus that stops reading")
struct FlowControlTests {
    static let interface = try! InterfaceName("org.wormhole.Test.Flow")
    static let posted = try! MemberName("Posted")
    static let big = try! MemberName("Big")

    func post(_ value: UInt64) -> Signal {
        Signal(
            path: testPath, interface: Self.interface, member: Self.posted,
            arguments: [.string("name"), .uint64(value)])
    }

    func big(_ value: UInt64, size: Int) -> Signal {
        Signal(
            path: testPath, interface: Self.interface, member: Self.big,
            arguments: [.uint64(value), .string(String(repeating: "x", count: size))])
    }

    @Test(
        "while the bus reads nothing, a storm of one name's posts queues one, a full queue refuses, and the latest of each arrives"
    )
    func stoppedBus() async throws {
        let bus = try TestBus()
        let limit = 256 * 1024
        let sender = try BusConnection(address: bus.address, outgoingLimit: limit)
        let receiver = try BusConnection(address: bus.address)
        let posts = try await receiver.signals(
            matching: MatchRule(interface: Self.interface, member: Self.posted), bufferLimit: 1_000_000)
        let bigs = try await receiver.signals(
            matching: MatchRule(interface: Self.interface, member: Self.big), bufferLimit: 1_000_000)
        bus.pause()
        defer { bus.resume() }
        // Big signals until the socket, libdbus's share and the queue are full: refused, counted.
        var accepted: UInt64 = 0
        var refusal: BusError?
        for value in 1...2_000 as ClosedRange<UInt64> {
            do {
                try sender.emit(big(value, size: 32 * 1024), policy: .refusable(wait: .milliseconds(100)))
                accepted = value
            } catch let error as BusError {
                refusal = error
                break
            }
        }
        let error = try #require(refusal, "2,000 signals of 32 KiB were all accepted by a stopped bus")
        #expect(error.code == .queueFull)
        #expect(error.value == bus.address.rawValue)
        #expect(error.message.contains("not sent"), "\(error.message)")
        #expect(sender.refusedSignals == 1)
        #expect(accepted > 0)
        // Refused again at once while nothing moves; plain signals that do not fit likewise.
        #expect(throws: BusError.self) {
            try sender.emit(big(0, size: 32 * 1024), policy: .refusable(wait: .seconds(60)))
        }
        #expect(throws: BusError.self) { try sender.emit(big(0, size: 32 * 1024)) }
        #expect(sender.refusedSignals == 3)
        // A storm of one name's posts: one queued entry, the newest; none refused.
        let storm: UInt64 = 100_000
        for value in 1...storm { try sender.emit(post(value), policy: .replacing(key: "name")) }
        #expect(sender.refusedSignals == 3)
        bus.resume()
        // Every accepted big signal arrives, in order, the last one too.
        var seen: UInt64 = 0
        for await signal in bigs {
            let value = try signal.uint64(at: 0)
            #expect(value == seen + 1, "accepted signals arrive in order, none dropped")
            seen = value
            if value == accepted { break }
        }
        #expect(seen == accepted)
        // The post storm arrives as far fewer signals, ending with the latest state.
        var received = 0
        for await signal in posts {
            received += 1
            if try signal.uint64(at: 1) == storm { break }
        }
        #expect(received < 1_000, "the queued posts of one name were replaced, not all sent (\(received))")
    }
}

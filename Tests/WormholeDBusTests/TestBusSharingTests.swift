// SPDX-License-Identifier: Apache-2.0
import Testing
import WormholeDBus
import WormholeSystem
import WormholeTestSupport

/// The harness's own promise (Tests/WormholeTestSupport/TestBus.swift): a suite with `.sharedBus`
/// gets one bus, started on first use, that no test may stop.
@Suite("One test bus per suite", .sharedBus)
struct TestBusSharingTests {
    @Test("every call in the suite gives the same running bus, which refuses to be stopped")
    func oneBusThatStaysUp() async throws {
        let bus = try TestBus.shared()
        #expect(try TestBus.shared() === bus)
        #expect(bus.isShared)
        withKnownIssue("a shared bus records an issue instead of stopping") {
            bus.kill()
            bus.pause()
        }
        // Still up and answering.
        let connection = try BusConnection(address: bus.address)
        #expect(!connection.uniqueName.isEmpty)
        connection.close()
    }

    /// The bus each case of `innerScope` got.
    static let innerBuses = Locked<[ObjectIdentifier]>([])

    @Test("a parameterized test with the trait shares a bus of its own among its cases", .sharedBus, arguments: [1, 2])
    func innerScope(_ number: Int) throws {
        let bus = try TestBus.shared()
        #expect(bus.isShared)
        let seen = Self.innerBuses.withLock { buses in
            buses.append(ObjectIdentifier(bus))
            return Set(buses).count
        }
        #expect(seen == 1, "both cases have the same bus")
    }
}

@Suite("TestBus.shared() without the trait")
struct TestBusWithoutTraitTests {
    @Test("is an error that names the trait")
    func needsTheTrait() {
        #expect { try TestBus.shared() } throws: { "\($0)".contains(".sharedBus") }
    }
}

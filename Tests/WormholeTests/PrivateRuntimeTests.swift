// SPDX-License-Identifier: Apache-2.0
// A runtime of a test's own (`WormholeRuntime(sharingProcessOf:)`): the facades made in it hold
// connections of their own (another unique name on the same bus) and tables of their own, and
// share with the process's runtime what a process has one of: the loop, the inotify hub, the exit
// drain, the doorbell (contract §9: one endpoint and one serial sequence per process) and the set
// of its own connections. Messages pass between the two runtimes as between two processes' facades.

import Dispatch
import Foundation
import Testing
import WormholeDBus
import WormholeTestSupport

@testable import Wormhole

@Suite("A private runtime for tests", .sharedBus)
struct PrivateRuntimeTests {
    let fixture: MessagingFixture
    /// The runtime of this test's own.
    let runtime = WormholeRuntime(sharingProcessOf: .shared)
    init() throws { fixture = try MessagingFixture() }

    /// A wormhole made in this test's runtime.
    func privateWormhole() throws -> MessageCenter {
        try WormholeRuntime.$current.withValue(runtime) { try fixture.wormhole() }
    }

    @Test("its facades hold their own connection and share the process's loop, doorbell and own-connection set")
    func ownConnections() throws {
        let mine = try privateWormhole()
        let alsoMine = try privateWormhole()
        let shared = try fixture.wormhole()
        let (a, b, c) = (try mine.centers.get(), try alsoMine.centers.get(), try shared.centers.get())
        #expect(a.runtime === runtime && b.runtime === runtime && c.runtime === WormholeRuntime.shared)
        #expect(a.connection.uniqueName == b.connection.uniqueName, "one connection per bus within a runtime")
        #expect(a.connection.uniqueName != c.connection.uniqueName, "another connection than the shared runtime's")
        #expect(runtime.connections !== WormholeRuntime.shared.connections)
        #expect(runtime.system === WormholeRuntime.shared.system)
        #expect(runtime.doorbell === WormholeRuntime.shared.doorbell)
        #expect(runtime.ownConnections === WormholeRuntime.shared.ownConnections)
        // Each center's own table: a listener of the private facade is not in the shared one's.
        let listener = try mine.listen(identifier: "a", as: MessagingCounter.self, on: .ioThread) { _ in }
        defer { listener.cancel() }
        #expect(a.routes.count == 1 && c.routes.count == 0)
        #expect(mine.wakeups.table.count == 1 && shared.wakeups.table.count == 0)
    }

    @Test("messages and transient messages pass between a private runtime's facade and the shared one's")
    func messagesPassBetween() async throws {
        let mine = try privateWormhole()
        let shared = try fixture.wormhole()
        let (toMine, mineHandler) = MessagingHarness.recorder(MessagingCounter.self)
        let (toShared, sharedHandler) = MessagingHarness.recorder(MessagingCounter.self)
        let a = try mine.listen(
            identifier: "to-private", as: MessagingCounter.self, on: .ioThread, handler: mineHandler)
        let b = try shared.listen(
            identifier: "to-shared", as: MessagingCounter.self, on: .ioThread, handler: sharedHandler)
        defer {
            a.cancel()
            b.cancel()
        }

        try shared.passMessage(MessagingCounter(n: 1), identifier: "to-private")
        try mine.passMessage(MessagingCounter(n: 2), identifier: "to-shared")
        try mine.passTransientMessage(MessagingCounter(n: 3), identifier: "to-shared")
        let atMine = try await MessagingHarness.next(1, from: toMine, "the shared runtime's message")
        let atShared = try await MessagingHarness.next(2, from: toShared, "the private runtime's two messages")
        #expect(atMine.map { $0.message?.n } == [1])
        #expect(atShared.map { $0.message?.n } == [2, 3])
        #expect(atShared.map(\.reason) == [.posted, .transient])
    }
}

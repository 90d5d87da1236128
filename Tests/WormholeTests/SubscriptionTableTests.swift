// SPDX-License-Identifier: Apache-2.0
// Each owner's subscription table (a center's post routes, a facade's engine's wake
// subscribers): every subscription is registered once, in its owner's table, whatever its kind,
// and is gone from it when cancelled.

import Dispatch
import Foundation
import Testing
import WormholeTestSupport

@testable import Wormhole

@Suite("Each owner's subscription table", .sharedBus)
struct SubscriptionTableTests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    /// What `center`'s and `engine`'s tables hold: (post routes of the center, subscribers of
    /// the engine).
    func parts(_ center: DarwinNotificationCenter, _ engine: WakeEngine) -> [Int] {
        [center.routes.count, engine.table.count]
    }

    @Test("a listener, a journal reader and an observer of one facade are each registered once and forgotten at cancel")
    func messagingFacade() throws {
        let wormhole = try fixture.wormhole()
        let center = try wormhole.centers.get()
        let engine = wormhole.wakeups
        #expect(parts(center, engine) == [0, 0])

        let listener = try wormhole.listen(identifier: "a", as: MessagingCounter.self, on: .ioThread) { _ in }
        #expect(parts(center, engine) == [1, 1], "one post route on the center, one subscriber in the engine")
        let everyMailbox = try wormhole.listen(as: MessagingCounter.self, on: .ioThread) { _ in }
        #expect(parts(center, engine) == [2, 2])
        let reader = try wormhole.journal("events").listen(as: JSONDocument.self, on: .ioThread) { _ in }
        #expect(parts(center, engine) == [3, 3], "a journal of the facade registers with the facade's engine")
        let observer = try center.listen(name: NotificationName(fixture.group + ".plain"), on: .ioThread) { _ in }
        #expect(
            parts(center, engine) == [4, 3], "a notification observer has a route and no directory to fall back on")

        listener.cancel()
        #expect(parts(center, engine) == [3, 2])
        listener.cancel()
        #expect(parts(center, engine) == [3, 2], "cancelling twice forgets once")
        reader.cancel()
        observer.cancel()
        #expect(parts(center, engine) == [1, 1])
        everyMailbox.cancel()
        #expect(parts(center, engine) == [0, 0])
    }

    @Test("a defaults observer is registered in its own facade's part, not in another facade's")
    func defaultsFacade() throws {
        let defaults = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(fixture.group), containerRoot: fixture.root.path,
            busAddress: fixture.bus.address, sharedStateDirectory: fixture.state.path, logger: MessagingHarness.logger)
        let wormhole = try fixture.wormhole()
        let center = try defaults.centers.get()
        #expect(parts(center, defaults.wakeups) == [0, 0])

        let observer = try defaults.listen(forKey: "k", on: .ioThread) { _ in }
        #expect(parts(center, defaults.wakeups) == [1, 1])
        #expect(wormhole.wakeups.table.count == 0)
        observer.cancel()
        #expect(parts(center, defaults.wakeups) == [0, 0])
    }

    @Test("releasing the last reference to a subscription forgets it as cancel() does")
    func releaseForgets() throws {
        let wormhole = try fixture.wormhole()
        let center = try wormhole.centers.get()
        do {
            let listener = try wormhole.listen(identifier: "a", as: MessagingCounter.self, on: .ioThread) { _ in }
            #expect(parts(center, wormhole.wakeups) == [1, 1])
            withExtendedLifetime(listener) {}
        }
        #expect(parts(center, wormhole.wakeups) == [0, 0])
    }
}

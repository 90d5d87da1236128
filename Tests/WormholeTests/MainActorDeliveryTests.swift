// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// A main-actor object such as a view model: its state may only be touched on the main actor.
@MainActor
private final class CounterModel {
    var labels: [String] = []
    let (updates, continuation) = AsyncStream<String>.makeStream()

    func show(_ label: String) {
        MainActor.assertIsolated()
        labels.append(label)
        continuation.yield(label)
    }
}

@Suite("Delivery on the main actor (on: .mainActor)", .sharedBus)
struct MainActorDeliveryTests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    @Test("a listener's handler on .mainActor updates main-actor state, in order, on the main thread")
    @MainActor func listenerOnTheMainActor() async throws {
        let model = CounterModel()
        let receiver = try fixture.wormhole()
        let listener = try receiver.listen(identifier: "button", as: MessagingCounter.self, on: .mainActor) {
            delivery in
            // `model` is main-actor state: the handler runs on the main queue, the main actor's executor.
            MainActor.assumeIsolated {
                if case .success(let counter) = delivery.result { model.show("button \(counter.n)") }
            }
        }
        defer { listener.cancel() }
        let sender = try fixture.wormhole()
        try sender.passMessage(MessagingCounter(n: 1), identifier: "button")
        #expect(try await MessagingHarness.next(1, from: model.updates, "the first delivery") == ["button 1"])
        try sender.passMessage(MessagingCounter(n: 2), identifier: "button")
        #expect(try await MessagingHarness.next(1, from: model.updates, "the second delivery") == ["button 2"])
        #expect(model.labels == ["button 1", "button 2"])
    }

    @Test("a shared-defaults observer's handler on .mainActor runs on the main actor")
    @MainActor func observersOnTheMainActor() async throws {
        let model = CounterModel()
        let defaults = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(fixture.group), containerRoot: fixture.root.path,
            busAddress: fixture.bus.address, sharedStateDirectory: fixture.state.path, logger: MessagingHarness.logger)
        let observer = try defaults.listen(forKey: "currency", on: .mainActor) { change in
            MainActor.assumeIsolated { model.show("currency \(change.value?.stringValue ?? "removed")") }
        }
        defer { observer.cancel() }
        try defaults.set("EUR", forKey: "currency")
        #expect(try await MessagingHarness.next(1, from: model.updates, "the change") == ["currency EUR"])
    }
}

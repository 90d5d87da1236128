// SPDX-License-Identifier: Apache-2.0
// The Swift examples of the doc comments (and of inline code in docs/messaging.md), so that
// the compiler checks them. Never run: each is a function that nobody calls (the examples talk
// to the session bus). The Swift blocks of README.md, docs/ and the DocC catalogs are built
// from where they are written by Tests/snippets.sh.

import Dispatch
import Foundation
import Wormhole
import WormholeDBus

private struct Button: Codable, Sendable { var buttonNumber: Int }

/// docs/messaging.md, the bullet on raw bytes (inline code there).
private func rawBytes(_ wormhole: MessageCenter, _ bytes: Data) throws {
    try wormhole.passMessage(try JSONDocument(data: bytes), identifier: "doc")
}

/// The examples in the doc comments of MessageCenter and DarwinNotificationCenter.
private func docComments() throws {
    let wormhole = try MessageCenter(applicationGroupIdentifier: "group.com.example.counter")
    // The watch side:
    try wormhole.passMessage(["buttonNumber": 3], identifier: "button")
    // The app side, in another process (keep the listener: releasing it stops it):
    let listener = try wormhole.listen(identifier: "button", as: [String: Int].self) { delivery in
        if let message = try? delivery.result.get() { print(message["buttonNumber"]!) }
    }
    withExtendedLifetime(listener) {}

    let center = try DarwinNotificationCenter()  // the session bus
    let name = NotificationName("com.example.app.refresh")
    let observer = try center.listen(name: name) { note in
        print("refresh!", note.state ?? 0)
    }
    try center.post(name)
    withExtendedLifetime(observer) {}
}

/// The example in `DeliveryQueue.mainActor`'s doc comment.
@MainActor private final class CounterModel {
    var label = "no press yet"
    var listener: Subscription?

    func start(_ wormhole: MessageCenter) throws {
        listener = try wormhole.listen(identifier: "button", as: Button.self, on: .mainActor) { delivery in
            MainActor.assumeIsolated {
                if case .success(let button) = delivery.result { self.label = "pressed \(button.buttonNumber)" }
            }
        }
    }
}

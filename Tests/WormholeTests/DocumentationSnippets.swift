// The Swift snippets of README.md ("Using it") and of the Wormhole DocC catalog, as they are
// written there, so that the compiler checks them. Never run: each is a function that nobody
// calls (the snippets talk to the session bus). Where a snippet leaves a handle unused, a
// `withExtendedLifetime` follows it; `{ … }` loop bodies become `{ _ = delivery }`.
// When you change a snippet there, change it here.

import Dispatch
import Foundation
import Wormhole
import WormholeDBus

private struct Button: Codable, Sendable { var buttonNumber: Int }

/// README.md, "Messages between processes (MMWormhole)".
private func readmeMessages() async throws {
    // Both processes open the same wormhole.
    let wormhole = try MessageCenter(applicationGroupIdentifier: "group.com.example.counter")

    // The sender stores the message and wakes listeners.
    try wormhole.passMessage(Button(buttonNumber: 1), identifier: "button")

    // The listener, in another process. Keep the listener: releasing it stops it.
    let listener = try wormhole.listen(identifier: "button", as: Button.self,
                                       options: .init(deliversStoredMessageOnStart: true)) { delivery in
        switch delivery.result {
        case .success(let button): print("button", button.buttonNumber)
        case .failure(let error): print("cannot read it:", error)   // names identifier and reason
        }
    }
    withExtendedLifetime(listener) {}

    // Or as an AsyncSequence; the listener goes when the loop ends.
    for await delivery in try await wormhole.messages(identifier: "button", as: Button.self) { _ = delivery }
}

/// README.md, the bullet on raw bytes.
private func readmeRawBytes(_ wormhole: MessageCenter, _ bytes: Data) throws {
    try wormhole.passMessage(try JSONDocument(data: bytes), identifier: "doc")
}

/// README.md, "Darwin-style notifications".
private func readmeNotifications() async throws {
    let center = try DarwinNotificationCenter()        // or busAddress: BusAddress("unix:path=…")
    let name = try NotificationName("com.example.app.refresh")

    let observer = try center.addObserver(for: name) { note in
        print(note.name, note.state ?? 0, note.reason)  // .posted, or .catchUp after a bus outage
    }
    try center.post(name)                             // notify_post
    try center.post(name, state: 42)                  // notify_set_state + notify_post

    let token = try center.makeCheckToken(for: name)  // notify_register_check
    if token.check() { /* posted since the last check: no system call, no bus traffic */ }
    withExtendedLifetime(observer) {}

    for await note in try await center.notifications(prefix: NotificationName("group.com.example/")) { _ = note }
}

/// Wormhole.docc/Wormhole.md, the smallest complete program (top-level code there).
private func doccLandingPage() throws {
    let wormhole = try MessageCenter(applicationGroupIdentifier: "group.com.example.counter")

    if CommandLine.arguments.dropFirst().first == "send" {
        let report = try wormhole.passMessage(Button(buttonNumber: 7), identifier: "button")
        wormhole.flush()
        print(report.notified ? "sent" : "stored; nobody was notified")
    } else {
        // Keep the listener: releasing it stops it.
        let listener = try wormhole.listen(identifier: "button", as: Button.self, on: .queue(.main)) { delivery in
            print(delivery.result)
        }
        withExtendedLifetime(listener) { dispatchMain() }
    }
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

    let center = try DarwinNotificationCenter()          // the session bus
    let name = try NotificationName("com.example.app.refresh")
    let observer = try center.addObserver(for: name) { note in
        print("refresh!", note.state ?? 0)
    }
    try center.post(name)
    withExtendedLifetime(observer) {}
}

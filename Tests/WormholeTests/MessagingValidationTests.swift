// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// A value that the contract refuses as a group, a directory or a message identifier.
struct MessagingHostileCase: Sendable, CustomTestStringConvertible {
    enum Kind: String, Sendable {
        case group, directory, identifier
    }

    var kind: Kind
    var label: String
    var value: String
    /// How the error message shows the value.
    var shown: String

    var testDescription: String { "\(kind.rawValue) \(label)" }

    /// Values every kind refuses. `a` × 201 is refused only as an identifier (limit 200 bytes);
    /// groups and directories may have up to 255.
    static let values: [(label: String, value: String, shown: String)] = [
        ("../x", "../x", "'../x'"),
        ("a/b", "a/b", "'a/b'"),
        ("empty", "", "''"),
        (".hidden", ".hidden", "'.hidden'"),
        ("201 characters", String(repeating: "a", count: 201), "'\(String(repeating: "a", count: 201))'"),
        ("256 characters", String(repeating: "b", count: 256), "'\(String(repeating: "b", count: 256))'"),
        ("a space", "two words", "'two words'"),
        ("non-ASCII", "café", "'café'"),
        ("NUL", "nul\0inside", #"'nul\0inside'"#),
    ]

    static func all(includingNUL: Bool = true) -> [MessagingHostileCase] {
        var cases: [MessagingHostileCase] = []
        for kind in [Kind.identifier, .group, .directory] {
            for (label, value, shown) in values {
                if kind != .identifier && value.utf8.count == 201 { continue }
                if !includingNUL && value.contains("\0") { continue }
                cases.append(MessagingHostileCase(kind: kind, label: label, value: value, shown: shown))
            }
        }
        return cases
    }

    var code: WormholeError.Code {
        switch kind {
        case .group: .invalidGroup
        case .directory: .invalidDirectory
        case .identifier: .invalidIdentifier
        }
    }

    /// Whether `error` is the refusal this value must produce.
    func isRefusal(_ error: any Error) -> Bool {
        guard let error = error as? WormholeError else { return false }
        return error.code == code && error.value == value && error.message.contains(shown)
    }
}

@Suite("Messaging: hostile names are refused before the disk or the bus is touched", .sharedBus)
struct MessagingValidationTests {
    @Test("through the MessageCenter API", arguments: MessagingHostileCase.all())
    func refused(_ hostile: MessagingHostileCase) async throws {
        let fixture = try MessagingFixture()
        let raw = try await fixture.rawPosted()
        switch hostile.kind {
        case .group:
            #expect(performing: { try fixture.wormhole(group: hostile.value) }, throws: hostile.isRefusal)
        case .directory:
            #expect(performing: { try fixture.wormhole(directory: hostile.value) }, throws: hostile.isRefusal)
        case .identifier:
            let wormhole = try fixture.wormhole()
            let id = hostile.value
            #expect(
                performing: { try wormhole.passMessage(MessagingCounter(n: 1), identifier: MessageIdentifier(id)) },
                throws: hostile.isRefusal)
            #expect(
                performing: { try wormhole.passMessage(identifier: MessageIdentifier(id)) }, throws: hostile.isRefusal)
            #expect(
                performing: { try wormhole.message(identifier: MessageIdentifier(id), as: MessagingCounter.self) },
                throws: hostile.isRefusal)
            #expect(
                performing: { try wormhole.clearMessage(identifier: MessageIdentifier(id)) }, throws: hostile.isRefusal)
            #expect(
                performing: {
                    try wormhole.listen(identifier: MessageIdentifier(id), as: MessagingCounter.self, on: .ioThread) {
                        _ in
                    }
                },
                throws: hostile.isRefusal)
            await #expect(
                performing: {
                    try await wormhole.messages(identifier: MessageIdentifier(id), as: MessagingCounter.self)
                },
                throws: hostile.isRefusal)
            #expect(
                performing: { try wormhole.messageData(identifier: MessageIdentifier(id)) }, throws: hostile.isRefusal)
            #expect(performing: { try MessageIdentifier(id) }, throws: hostile.isRefusal)
        }
        #expect(try fixture.root.contents() == [], "nothing was written")
        // Nothing was posted: a sentinel posted now is the first signal of the test's group.
        let sentinel = try DarwinNotificationCenter(
            busAddress: fixture.bus.address, sharedStateDirectory: fixture.state.path, logger: MessagingHarness.logger)
        try sentinel.post(NotificationName("\(fixture.group)/sentinel"))
        let first = try await MessagingHarness.next(1, from: raw, "the sentinel")
        #expect(try first.first?.string(at: 0) == "\(fixture.group)/sentinel")
    }

    @Test("the longest names the contract allows are accepted, end to end")
    func longestAccepted() async throws {
        let fixture = try MessagingFixture()
        let group = String(repeating: "g", count: 255)
        let directory = String(repeating: "d", count: 255)
        let identifier = String(repeating: "i", count: 200)
        let sender = try fixture.wormhole(group: group, directory: directory)
        let receiver = try fixture.wormhole(group: group, directory: directory)
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(
            identifier: MessageIdentifier(identifier), on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        #expect(try sender.passMessage(MessagingCounter(n: 9), identifier: MessageIdentifier(identifier)).notified)
        let delivery = try await MessagingHarness.next(1, from: deliveries, "the message")
        #expect(delivery.first?.message == MessagingCounter(n: 9))
        #expect(FileManager.default.fileExists(atPath: "\(fixture.root.path)/\(group)/\(directory)/\(identifier).json"))
    }
}

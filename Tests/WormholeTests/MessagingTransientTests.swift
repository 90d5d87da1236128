// SPDX-License-Identifier: Apache-2.0
// Transient messages (contract §7): carried in the `Message` signal, delivered to running
// listeners only, never stored. Senders are other processes (wormhole-test-peer) or this one.

import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// File storage that counts the reads of a mailbox: a transient message must cause none.
private final class CountingTransiting: WormholeTransiting {
    let files: FileTransiting
    let reads = Atomic<Int>(0)

    init(_ files: FileTransiting) { self.files = files }

    func writeMessage(_ data: Data, identifier: MessageIdentifier) throws {
        try files.writeMessage(data, identifier: identifier)
    }

    func messageData(identifier: MessageIdentifier) throws -> Data? {
        reads.wrappingAdd(1, ordering: .relaxed)
        return try files.messageData(identifier: identifier)
    }

    func deleteMessage(identifier: MessageIdentifier) throws { try files.deleteMessage(identifier: identifier) }
    func deleteAllMessages() throws { try files.deleteAllMessages() }
    func storedIdentifiers() throws -> [MessageIdentifier] { try files.storedIdentifiers() }
}

@Suite("Messaging: transient messages", .sharedBus)
struct MessagingTransientTests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    private func peer(_ command: String, _ identifier: String, _ count: Int) async throws {
        // On a thread of its own, not on Dispatch's few global-queue threads that other suites share.
        let output: ProcessOutput = try await withCheckedThrowingContinuation { continuation in
            let arguments = [
                command, fixture.root.path, fixture.group, identifier, "\(count)", fixture.bus.address.rawValue,
            ]
            let environment = ["XDG_RUNTIME_DIR": fixture.state.path]
            Thread {
                continuation.resume(
                    with: Result { try run(try productPath("wormhole-test-peer"), arguments, environment: environment) }
                )
            }.start()
        }
        #expect(output.status == 0, "\(output.stderr)")
    }

    @Test("transient messages from another process are delivered as .transient, with no file read or written")
    func deliveredNotStored() async throws {
        let sender = try fixture.wormhole()
        try sender.passMessage(MessagingCounter(n: 100), identifier: "t")
        let storage = CountingTransiting(
            FileTransiting(
                container: try GroupContainer(group: GroupIdentifier(fixture.group), root: fixture.root.path)))
        let receiver = try fixture.wormhole(transiting: .custom(storage))
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(
            identifier: "t", on: .queue(DispatchQueue(label: "t")), options: .init(deliversStoredMessageOnStart: true),
            handler: handler)
        defer { listener.cancel() }
        let stored = try await MessagingHarness.next(1, from: deliveries, "the stored message")
        #expect(stored.map(\.reason) == [.stored] && stored.map(\.message?.n) == [100])
        let readsBefore = storage.reads.load(ordering: .relaxed)

        try await peer("send-transient-many", "t", 3)
        let transients = try await MessagingHarness.next(3, from: deliveries, "three transient messages")
        #expect(transients.map(\.message?.n) == [0, 1, 2])
        #expect(transients.allSatisfy { $0.reason == .transient && $0.sentAt == nil && $0.identifier.rawValue == "t" })
        #expect(storage.reads.load(ordering: .relaxed) == readsBefore, "a transient message reads no file")
        #expect(try sender.message(identifier: "t", as: MessagingCounter.self) == MessagingCounter(n: 100))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: "\(fixture.root.path)/\(fixture.group)/wormhole") == [
                "t.json"
            ])

        // What the listener knows of the mailbox is untouched: a wake that finds the stored
        // file (delivered at start) delivers nothing; the next stored message is delivered.
        sender.passMessage(identifier: "t")
        try sender.passMessage(MessagingCounter(n: 101), identifier: "t")
        let next = try await MessagingHarness.next(1, from: deliveries, "the next stored message")
        #expect(next.map(\.message?.n) == [101] && next.map(\.reason) == [.posted])
    }

    @Test("a transient reply sent from an .ioThread handler goes out (the first transient send on the loop's thread)")
    func replyFromTheLoopThread() async throws {
        // Separate processes for the ping and for the echo, so the echo's first transient send
        // is made on the loop's thread, where the transient connection cannot be waited for.
        let echo = try fixture.wormhole()
        let replier = try echo.listen(identifier: "ping", as: JSONDocument.self, on: .ioThread) { delivery in
            guard case .success(let document) = delivery.result else { return }
            try? echo.passTransientMessage(document, identifier: "pong")
        }
        defer { replier.cancel() }
        let asker = try fixture.wormhole()
        let (pongs, record) = MessagingHarness.recorder(JSONDocument.self)
        let listener = try asker.listen(identifier: "pong", as: JSONDocument.self, handler: record)
        defer { listener.cancel() }
        try await fixture.runCLI(["send", "--transient", "--group", fixture.group, "ping", #"{"n":1}"#])
        try await fixture.runCLI(["send", "--transient", "--group", fixture.group, "ping", #"{"n":2}"#])
        let got = try await MessagingHarness.next(2, from: pongs, "the two replies")
        #expect(got.map { $0.message.map { String(decoding: $0.data, as: UTF8.self) } } == [#"{"n":1}"#, #"{"n":2}"#])
        #expect(got.allSatisfy { $0.reason == .transient })
    }

    @Test("1,000 transient messages from another process reach a stream in order, none coalesced")
    func ordering() async throws {
        let receiver = try fixture.wormhole()
        let stream = try await receiver.messages(identifier: "burst", as: MessagingCounter.self)
        try await peer("send-transient-many", "burst", 1000)
        let received = try await MessagingHarness.next(1000, from: stream, "1,000 transient messages")
        #expect(received.map(\.message?.n) == Array(0..<1000).map(Optional.some))
        #expect(received.allSatisfy { $0.reason == .transient })
    }

    @Test("a listener of all messages gets the transient messages of every identifier, with its name")
    func allMessages() async throws {
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        let sender = try fixture.wormhole()
        try sender.passTransientMessage(MessagingCounter(n: 1), identifier: "a")
        try sender.passTransientMessage(JSONDocument(data: Data(#"{ "n" : 2 }"#.utf8)), identifier: "b")
        let received = try await MessagingHarness.next(2, from: deliveries, "two transient messages")
        #expect(received.map(\.identifier.rawValue) == ["a", "b"])
        #expect(received.map(\.message?.n) == [1, 2])
        // The listener watches the wormhole directory beside the bus (made, empty, if missing):
        // no message is stored in it.
        let stored =
            (try? FileManager.default.contentsOfDirectory(atPath: "\(fixture.root.path)/\(fixture.group)/wormhole"))
            ?? []
        #expect(stored.isEmpty, "nothing stored: \(stored)")
    }

    @Test("a transient message over 64 KiB is refused before anything is sent, naming its size and the limit")
    func sizeLimit() async throws {
        let sender = try fixture.wormhole()
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(JSONDocument.self)
        let listener = try receiver.listen(identifier: "big", on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        // A JSON string of n characters is n + 2 bytes.
        let largest = String(repeating: "x", count: MessageCenter.transientMessageLimit - 2)
        let tooLarge = largest + "x"
        let error = #expect(throws: WormholeError.self) {
            try sender.passTransientMessage(tooLarge, identifier: "big")
        }
        #expect(error?.code == .transientTooLarge && error?.value == "big")
        #expect(
            error?.message.contains("65537 bytes") == true && error?.message.contains("65536") == true,
            "\(String(describing: error))")
        #expect(throws: WormholeError.self) {
            try sender.passTransientMessage(JSONDocument(data: Data(("\"" + tooLarge + "\"").utf8)), identifier: "big")
        }
        try sender.passTransientMessage(largest, identifier: "big")
        let received = try await MessagingHarness.next(1, from: deliveries, "the largest transient message")
        #expect(
            received.first?.message?.data.count == MessageCenter.transientMessageLimit, "the refused ones were not sent"
        )
    }

    @Test("a listener more than transientBufferLimit behind reports the drops, then delivers the newest in order")
    func boundedQueue() async throws {
        let receiver = try fixture.wormhole()
        let queue = DispatchQueue(label: "held")
        queue.suspend()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        // Registered first, so its route gets each signal before the witness's (same connection).
        let held = try receiver.listen(
            identifier: "fast", on: .queue(queue), options: .init(transientBufferLimit: 4), handler: handler)
        defer { held.cancel() }
        let (witnessed, witness) = MessagingHarness.recorder(MessagingCounter.self)
        let witnessListener = try receiver.listen(identifier: "fast", on: .ioThread, handler: witness)
        defer { witnessListener.cancel() }

        try await peer("send-transient-many", "fast", 20)
        _ = try await MessagingHarness.until(witnessed, "the 20th message at the witness") { $0.message?.n == 19 }
        queue.resume()
        let received = try await MessagingHarness.until(deliveries, "the newest message") { $0.message?.n == 19 }
        let drops = received.compactMap(\.error)
        #expect(drops.count == 1 && drops.first?.code == .transientDropped, "\(drops)")
        #expect(drops.first?.message.contains("16 transient message(s) for 'fast' dropped") == true, "\(drops)")
        #expect(received.first?.error != nil, "the report comes first")
        #expect(received.compactMap(\.message?.n) == [16, 17, 18, 19])
    }
}

// SPDX-License-Identifier: Apache-2.0
// The public messaging API explains itself: both identifier forms, raw bytes only through
// JSONDocument, streams that read in next(), listen-all that ignores names that are not
// identifiers, and one lazily connected center however many threads ask for it at once.

import Dispatch
import Foundation
import Synchronization
import Testing
import Wormhole
import WormholeDBus
import WormholeSystem
import WormholeTestSupport

@Suite("Messaging: one API for identifiers, documents, streams and the center", .sharedBus)
struct MessagingAPITests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    /// Sends through a generic context, as code that forwards any `Encodable` would.
    static func sendAnything<T: Encodable>(_ value: T, via wormhole: MessageCenter, as identifier: String) throws {
        try wormhole.passMessage(value, identifier: MessageIdentifier(identifier))
    }

    @Test("raw bytes go through JSONDocument as they are; Data is refused by name, nothing stored")
    func rawBytes() throws {
        let wormhole = try fixture.wormhole()
        let bytes = Data(#"{"n" : 1,"big":123456789012345678901234567890}"#.utf8)
        try wormhole.passMessage(JSONDocument(data: bytes), identifier: "doc")
        #expect(FileManager.default.contents(atPath: fixture.messagePath("doc")) == bytes, "stored byte for byte")
        try wormhole.passMessage(JSONDocument(data: Data("[2]".utf8)), identifier: MessageIdentifier("doc2"))
        #expect(try wormhole.messageData(identifier: "doc2") == Data("[2]".utf8))

        #expect {
            try Self.sendAnything(bytes, via: wormhole, as: "raw")
        } throws: { error in
            let error = error as? WormholeError
            return error?.code == .encodingFailed && error?.value == "raw"
                && error?.message.contains("JSONDocument(data:)") == true
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.messagePath("raw")))
        #expect(throws: WormholeError.self) { try JSONDocument(data: Data("{".utf8)) }
    }

    @Test("the String and MessageIdentifier forms do the same")
    func bothForms() throws {
        let wormhole = try fixture.wormhole()
        let typed = MessageIdentifier("typed")
        let first = try wormhole.passMessage(MessagingCounter(n: 1), identifier: typed)
        let second = try wormhole.passMessage(MessagingCounter(n: 2), identifier: "stringly")
        #expect(second.sentAt > first.sentAt)
        #expect(try wormhole.message(identifier: "typed", as: MessagingCounter.self)?.n == 1)
        #expect(try wormhole.message(identifier: MessageIdentifier("stringly"), as: MessagingCounter.self)?.n == 2)
        #expect(try wormhole.messageData(identifier: typed) == wormhole.messageData(identifier: "typed"))
        #expect(wormhole.passMessage(identifier: typed).notified)
        #expect(wormhole.passMessage(identifier: "typed").notified)
        try wormhole.clearMessage(identifier: typed)
        try wormhole.clearMessage(identifier: "stringly")
        #expect(try wormhole.messageData(identifier: typed) == nil)
        #expect(try wormhole.messageData(identifier: "stringly") == nil)
    }

    @Test("a message stream reads the mailbox in next(): messages sent before it is read coalesce into the latest")
    func streamReadsInNext() async throws {
        let receiver = try fixture.wormhole()
        let sender = try fixture.wormhole()
        let stream = try await receiver.messages(identifier: "latest", as: MessagingCounter.self)
        for n in 1...5 { try sender.passMessage(MessagingCounter(n: n), identifier: "latest") }
        let first = try #require(try await MessagingHarness.next(1, from: stream, "the first delivery").first)
        #expect(first.message?.n == 5, "read when asked for, so it is the latest stored message")
        #expect(first.reason == .posted)
        #expect(first.sentAt != nil)

        // A mailbox nobody observed while it was written: no wake of those sends can still be on
        // its way to this process (for "latest" one can: a post outranks the start-up check).
        for n in 1...5 { try sender.passMessage(MessagingCounter(n: n), identifier: "quiet") }
        let typed = try await receiver.messages(
            identifier: MessageIdentifier("quiet"), as: MessagingCounter.self,
            options: .init(deliversStoredMessageOnStart: true))
        let stored = try #require(try await MessagingHarness.next(1, from: typed, "the stored message").first)
        #expect(stored.reason == .stored)
        #expect(stored.message?.n == 5)
        #expect(stored.sentAt == nil)
    }

    @Test("listening to all messages ignores names below the prefix that are not identifiers (journal names)")
    func listenAllIgnoresOtherNames() async throws {
        let receiver = try fixture.wormhole()
        let sender = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(as: MessagingCounter.self, on: .ioThread, handler: handler)
        let stream = try await receiver.messages(as: MessagingCounter.self)
        let center = try sender.notificationCenter()
        let group = fixture.group
        for name in [
            "\(group)/wormhole/clip/journal", "\(group)/wormhole/", "\(group)/wormhole/.hidden",
            "\(group)/wormhole/a b", "\(group)/wormholeX/clip", "\(group)/",
        ] {
            try center.post(NotificationName(name), state: 1)
        }
        try sender.passMessage(MessagingCounter(n: 9), identifier: "sentinel")
        let delivered = try await MessagingHarness.next(1, from: deliveries, "the sentinel")
        #expect(delivered.map(\.identifier.rawValue) == ["sentinel"])
        let streamed = try await MessagingHarness.next(1, from: stream, "the sentinel, streamed")
        #expect(streamed.map(\.identifier.rawValue) == ["sentinel"])
        listener.cancel()
    }

    @Test("an .ioThread listener reads and delivers on the I/O thread; the default delivers on its own queue")
    func whereListenersRun() async throws {
        let receiver = try fixture.wormhole()
        let connection = try receiver.notificationCenter().connection
        let (onIO, onIOContinuation) = AsyncStream<Bool>.makeStream()
        let (onQueue, onQueueContinuation) = AsyncStream<Bool>.makeStream()
        let direct = try receiver.listen(identifier: "where", as: MessagingCounter.self, on: .ioThread) { _ in
            onIOContinuation.yield(connection.isOnIOThread)
        }
        let queued = try receiver.listen(identifier: "where", as: MessagingCounter.self) { _ in
            onQueueContinuation.yield(connection.isOnIOThread)
        }
        try fixture.wormhole().passMessage(MessagingCounter(n: 1), identifier: "where")
        #expect(try await MessagingHarness.next(1, from: onIO, "the .ioThread delivery") == [true])
        #expect(try await MessagingHarness.next(1, from: onQueue, "the .serial delivery") == [false])
        withExtendedLifetime((direct, queued)) {}
    }

    @Test("threads asking for the notification center at once all get the same one")
    func oneCenter() throws {
        let wormhole = try fixture.wormhole()
        let seen = Locked<Set<ObjectIdentifier>>([])
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do {
                let center = try wormhole.notificationCenter()
                seen.withLock { _ = $0.insert(ObjectIdentifier(center)) }
            } catch {
                failures.wrappingAdd(1, ordering: .relaxed)
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(seen.withLock { $0.count } == 1)
        wormhole.flush()
    }
}

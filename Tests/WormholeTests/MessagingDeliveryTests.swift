// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

@Suite("Messaging: what a listener is given", .sharedBus)
struct MessagingDeliveryTests {
    let fixture: MessagingFixture
    init() throws { fixture = try MessagingFixture() }

    @Test("after passMessage the file and the signal are exactly what the contract says")
    func contract() async throws {
        let raw = try await fixture.rawPosted()
        let wormhole = try fixture.wormhole()
        let texts = ["first", "a/b \"quoted\" é", "third"]
        let encoded = [#"{"text":"first"}"#, #"{"text":"a/b \"quoted\" é"}"#, #"{"text":"third"}"#]
        var reports: [MessageCenter.SendReport] = []
        for (text, expected) in zip(texts, encoded) {
            reports.append(try wormhole.passMessage(MessagingNote(text: text), identifier: "clip"))
            let path = fixture.messagePath("clip")
            let stored = FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
            #expect(stored == expected, "the file holds exactly the encoded JSON")
            #expect(try StorageFileStatus.permissions(path) == 0o600)
        }
        #expect(try StorageFileStatus.permissions("\(fixture.root.path)/\(fixture.group)") == 0o700)
        #expect(try StorageFileStatus.permissions("\(fixture.root.path)/\(fixture.group)/wormhole") == 0o700)
        #expect(
            try fixture.root.contents() == [
                fixture.group, "\(fixture.group)/wormhole",
                "\(fixture.group)/wormhole/clip.json",
            ])
        #expect(reports.allSatisfy { $0.notified })

        let name = "\(fixture.group)/wormhole/clip"
        let signals = try await MessagingHarness.next(texts.count, from: raw, "Posted signals")
        for (signal, report) in zip(signals, reports) {
            #expect(signal.path.rawValue == "/org/wormhole/Notify1")
            #expect(signal.member.rawValue == "Posted")
            #expect(signal.interface.rawValue == NotifyContract.bucketInterface(for: name))
            #expect(signal.signature == "st")
            #expect(try signal.string(at: 0) == name)
            #expect(try signal.uint64(at: 1) == report.sentAt)
        }
        let states = try signals.map { try $0.uint64(at: 1) }
        #expect(Set(states).count == texts.count, "a state that differs for every write: \(states)")
        #expect(states == states.sorted(), "states are write times, increasing within a process")
    }

    @Test("deliversStoredMessageOnStart delivers what is stored first, and nothing for an empty mailbox")
    func storedOnStart() async throws {
        let sender = try fixture.wormhole()
        try sender.passMessage(MessagingCounter(n: 7), identifier: "stored")
        let receiver = try fixture.wormhole()
        let options = MessageCenter.ListenOptions(deliversStoredMessageOnStart: true)
        let (stored, onStored) = MessagingHarness.recorder(MessagingCounter.self)
        let first = try receiver.listen(
            identifier: "stored", on: .queue(DispatchQueue(label: "t")), options: options, handler: onStored)
        defer { first.cancel() }
        let (empty, onEmpty) = MessagingHarness.recorder(MessagingCounter.self)
        let second = try receiver.listen(
            identifier: "empty", on: .queue(DispatchQueue(label: "t")), options: options, handler: onEmpty)
        defer { second.cancel() }

        let delivery = try #require(try await MessagingHarness.next(1, from: stored, "the stored message").first)
        #expect(delivery.reason == .stored)
        #expect(delivery.message == MessagingCounter(n: 7))
        #expect(delivery.sentAt == nil)

        // The empty mailbox: the first thing its listener sees is the post made now, not a .noMessage.
        try sender.passMessage(MessagingCounter(n: 8), identifier: "empty")
        let next = try #require(try await MessagingHarness.next(1, from: empty, "the first post").first)
        #expect(next.reason == .posted)
        #expect(next.message == MessagingCounter(n: 8))
    }

    @Test("listen gets every identifier of its wormhole and nothing from another directory")
    func allMessages() async throws {
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        let sender = try fixture.wormhole()
        let elsewhere = try fixture.wormhole(directory: "wormhole-other")
        let neighbour = try fixture.wormhole(directory: "wormholeX")
        try elsewhere.passMessage(MessagingCounter(n: -1), identifier: "a")
        try neighbour.passMessage(MessagingCounter(n: -2), identifier: "b")
        // The same names again through the sender's own connection, so that they reach the bus
        // before the end message does (one connection's signals stay in order).
        let center = try sender.notificationCenter()
        let group = fixture.group
        try sender.passMessage(MessagingCounter(n: 1), identifier: "a")
        try center.post(NotificationName("\(group)/wormhole-other/a"), state: 1)
        try center.post(NotificationName("\(group)/wormholeX/b"), state: 2)
        try center.post(NotificationName("\(group)/wormhole"), state: 3)
        try sender.passMessage(MessagingCounter(n: 2), identifier: "b")
        try center.post(NotificationName("\(group)/wormhole-other/end"), state: 4)
        try sender.passMessage(MessagingCounter(n: 3), identifier: "end")
        let received = try await MessagingHarness.until(deliveries, "the end message") {
            $0.identifier.rawValue == "end"
        }
        #expect(received.map(\.identifier.rawValue) == ["a", "b", "end"])
        #expect(received.map(\.message) == [MessagingCounter(n: 1), MessagingCounter(n: 2), MessagingCounter(n: 3)])
        #expect(received.allSatisfy { $0.reason == .posted && $0.sentAt != nil })
    }

    @Test("with deliversEveryPost, passMessage(identifier:) wakes listeners, which deliver the stored message again")
    func wakeUp() async throws {
        let sender = try fixture.wormhole()
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingNote.self)
        let listener = try receiver.listen(
            identifier: "clip", on: .queue(DispatchQueue(label: "t")), options: .init(deliversEveryPost: true),
            handler: handler)
        defer { listener.cancel() }
        let stored = try sender.passMessage(MessagingNote(text: "once"), identifier: "clip")
        let first = try await MessagingHarness.next(1, from: deliveries, "the message")
        // Waiting for the first delivery keeps the two posts from being coalesced into one.
        let woken = sender.passMessage(identifier: "clip")
        let second = try await MessagingHarness.next(1, from: deliveries, "the wake-up")
        let received = first + second
        #expect(received.map(\.message) == [MessagingNote(text: "once"), MessagingNote(text: "once")])
        #expect(received.map(\.reason) == [.posted, .posted])
        #expect(received.map(\.sentAt) == [stored.sentAt, woken.sentAt])
        #expect(woken.sentAt > stored.sentAt)
    }

    @Test("by default a post that finds the file last delivered delivers nothing; a changed file is delivered")
    func duplicateSkipped() async throws {
        let sender = try fixture.wormhole()
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingNote.self)
        let listener = try receiver.listen(identifier: "clip", on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        try sender.passMessage(MessagingNote(text: "once"), identifier: "clip")
        #expect(try await MessagingHarness.next(1, from: deliveries, "the message").map(\.message?.text) == ["once"])
        // The same file again: a wake, and the same document stored again. Neither is delivered.
        sender.passMessage(identifier: "clip")
        try sender.passMessage(MessagingNote(text: "once"), identifier: "clip")
        // A file replaced without a post (storage alone), then a wake: it changed, so it is delivered.
        let storage = FileTransiting(
            container: try GroupContainer(group: GroupIdentifier(fixture.group), root: fixture.root.path))
        try storage.writeMessage(Data(#"{"text":"by hand"}"#.utf8), identifier: MessageIdentifier("clip"))
        sender.passMessage(identifier: "clip")
        let next = try await MessagingHarness.next(1, from: deliveries, "the changed file")
        #expect(next.map(\.message?.text) == ["by hand"], "the unchanged posts before it delivered nothing")
        #expect(next.map(\.reason) == [.posted])
    }

    @Test("clearAllMessages notifies each identifier that had a message, which then delivers .noMessage")
    func clearAll() async throws {
        let sender = try fixture.wormhole()
        for identifier in ["a", "b", "c"] {
            try sender.passMessage(MessagingCounter(n: 1), identifier: MessageIdentifier(identifier))
        }
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        let reports = try sender.clearAllMessages()
        #expect(reports.count == 3)
        #expect(reports.allSatisfy { $0.notified })
        #expect(try sender.message(identifier: "a", as: MessagingCounter.self) == nil)
        let received = try await MessagingHarness.next(3, from: deliveries, "three cleared mailboxes")
        #expect(Set(received.map(\.identifier.rawValue)) == ["a", "b", "c"])
        for delivery in received {
            #expect(delivery.error?.code == .noMessage)
            #expect(delivery.error?.value == delivery.identifier.rawValue)
        }
        #expect(try fixture.root.contents() == [fixture.group, "\(fixture.group)/wormhole"])
    }

    @Test("a coordinated-file wormhole round-trips through another coordinated-file wormhole")
    func coordinated() async throws {
        let sender = try fixture.wormhole(transiting: .coordinatedFile)
        let receiver = try fixture.wormhole(transiting: .coordinatedFile)
        #expect(sender.transiting is CoordinatedFileTransiting)
        let (deliveries, handler) = MessagingHarness.recorder(MessagingNote.self)
        let listener = try receiver.listen(
            identifier: "locked", on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }
        try sender.passMessage(MessagingNote(text: "coordinated"), identifier: "locked")
        let delivery = try #require(try await MessagingHarness.next(1, from: deliveries, "the message").first)
        #expect(delivery.message == MessagingNote(text: "coordinated"))
        #expect(
            try receiver.message(identifier: "locked", as: MessagingNote.self) == MessagingNote(text: "coordinated"))
        // The same contract file, readable by a plain-file wormhole.
        #expect(try fixture.wormhole().message(identifier: "locked", as: MessagingNote.self)?.text == "coordinated")
        #expect(
            FileManager.default.contents(atPath: fixture.messagePath("locked")) == Data(#"{"text":"coordinated"}"#.utf8)
        )
    }

    @Test(
        "the async stream ends when its task is cancelled, and its match rules go",
        .disabled(
            if: TestBusDaemon.isBroker, "reads match-rule counts from Debug.Stats, which dbus-broker does not implement"
        ))
    func streamCancellation() async throws {
        // It counts the rules of the process's one connection to its bus: a bus of its own, not
        // the suite's.
        let fixture = try MessagingFixture(bus: TestBus())
        let receiver = try fixture.wormhole()
        let connection = try receiver.notificationCenter().connection
        let baseline = try await MessagingHarness.settledRuleCount(fixture.bus, connection)
        let stream = try await receiver.messages(identifier: "streamed", as: MessagingCounter.self)
        // The two Posted rules of the name and its two Message rules (transient messages).
        #expect(try await MessagingHarness.settledRuleCount(fixture.bus, connection) == baseline + 4)
        let (seen, seenContinuation) = AsyncStream<Int>.makeStream()
        let task = Task {
            var count = 0
            for await delivery in stream {
                count += 1
                seenContinuation.yield(delivery.message?.n ?? -1)
            }
            return count
        }
        try fixture.wormhole().passMessage(MessagingCounter(n: 5), identifier: "streamed")
        #expect(try await MessagingHarness.next(1, from: seen, "the streamed message") == [5])
        task.cancel()
        let count = try await MessagingHarness.within("the cancelled iteration to end") { await task.value }
        #expect(count == 1)
        #expect(try await MessagingHarness.settledRuleCount(fixture.bus, connection) == baseline)
    }

    @Test("several listeners for one identifier each get the message")
    func severalListeners() async throws {
        let receiver = try fixture.wormhole()
        let other = try fixture.wormhole()
        let recorders = (0..<3).map { _ in MessagingHarness.recorder(MessagingCounter.self) }
        let listeners = [
            try receiver.listen(identifier: "shared", on: .queue(DispatchQueue(label: "t0")), handler: recorders[0].1),
            try receiver.listen(identifier: "shared", on: .ioThread, handler: recorders[1].1),
            try other.listen(identifier: "shared", on: .queue(DispatchQueue(label: "t2")), handler: recorders[2].1),
        ]
        defer { for listener in listeners { listener.cancel() } }
        let stream = try await receiver.messages(identifier: "shared", as: MessagingCounter.self)
        try fixture.wormhole().passMessage(MessagingCounter(n: 42), identifier: "shared")
        for (deliveries, _) in recorders {
            let delivery = try await MessagingHarness.next(1, from: deliveries, "the shared message")
            #expect(delivery.first?.message == MessagingCounter(n: 42))
        }
        #expect(try await MessagingHarness.next(1, from: stream, "the streamed message").first?.message?.n == 42)
    }

    @Test("a handler runs on the queue the caller chose")
    func callerQueue() async throws {
        let receiver = try fixture.wormhole()
        let queue = DispatchQueue(label: "test.messaging.caller")
        let key = DispatchSpecificKey<String>()
        queue.setSpecific(key: key, value: "caller")
        let (onQueue, continuation) = AsyncStream<String?>.makeStream()
        let listener = try receiver.listen(identifier: "q", as: MessagingCounter.self, on: .queue(queue)) { _ in
            continuation.yield(DispatchQueue.getSpecific(key: key))
        }
        defer { listener.cancel() }
        try fixture.wormhole().passMessage(MessagingCounter(n: 1), identifier: "q")
        #expect(try await MessagingHarness.next(1, from: onQueue, "the delivery") == ["caller"])
    }

    @Test("an undecodable file is a .decodingFailed delivery naming the identifier; the next message arrives")
    func corruptFile() async throws {
        let sender = try fixture.wormhole()
        let receiver = try fixture.wormhole()
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let listener = try receiver.listen(identifier: "doc", on: .queue(DispatchQueue(label: "t")), handler: handler)
        defer { listener.cancel() }

        try sender.passMessage(MessagingCounter(n: 1), identifier: "doc")
        #expect(try await MessagingHarness.next(1, from: deliveries, "message 1").first?.message?.n == 1)

        for (corrupt, what) in [
            (#"{"n": "#, "truncated JSON"), (#"{"n":"one"}"#, "the wrong type"), ("", "an empty file"),
        ] {
            try fixture.writeRawMessage(corrupt, identifier: "doc")
            sender.passMessage(identifier: "doc")
            let failed = try #require(try await MessagingHarness.next(1, from: deliveries, what).first)
            #expect(failed.error?.code == .decodingFailed, "\(what)")
            #expect(failed.error?.value == "doc")
            #expect(failed.error?.message.contains("'doc'") == true, "\(failed.error?.message ?? "")")
            #expect(failed.identifier.rawValue == "doc")
        }

        try sender.passMessage(MessagingCounter(n: 2), identifier: "doc")
        #expect(try await MessagingHarness.next(1, from: deliveries, "message 2").first?.message?.n == 2)

        try sender.clearMessage(identifier: "doc")
        let cleared = try #require(try await MessagingHarness.next(1, from: deliveries, "the cleared mailbox").first)
        #expect(cleared.error?.code == .noMessage)
        #expect(cleared.error?.value == "doc")
        #expect(!FileManager.default.fileExists(atPath: fixture.messagePath("doc")))

        try sender.passMessage(MessagingCounter(n: 3), identifier: "doc")
        #expect(try await MessagingHarness.next(1, from: deliveries, "message 3").first?.message?.n == 3)
    }
}

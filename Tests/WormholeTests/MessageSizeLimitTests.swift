// SPDX-License-Identifier: Apache-2.0
// The maximum message size (defect #5): a message over the limit is refused with an error naming
// the identifier, its size and the limit, on the write before anything is written, on the read
// from the file's size before a byte of it is read. The planted files are sparse (ftruncate), far
// larger than this machine's memory: reading one would crash the test, not slow it down.

import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// A sparse file of `size` bytes at `path` (mode 0600): no disk blocks, so any size is cheap.
func plantSparseFile(_ path: String, size: Int) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw TestFailure("open \(path) failed: errno \(errno)") }
    defer { close(fd) }
    guard ftruncate(fd, off_t(size)) == 0 else { throw TestFailure("ftruncate \(path) failed: errno \(errno)") }
}

@Suite(.sharedBus) struct MessageSizeLimitTests {
    /// 64 GiB: more than this machine's memory and swap together.
    static let hugeSize = 64 << 30

    @Test func theDefaultLimitIs64MiB() throws {
        #expect(FileTransiting.defaultMaximumMessageSize == 67_108_864)
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        #expect(FileTransiting(container: container).maximumMessageSize == 67_108_864)
        #expect(CoordinatedFileTransiting(container: container).maximumMessageSize == 67_108_864)
        #expect(FileTransiting(container: container, maximumMessageSize: -5).maximumMessageSize == 0)
        let wormhole = try MessageCenter(applicationGroupIdentifier: "g", containerRoot: temp.child("root"))
        #expect(wormhole.maximumMessageSize == 67_108_864)
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func aWriteOverTheLimitIsRefusedBeforeAnythingIsWritten(kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let limited: any WormholeTransiting =
            switch kind {
            case .file: FileTransiting(container: container, maximumMessageSize: 100)
            case .coordinated: CoordinatedFileTransiting(container: container, maximumMessageSize: 100)
            }
        let id = storageIdentifier("m")
        try limited.writeMessage(Data(repeating: UInt8(ascii: "7"), count: 100), identifier: id)
        let error = #expect(throws: WormholeError.self) {
            try limited.writeMessage(
                Data(repeating: UInt8(ascii: "7"), count: 101), identifier: storageIdentifier("big"))
        }
        #expect(error?.code == .messageTooLarge)
        #expect(error?.value == "big")
        #expect(error?.message.contains("101 bytes") == true && error?.message.contains("limit of 100 bytes") == true)
        // Nothing was written: no message, no temporary file.
        #expect(try temp.contents().filter { $0.contains("big") } == [])
        #expect(try limited.storedIdentifiers() == [id])
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func aPlantedHugeFileIsRefusedFromItsSize(kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = kind.make(container)
        try container.createDirectory(.default)
        try plantSparseFile(container.directoryPath(.default) + "/huge.json", size: Self.hugeSize)
        let error = #expect(throws: WormholeError.self) {
            _ = try transiting.messageData(identifier: storageIdentifier("huge"))
        }
        #expect(error?.code == .messageTooLarge)
        #expect(error?.value == "huge")
        #expect(
            error?.message.contains("\(Self.hugeSize) bytes, over the limit of 67108864 bytes") == true,
            "\(String(describing: error))")
        // A file just at the limit is read; one byte over is not.
        let small = FileTransiting(container: container, maximumMessageSize: 10)
        try plantSparseFile(container.directoryPath(.default) + "/ten.json", size: 10)
        #expect(try small.messageData(identifier: storageIdentifier("ten"))?.count == 10)
        try plantSparseFile(container.directoryPath(.default) + "/ten.json", size: 11)
        #expect(throws: WormholeError.self) { _ = try small.messageData(identifier: storageIdentifier("ten")) }
    }

    @Test func passMessageOverTheLimitIsRefusedForEveryTransiting() throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        // A custom transiting that would store anything: the wormhole checks the size itself.
        let custom = FileTransiting(container: container, maximumMessageSize: .max)
        let wormhole = try MessageCenter(
            applicationGroupIdentifier: "g", transiting: .custom(custom), containerRoot: temp.child("root"),
            busAddress: BusAddressForTests.unreachable, maximumMessageSize: 16, logger: MessagingHarness.logger)
        let error = #expect(throws: WormholeError.self) {
            try wormhole.passMessage(["text": "more than sixteen bytes"], identifier: "note")
        }
        #expect(error?.code == .messageTooLarge)
        #expect(error?.value == "note")
        #expect(throws: WormholeError.self) {
            try wormhole.passMessage(try JSONDocument(data: Data("[1,2,3,4,5,6,7,8,9]".utf8)), identifier: "note")
        }
        #expect(try custom.storedIdentifiers() == [])
        try wormhole.passMessage([1, 2], identifier: "note")
        #expect(try custom.storedIdentifiers() == [storageIdentifier("note")])
    }

    @Test func aListenerReportsAHugeFileWithoutReadingIt() async throws {
        let fixture = try MessagingFixture()
        let wormhole = try fixture.wormhole()
        try fixture.writeRawMessage("{}", identifier: "huge")
        try plantSparseFile(fixture.messagePath("huge"), size: Self.hugeSize)
        let (deliveries, handler) = MessagingHarness.recorder(JSONDocument.self)
        let listener = try wormhole.listen(
            identifier: "huge", as: JSONDocument.self, options: .init(deliversStoredMessageOnStart: true),
            handler: handler)
        defer { listener.cancel() }
        let first = try await MessagingHarness.next(1, from: deliveries, "the start-up delivery")
        #expect(first.first?.reason == .stored)
        #expect(throws: WormholeError.self) { _ = try first.first?.result.get() }
        if case .failure(let error)? = first.first?.result {
            #expect(error.code == .messageTooLarge)
            #expect(error.value == "huge")
        }
        // A post is reported the same way, and a message within the limit then goes through.
        wormhole.passMessage(identifier: "huge")
        let second = try await MessagingHarness.next(1, from: deliveries, "the posted delivery")
        if case .failure(let error)? = second.first?.result {
            #expect(error.code == .messageTooLarge)
        } else {
            Issue.record("expected a failure, got \(String(describing: second.first))")
        }
        try wormhole.passMessage(["ok": true], identifier: "huge")
        let third = try await MessagingHarness.next(1, from: deliveries, "the message within the limit")
        #expect(try third.first?.result.get().compactText == #"{"ok":true}"#)
    }
}

enum BusAddressForTests {
    /// A bus address nobody serves: sends store and report that nobody was notified.
    static var unreachable: BusAddress { try! BusAddress("unix:path=/nonexistent/wormhole-no-bus") }
}

@Suite(.sharedBus) struct ListenManyTests {
    @Test func listenToManyIdentifiersAtOnceIsActiveOnReturnAndSerial() async throws {
        let fixture = try MessagingFixture()
        let receiver = try fixture.wormhole()
        let sender = try fixture.wormhole()
        let identifiers = (0..<300).map { "id\($0)" }
        let (deliveries, handler) = MessagingHarness.recorder(MessagingCounter.self)
        let overlap = ListenManyOverlap()
        let listeners = try receiver.listen(
            identifiers: identifiers.map { try MessageIdentifier($0) }, as: MessagingCounter.self
        ) { delivery in
            overlap.enter()
            handler(delivery)
            overlap.leave()
        }
        defer { for listener in listeners { listener.cancel() } }
        #expect(listeners.count == 300)
        for index in [0, 149, 299] {
            try sender.passMessage(MessagingCounter(n: index), identifier: MessageIdentifier("id\(index)"))
        }
        let got = try await MessagingHarness.next(3, from: deliveries, "the three deliveries")
        #expect(Set(got.map(\.identifier.rawValue)) == ["id0", "id149", "id299"])
        #expect(got.allSatisfy { (try? $0.result.get().n) == Int($0.identifier.rawValue.dropFirst(2)) })
        #expect(!overlap.overlapped)
        #expect(throws: WormholeError.self) {
            _ = try receiver.listen(identifiers: ["ok", "a/b"].map { try MessageIdentifier($0) }) {
                (_: MessageDelivery<MessagingCounter>) in
            }
        }
    }
}

/// Records whether two handler calls ever ran at once.
private final class ListenManyOverlap: Sendable {
    private let running = Atomic<Int>(0)
    private let seen = Atomic<Bool>(false)
    func enter() { if running.add(1, ordering: .relaxed).newValue > 1 { seen.store(true, ordering: .relaxed) } }
    func leave() { running.subtract(1, ordering: .relaxed) }
    var overlapped: Bool { seen.load(ordering: .relaxed) }
}

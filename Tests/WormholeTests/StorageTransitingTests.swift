// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeSystem

/// Round trips through both transitings (contract §3), on real files.
@Suite struct StorageTransitingTests {
    /// A fresh container under a temporary root, and the path of its default wormhole directory.
    struct Fixture {
        let temp: StorageTempDirectory
        let container: GroupContainer
        var directory: String { container.directoryPath(.default) }

        init() throws {
            temp = try StorageTempDirectory()
            container = try GroupContainer(group: storageGroup("group.com.example.lines"), root: temp.child("root"))
        }

        func names() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        }
    }

    @Test(arguments: StorageTransitingKind.allCases, [FileTransiting.Durability.atomic, .synchronized])
    func roundTripAndReplace(kind: StorageTransitingKind, durability: FileTransiting.Durability) throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let transiting = kind.make(fixture.container, durability: durability)
        let clip = storageIdentifier("clip")

        #expect(try transiting.messageData(identifier: clip) == nil)
        try transiting.writeMessage(Data(#"{"text":"first"}"#.utf8), identifier: clip)
        #expect(try transiting.messageData(identifier: clip) == Data(#"{"text":"first"}"#.utf8))
        try transiting.writeMessage(Data(#"[1,2]"#.utf8), identifier: clip)
        #expect(try transiting.messageData(identifier: clip) == Data(#"[1,2]"#.utf8))
        // The file holds the document and nothing else.
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.directory + "/clip.json")) == Data("[1,2]".utf8))
        // An empty document is stored as it is (transiting does not parse).
        try transiting.writeMessage(Data(), identifier: clip)
        #expect(try transiting.messageData(identifier: clip) == Data())

        // No temporary file is left behind.
        let expected = kind == .coordinated ? [".clip.lock", "clip.json"] : ["clip.json"]
        #expect(try fixture.names() == expected)
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func modesAre0600ForFilesAnd0700ForDirectories(kind: StorageTransitingKind) throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        try kind.make(fixture.container).writeMessage(Data("{}".utf8), identifier: storageIdentifier("m"))

        #expect(try StorageFileStatus.permissions(fixture.container.root) == 0o700)
        #expect(try StorageFileStatus.permissions(fixture.container.path) == 0o700)
        #expect(try StorageFileStatus.permissions(fixture.directory) == 0o700)
        #expect(try StorageFileStatus.permissions(fixture.directory + "/m.json") == 0o600)
        if kind == .coordinated {
            #expect(try StorageFileStatus.permissions(fixture.directory + "/.m.lock") == 0o600)
        }
    }

    @Test(arguments: StorageTransitingKind.allCases, [1 << 20, (5 << 20) + 7])
    func largeDocument(kind: StorageTransitingKind, size: Int) throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let transiting = kind.make(fixture.container)
        // Numbered chunks of random text, so that a missing, repeated or misplaced chunk would show.
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        let chunk = (0..<4088).map { _ in alphabet.randomElement()! }
        var bytes = Array(#"{"blob":""#.utf8)
        bytes.reserveCapacity(size)
        var index = 0
        while bytes.count + 8 + chunk.count < size - 2 {
            bytes.append(contentsOf: String(format: "%08d", index).utf8)
            bytes.append(contentsOf: chunk)
            index += 1
        }
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "z"), count: size - 2 - bytes.count))
        bytes.append(contentsOf: #""}"#.utf8)
        let document = Data(bytes)
        #expect(document.count == size)

        try transiting.writeMessage(document, identifier: storageIdentifier("big"))
        let read = try #require(try transiting.messageData(identifier: storageIdentifier("big")))

        #expect(read.count == document.count)
        #expect(read == document)
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func deleteAndDeleteAll(kind: StorageTransitingKind) throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let transiting = kind.make(fixture.container)
        for name in ["a", "b", "c"] {
            try transiting.writeMessage(Data(#"{"n":"\#(name)"}"#.utf8), identifier: storageIdentifier(name))
        }

        try transiting.deleteMessage(identifier: storageIdentifier("b"))
        #expect(try transiting.messageData(identifier: storageIdentifier("b")) == nil)
        #expect(try transiting.messageData(identifier: storageIdentifier("a")) == Data(#"{"n":"a"}"#.utf8))
        #expect(try transiting.storedIdentifiers() == [storageIdentifier("a"), storageIdentifier("c")])
        // Deleting what is not there is not an error.
        try transiting.deleteMessage(identifier: storageIdentifier("b"))
        try transiting.deleteMessage(identifier: storageIdentifier("never"))

        try transiting.deleteAllMessages()
        #expect(try transiting.storedIdentifiers() == [])
        #expect(try transiting.messageData(identifier: storageIdentifier("a")) == nil)
        #expect(try fixture.names().filter { $0.hasSuffix(".json") } == [])
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func storedIdentifiersSkipsEverythingButMessages(kind: StorageTransitingKind) throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let transiting = kind.make(fixture.container)
        try transiting.writeMessage(Data("1".utf8), identifier: storageIdentifier("zeta"))
        try transiting.writeMessage(Data("2".utf8), identifier: storageIdentifier("alpha.v2"))
        let junk = [
            ".zeta.1234-deadbeef.tmp", ".alpha.lock", ".hidden.json", "notes.txt", "bad name.json", "json",
            ".json", "trailing.json.bak", "a%2Fb.json",
        ]
        for name in junk {
            #expect(FileManager.default.createFile(atPath: fixture.directory + "/" + name, contents: Data("x".utf8)))
        }
        try FileManager.default.createDirectory(
            atPath: fixture.directory + "/folder.json", withIntermediateDirectories: false)

        #expect(try transiting.storedIdentifiers() == [storageIdentifier("alpha.v2"), storageIdentifier("zeta")])

        try transiting.deleteAllMessages()
        #expect(try transiting.storedIdentifiers() == [])
        // deleteAll removes messages only.
        let left = Set(try fixture.names())
        #expect(left.isSuperset(of: junk + ["folder.json"]))
        #expect(!left.contains("zeta.json") && !left.contains("alpha.v2.json"))
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func directoriesAreSeparate(kind: StorageTransitingKind) throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let inbox = kind.make(fixture.container, directory: try WormholeDirectoryName("inbox"))
        let outbox = kind.make(fixture.container, directory: try WormholeDirectoryName("outbox"))
        try inbox.writeMessage(Data("1".utf8), identifier: storageIdentifier("m"))

        #expect(try outbox.messageData(identifier: storageIdentifier("m")) == nil)
        #expect(FileManager.default.fileExists(atPath: fixture.container.path + "/inbox/m.json"))
        #expect(try StorageFileStatus.permissions(fixture.container.path + "/inbox") == 0o700)
    }

    @Test func bothTransitingsShareTheLayout() throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let file = FileTransiting(container: fixture.container)
        let coordinated = CoordinatedFileTransiting(container: fixture.container)
        try file.writeMessage(Data("1".utf8), identifier: storageIdentifier("m"))
        #expect(try coordinated.messageData(identifier: storageIdentifier("m")) == Data("1".utf8))
        try coordinated.writeMessage(Data("2".utf8), identifier: storageIdentifier("m"))
        #expect(try file.messageData(identifier: storageIdentifier("m")) == Data("2".utf8))
        #expect(coordinated.container == fixture.container && coordinated.directory == .default)
        #expect(file.durability == .atomic)
    }

    @Test func updateIsAReadModifyWrite() throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let transiting = CoordinatedFileTransiting(container: fixture.container)
        let counter = storageIdentifier("counter")
        var seen: [Data?] = []
        for _ in 0..<3 {
            try transiting.updateMessage(identifier: counter) { old in
                seen.append(old)
                return Data("\(seen.count)".utf8)
            }
        }
        #expect(seen == [nil, Data("1".utf8), Data("2".utf8)])
        #expect(try transiting.messageData(identifier: counter) == Data("3".utf8))

        // A transform that throws stores nothing.
        struct Refused: Error {}
        #expect(throws: Refused.self) {
            try transiting.updateMessage(identifier: counter) { _ in throw Refused() }
        }
        #expect(try transiting.messageData(identifier: counter) == Data("3".utf8))
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func concurrentThreadsNeverTearTheFile(kind: StorageTransitingKind) throws {
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let transiting = kind.make(fixture.container)
        let identifier = storageIdentifier("shared")
        let failures = Locked<[String]>([])
        // Real threads, not tasks: the coordinated transiting blocks in flock.
        var bodies: [@Sendable () -> Void] = [10_000, 150_000].map { size in
            {
                do {
                    for sequence in 0..<60 {
                        try transiting.writeMessage(
                            StorageTortureDocument.make(sequence: sequence, size: size), identifier: identifier)
                    }
                } catch {
                    failures.withLock { $0.append("write: \(error)") }
                }
            }
        }
        bodies.append {
            do {
                for _ in 0..<200 {
                    if let data = try transiting.messageData(identifier: identifier),
                        StorageTortureDocument.validSize(data) == nil
                    {
                        failures.withLock { $0.append("torn read: \(data.count) bytes") }
                    }
                }
            } catch {
                failures.withLock { $0.append("read: \(error)") }
            }
        }
        storageRunOnThreads(bodies)

        #expect(failures.withLock { $0 } == [])
        let final = try #require(try transiting.messageData(identifier: identifier))
        #expect(StorageTortureDocument.validSize(final) != nil)
    }

    @Test func failedWriteLeavesNoTemporaryFileAndKeepsTheOldMessage() throws {
        let peer = try StoragePeer.executable()
        let fixture = try Fixture()
        defer { fixture.temp.remove() }
        let transiting = FileTransiting(container: fixture.container)
        let old = StorageTortureDocument.make(sequence: 0, size: 100)
        try transiting.writeMessage(old, identifier: storageIdentifier("m"))

        // The peer writes 200 kB with a 50 kB file-size limit: write(2) fails with EFBIG midway.
        let ending = try StoragePeer.run(
            peer, ["write-limited", fixture.container.root, fixture.container.group.rawValue, "m", "200000", "50000"])

        #expect(ending == .exited(1))
        #expect(try fixture.names() == ["m.json"])
        #expect(try transiting.messageData(identifier: storageIdentifier("m")) == old)
    }
}

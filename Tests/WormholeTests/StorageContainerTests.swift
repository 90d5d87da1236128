// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Testing
import Wormhole

/// Group containers (contract §2): where they are, how they are created, and what is refused.
@Suite struct StorageContainerTests {
    // MARK: Root resolution

    struct RootCase: Sendable, CustomTestStringConvertible {
        var environment: [String: String]
        var expected: String?
        var testDescription: String { "\(environment.sorted { $0.key < $1.key }) → \(expected ?? "error")" }
    }

    static let rootCases: [RootCase] = [
        RootCase(
            environment: ["WORMHOLE_CONTAINER_ROOT": "/srv/c", "XDG_DATA_HOME": "/x", "HOME": "/h"],
            expected: "/srv/c"),
        RootCase(environment: ["WORMHOLE_CONTAINER_ROOT": "/srv/c//"], expected: "/srv/c"),
        RootCase(environment: ["WORMHOLE_CONTAINER_ROOT": "", "XDG_DATA_HOME": "/x"], expected: "/x/group-containers"),
        RootCase(environment: ["XDG_DATA_HOME": "/x/", "HOME": "/h"], expected: "/x/group-containers"),
        RootCase(environment: ["XDG_DATA_HOME": "", "HOME": "/h"], expected: "/h/.local/share/group-containers"),
        RootCase(
            environment: ["XDG_DATA_HOME": "rel/data", "HOME": "/h"], expected: "/h/.local/share/group-containers"),
        RootCase(environment: ["HOME": "/h"], expected: "/h/.local/share/group-containers"),
        RootCase(environment: ["HOME": "/"], expected: "/.local/share/group-containers"),
        RootCase(environment: [:], expected: nil),
        RootCase(environment: ["HOME": "", "XDG_DATA_HOME": ""], expected: nil),
        RootCase(environment: ["HOME": "relative"], expected: nil),
        RootCase(environment: ["WORMHOLE_CONTAINER_ROOT": "relative/root", "HOME": "/h"], expected: nil),
    ]

    @Test(arguments: rootCases)
    func rootDirectory(_ rootCase: RootCase) throws {
        if let expected = rootCase.expected {
            #expect(try GroupContainer.rootDirectory(environment: rootCase.environment) == expected)
        } else {
            let error = try #require(throws: WormholeError.self) {
                try GroupContainer.rootDirectory(environment: rootCase.environment)
            }
            #expect(error.code == .noContainerRoot)
        }
    }

    @Test func relativeExplicitRootIsRefusedAndNamed() throws {
        let error = try #require(throws: WormholeError.self) {
            try GroupContainer(group: storageGroup("g"), root: "some/where")
        }
        #expect(error.code == .noContainerRoot)
        #expect(error.message.contains("'some/where'"))
    }

    @Test func pathIsRootSlashGroup() throws {
        let container = try GroupContainer(group: storageGroup("group.com.example.lines"), root: "/data/c/")
        #expect(container.path == "/data/c/group.com.example.lines")
        #expect(container.directoryPath(.default) == "/data/c/group.com.example.lines/wormhole")
    }

    // MARK: Creation

    @Test func createMakesRootParentsContainerAndDirectoryWithMode0700() throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let root = temp.child("a", "b", "root")
        let container = try GroupContainer(group: storageGroup("group.test"), root: root)

        try container.create()
        let directory = try container.createDirectory(WormholeDirectoryName("inbox"))

        #expect(directory == root + "/group.test/inbox")
        for path in [temp.child("a"), temp.child("a", "b"), root, container.path, directory] {
            let status = try StorageFileStatus(path)
            #expect(status.type == 0o040000, "\(path)")
            #expect(status.permissions == 0o700, "\(path) has mode \(String(status.permissions, radix: 8))")
        }
        // Creating again is a no-op.
        try container.create()
        try container.createDirectory(WormholeDirectoryName("inbox"))
    }

    @Test func readingAnAbsentContainerCreatesNothing() throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        for kind in StorageTransitingKind.allCases {
            let transiting = kind.make(container)
            #expect(try transiting.messageData(identifier: storageIdentifier("x")) == nil)
            #expect(try transiting.storedIdentifiers() == [])
            try transiting.deleteMessage(identifier: storageIdentifier("x"))
            try transiting.deleteAllMessages()
        }
        #expect(try temp.contents() == [])
    }

    // MARK: Refusals

    /// A directory and a file outside the container that a planted symlink points to, with a
    /// snapshot to check they were not touched.
    struct SymlinkTarget {
        let directory: String
        let file: String
        let contents: Data = Data(#"{"secret":true}"#.utf8)
        var snapshot: [String: StorageFileStatus] = [:]

        init(in temp: StorageTempDirectory) throws {
            directory = temp.child("target")
            file = temp.child("target", "victim.json")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try contents.write(to: URL(fileURLWithPath: file))
            // Make the times distinguishable from anything the test does afterwards.
            var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, file, &times, 0) == 0)
            #expect(utimensat(AT_FDCWD, directory, &times, 0) == 0)
            snapshot = [directory: try StorageFileStatus(directory), file: try StorageFileStatus(file)]
        }

        func expectUntouched() throws {
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["victim.json"])
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == contents)
            for (path, status) in snapshot {
                #expect(try StorageFileStatus(path) == status, "\(path) changed")
            }
        }
    }

    enum Plant: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case container, directory, message, lockFile
        var testDescription: String { rawValue }
    }

    /// Every place a symlink can be planted, for each transiting that opens it (only the coordinated
    /// transiting opens lock files).
    static let plantCases: [(Plant, StorageTransitingKind)] = Plant.allCases.flatMap { plant in
        StorageTransitingKind.allCases.filter { plant != .lockFile || $0 == .coordinated }.map { (plant, $0) }
    }

    @Test(arguments: plantCases)
    func symlinkIsRefusedAndItsTargetUntouched(at plant: Plant, kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let target = try SymlinkTarget(in: temp)
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = kind.make(container)
        let identifier = storageIdentifier("victim")
        let link: String
        switch plant {
        case .container:
            try FileManager.default.createDirectory(atPath: temp.child("root"), withIntermediateDirectories: false)
            link = container.path
        case .directory:
            try container.create()
            link = container.directoryPath(.default)
        case .message, .lockFile:
            try container.createDirectory(.default)
            link = container.directoryPath(.default) + (plant == .message ? "/victim.json" : "/.victim.lock")
        }
        let pointee = plant == .container || plant == .directory ? target.directory : target.file
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: pointee)

        var refusals = 0
        func expectRefused(_ operation: String, _ body: () throws -> Void) {
            do {
                try body()
                Issue.record("\(operation) through a symlink at the \(plant) succeeded")
            } catch let error as WormholeError {
                #expect(error.code == .unsafePath, "\(operation): \(error)")
                #expect(error.message.contains("'\(link)'"), "\(operation): \(error)")
                #expect(error.message.contains("symbolic link"), "\(operation): \(error)")
                refusals += 1
            } catch {
                Issue.record("\(operation): unexpected \(error)")
            }
        }

        expectRefused("write") { try transiting.writeMessage(Data("{}".utf8), identifier: identifier) }
        expectRefused("read") { _ = try transiting.messageData(identifier: identifier) }
        if plant == .container || plant == .directory {
            expectRefused("list") { _ = try transiting.storedIdentifiers() }
            expectRefused("delete all") { try transiting.deleteAllMessages() }
            expectRefused("delete") { try transiting.deleteMessage(identifier: identifier) }
        }
        #expect(refusals >= 2)
        try target.expectUntouched()
        // The symlink itself is still there, unchanged.
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == pointee)
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func deletingASymlinkedMessageRemovesTheLinkOnly(kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let target = try SymlinkTarget(in: temp)
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        try container.createDirectory(.default)
        let link = container.directoryPath(.default) + "/victim.json"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target.file)

        try kind.make(container).deleteMessage(identifier: storageIdentifier("victim"))

        #expect(!FileManager.default.fileExists(atPath: link) && (try? StorageFileStatus(link)) == nil)
        try target.expectUntouched()
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func containerWritableByOthersIsRefused(kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        try container.create()
        #expect(chmod(container.path, 0o777) == 0)
        let transiting = kind.make(container)

        for operation in ["create", "write", "read"] {
            let error = try #require(throws: WormholeError.self, "\(operation)") {
                switch operation {
                case "create": try container.create()
                case "write": try transiting.writeMessage(Data("{}".utf8), identifier: storageIdentifier("m"))
                default: _ = try transiting.messageData(identifier: storageIdentifier("m"))
                }
            }
            #expect(error.code == .unsafePath)
            #expect(error.message.contains("'\(container.path)' is writable by group or others (mode 777)"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: container.path) == [])
    }

    @Test func directoryWritableByGroupIsRefused() throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let path = try container.createDirectory(.default)
        #expect(chmod(path, 0o770) == 0)
        let error = try #require(throws: WormholeError.self) {
            try FileTransiting(container: container).writeMessage(Data("{}".utf8), identifier: storageIdentifier("m"))
        }
        #expect(error.code == .unsafePath)
        #expect(error.value == path)
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func messageWritableByOthersIsRefusedOnRead(kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = kind.make(container)
        try transiting.writeMessage(Data(#"{"a":1}"#.utf8), identifier: storageIdentifier("m"))
        let file = container.directoryPath(.default) + "/m.json"
        #expect(chmod(file, 0o666) == 0)

        let error = try #require(throws: WormholeError.self) {
            _ = try transiting.messageData(identifier: storageIdentifier("m"))
        }
        #expect(error.code == .unsafePath)
        #expect(error.message.contains("'\(file)' is writable by group or others (mode 666)"))
    }

    @Test(arguments: StorageTransitingKind.allCases)
    func fifoAtTheMessageIsRefusedWithoutBlocking(kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let directory = try container.createDirectory(.default)
        #expect(mkfifo(directory + "/m.json", 0o600) == 0)
        let transiting = kind.make(container)

        let readError = try #require(throws: WormholeError.self) {
            _ = try transiting.messageData(identifier: storageIdentifier("m"))
        }
        #expect(readError.code == .unsafePath)
        #expect(readError.message.contains("is a FIFO, not a regular file"))
        let writeError = try #require(throws: WormholeError.self) {
            try transiting.writeMessage(Data("{}".utf8), identifier: storageIdentifier("m"))
        }
        #expect(writeError.code == .unsafePath)
    }

    @Test func containerThatIsAFileIsRefused() throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.path)
        #expect(FileManager.default.createFile(atPath: container.path, contents: Data("x".utf8)))
        let error = try #require(throws: WormholeError.self) { try container.create() }
        #expect(error.code == .unsafePath)
        #expect(error.message.contains("'\(container.path)' is a regular file, not a directory"))
    }

    static let isRoot = geteuid() == 0

    @Test(.enabled(if: isRoot, "chown to another user needs root"))
    func containerOwnedByAnotherUserIsRefused() throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        try container.create()
        #expect(chown(container.path, 65534, 65534) == 0)

        for transiting in StorageTransitingKind.allCases.map({ $0.make(container) }) {
            let error = try #require(throws: WormholeError.self) {
                try transiting.writeMessage(Data("{}".utf8), identifier: storageIdentifier("m"))
            }
            #expect(error.code == .unsafePath)
            #expect(error.message.contains("'\(container.path)' is owned by uid 65534, not by this user (uid 0)"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: container.path) == [])
    }

    @Test(.enabled(if: isRoot, "chown to another user needs root"), arguments: StorageTransitingKind.allCases)
    func messageOwnedByAnotherUserIsRefused(kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = kind.make(container)
        try transiting.writeMessage(Data(#"{"a":1}"#.utf8), identifier: storageIdentifier("m"))
        let file = container.directoryPath(.default) + "/m.json"
        #expect(chown(file, 65534, 65534) == 0)

        let readError = try #require(throws: WormholeError.self) {
            _ = try transiting.messageData(identifier: storageIdentifier("m"))
        }
        #expect(readError.code == .unsafePath)
        let writeError = try #require(throws: WormholeError.self) {
            try transiting.writeMessage(Data(#"{"a":2}"#.utf8), identifier: storageIdentifier("m"))
        }
        #expect(writeError.code == .unsafePath)
        #expect(try StorageFileStatus(file).owner == 65534)
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == Data(#"{"a":1}"#.utf8))
    }
}

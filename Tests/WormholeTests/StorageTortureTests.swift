// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Testing
import Wormhole

/// Cross-process behaviour of the stored messages: writers killed at random instants, concurrent
/// coordinated writers, read-modify-write under the lock.
@Suite struct StorageTortureTests {
    /// Starts `write-loop` with 200 kB documents, kills it with SIGKILL a random 0–20 ms after it
    /// reports its first write (reading the file in-process meanwhile), and checks after every kill
    /// that the stored message is a complete document (never absent: a document was stored before).
    @Test func killedWriterNeverLeavesAPartialMessage() throws {
        let peer = try StoragePeer.executable()
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("group.torture"), root: temp.child("root"))
        let transiting = FileTransiting(container: container)
        let identifier = storageIdentifier("torture")
        let arguments = ["write-loop", container.root, container.group.rawValue, identifier.rawValue, "200000"]

        let kills = 300
        var documentsAfterKill = 0
        var documentsWhileWriting = 0
        var sequences = Set<Data>()
        let started = ContinuousClock.now
        for kill in 0..<kills {
            let pid = try StoragePeer.spawnAndWaitForReady(peer, arguments)
            // A random instant to crash the writer at; the reads in between check a live writer too.
            let deadline = ContinuousClock.now + .microseconds(Int.random(in: 0...20_000))
            while ContinuousClock.now < deadline {
                if let data = try transiting.messageData(identifier: identifier) {
                    #expect(StorageTortureDocument.validSize(data) == 200_000, "kill \(kill): torn read while writing")
                    documentsWhileWriting += 1
                }
            }
            #expect(Glibc.kill(pid, SIGKILL) == 0)
            let ending = try StoragePeer.wait(pid)
            try #require(ending == .signalled(SIGKILL), "kill \(kill): the writer \(ending) before it was killed")

            let data = try #require(
                try transiting.messageData(identifier: identifier), "kill \(kill): the stored message is gone")
            try #require(
                StorageTortureDocument.validSize(data) == 200_000,
                "kill \(kill): the stored message is not a complete document (\(data.count) bytes)")
            documentsAfterKill += 1
            sequences.insert(data.prefix(20))
        }
        let elapsed = ContinuousClock.now - started

        // The writers went on writing after their first document, and kills did land mid-write: each
        // left its temporary file, which is never taken for a message.
        let names = try FileManager.default.contentsOfDirectory(atPath: container.directoryPath(.default))
        let leftovers = names.filter { $0.hasPrefix(".torture.") && $0.hasSuffix(".tmp") }
        #expect(sequences.count > 1, "every kill found the same document")
        // Only part of the writer's loop has its temporary file open, and a kill during the rename lets
        // the rename finish (on ext4 that rename also starts writing the new file back, which takes
        // a while): 5 to 25 % of the kills leave a temporary file here, depending on the load.
        #expect(!leftovers.isEmpty, "no kill interrupted a write")
        #expect(try transiting.storedIdentifiers() == [identifier])
        print(
            "storage torture: \(kills) kills in \(elapsed), \(documentsAfterKill) messages checked after a kill, "
                + "\(documentsWhileWriting) while writing, \(leftovers.count) interrupted writes")
    }

    /// `read-check` exits 0 on no message or a valid one, and 1 on a broken one.
    @Test func readCheckCommandTellsValidFromBroken() throws {
        let peer = try StoragePeer.executable()
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = FileTransiting(container: container)
        let check = ["read-check", container.root, "g", "m"]

        #expect(try StoragePeer.run(peer, check) == .exited(0))
        let document = StorageTortureDocument.make(sequence: 7, size: 3000)
        try transiting.writeMessage(document, identifier: storageIdentifier("m"))
        #expect(try StoragePeer.run(peer, check) == .exited(0))
        #expect(try StoragePeer.run(peer, check + ["coordinated"]) == .exited(0))
        try transiting.writeMessage(document.dropLast(), identifier: storageIdentifier("m"))
        #expect(try StoragePeer.run(peer, check) == .exited(1))
        try transiting.writeMessage(
            StorageTortureDocument.make(sequence: 8, size: 3000).prefix(20), identifier: storageIdentifier("m"))
        #expect(try StoragePeer.run(peer, check) == .exited(1))
    }

    /// Two processes writing documents of different sizes through the coordinated transiting, while
    /// this process reads under the shared lock: every read is a complete document, and both writers'
    /// documents are seen.
    @Test func concurrentCoordinatedWritersFromTwoProcessesNeverTearTheFile() throws {
        let peer = try StoragePeer.executable()
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = CoordinatedFileTransiting(container: container)
        let identifier = storageIdentifier("shared")
        let sizes = [50_000, 300_000]

        let writers = try sizes.map { size in
            try StoragePeer.spawnAndWaitForReady(
                peer, ["write-loop", container.root, "g", identifier.rawValue, String(size), "coordinated"])
        }
        var seenSizes = Set<Int>()
        var reads = 0
        var torn = 0
        let deadline = ContinuousClock.now + .seconds(15)
        while (reads < 300 || seenSizes.count < sizes.count) && ContinuousClock.now < deadline {
            guard let data = try transiting.messageData(identifier: identifier) else { continue }
            reads += 1
            if let size = StorageTortureDocument.validSize(data) { seenSizes.insert(size) } else { torn += 1 }
        }
        for pid in writers {
            #expect(kill(pid, SIGKILL) == 0)
            let ending = try StoragePeer.wait(pid)
            #expect(ending == .signalled(SIGKILL), "a writer \(ending) before it was killed")
        }

        #expect(torn == 0, "\(torn) of \(reads) reads were not a complete document")
        #expect(seenSizes == Set(sizes), "documents seen only from writers of sizes \(seenSizes.sorted())")
        // Killed while possibly holding the lock: the lock went with the process.
        let final = try #require(try transiting.messageData(identifier: identifier))
        #expect(StorageTortureDocument.validSize(final) != nil)
        try transiting.writeMessage(Data("{}".utf8), identifier: identifier)
    }

    /// Two processes and this one each increment a counter through `updateMessage`: no increment is
    /// lost, which needs the read-modify-write sequences not to interleave.
    @Test func coordinatedUpdatesFromSeveralProcessesAreNotLost() throws {
        let peer = try StoragePeer.executable()
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = CoordinatedFileTransiting(container: container)
        let counter = storageIdentifier("counter")
        let perWriter = 300

        let processes = try (0..<2).map { _ in
            try StoragePeer.spawn(peer, ["increment", container.root, "g", counter.rawValue, String(perWriter)])
        }
        for _ in 0..<perWriter {
            try transiting.updateMessage(identifier: counter) { old in
                let value = old.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Int] }?["count"] ?? 0
                return Data(#"{"count":\#(value + 1)}"#.utf8)
            }
        }
        for pid in processes {
            #expect(try StoragePeer.wait(pid) == .exited(0))
        }

        let data = try #require(try transiting.messageData(identifier: counter))
        #expect(String(decoding: data, as: UTF8.self) == #"{"count":\#(3 * perWriter)}"#)
    }
}

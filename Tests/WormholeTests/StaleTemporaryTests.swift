// Sweeping the temporary files of killed writers (defect #6): only files named like a writer's
// temporary, older than the age asked for, and never one a live writer holds (`flock`).

import Dispatch
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeTestSupport

/// Creates `name` in `directory` with `bytes`, mode 0600, its modification time `age` seconds ago.
private func plant(_ directory: String, _ name: String, bytes: String = "{\"partial", ageSeconds: Int = 0) throws {
    let path = directory + "/" + name
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
    defer { close(fd) }
    let data = Array(bytes.utf8)
    guard write(fd, data, data.count) == data.count else { throw TestFailure("write \(path): errno \(errno)") }
    if ageSeconds > 0 {
        let then = timespec(tv_sec: time(nil) - ageSeconds, tv_nsec: 0)
        guard futimens(fd, [then, then]) == 0 else { throw TestFailure("futimens \(path): errno \(errno)") }
    }
}

private func names(_ directory: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
}

/// Runs `body` on a Dispatch thread and returns its result.
private func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}

/// An inotify watch for files created in one directory: a writer's temporaries (its renames
/// arrive as moves, not creations), so that a kill can be aimed at the moment a write is under way.
private final class CreationWatch {
    private let descriptor: Int32

    init(_ directory: String) throws {
        descriptor = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard descriptor >= 0 else { throw TestFailure("inotify_init1: errno \(errno)") }
        guard inotify_add_watch(descriptor, directory, UInt32(IN_CREATE)) >= 0 else {
            let failure = errno
            close(descriptor)
            throw TestFailure("inotify_add_watch \(directory): errno \(failure)")
        }
    }

    deinit { close(descriptor) }

    /// Forgets the creations seen so far.
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while read(descriptor, &buffer, buffer.count) > 0 {}
    }

    /// Waits, at most `milliseconds`, for the next creation; false when none came.
    func next(within milliseconds: Int32) -> Bool {
        drain()
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&entry, 1, milliseconds)
            if ready >= 0 || errno != EINTR { return ready == 1 }
        }
    }
}

private func size(_ path: String) -> Int {
    var status = stat()
    return lstat(path, &status) == 0 ? Int(status.st_size) : -1
}

@Suite struct StaleTemporaryTests {
    /// Files a sweep must never touch, whatever their age: not a writer's temporary by name.
    static let bystanders = [
        ".m.lock", "m.json.tmp", ".m.tmp", ".m.12-xyz.tmp", ".m.-ab.tmp", ".m.12-.tmp", "..m.12-ab.tmp", ".m.12-AB.tmp",
        ".m.12345678901-ab.tmp", ".m.12-0123456789abcdef0.tmp", "notes.txt",
    ]

    @Test(arguments: StorageTransitingKind.allCases)
    func onlyOldTemporariesOfOurExactPatternAreRemoved(kind: StorageTransitingKind) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = kind.make(container)
        try transiting.writeMessage(Data("1".utf8), identifier: storageIdentifier("m"))
        let directory = container.directoryPath(.default)
        for name in Self.bystanders { try plant(directory, name, ageSeconds: 7200) }
        try plant(directory, ".m.4242-9f3a.tmp", ageSeconds: 7200)
        try plant(directory, ".m.x.4242-0.tmp", ageSeconds: 660)
        try plant(directory, ".m.4243-beef.tmp", ageSeconds: 60)
        let before = try names(directory)

        // The default age is 10 minutes: the 2-hour and 11-minute-old ones go, the 1-minute-old stays.
        let removed =
            switch kind {
            case .file: try FileTransiting(container: container).removeStaleTemporaryFiles()
            case .coordinated: try CoordinatedFileTransiting(container: container).removeStaleTemporaryFiles()
            }
        #expect(removed == 2)
        #expect(try names(directory) == before.filter { $0 != ".m.4242-9f3a.tmp" && $0 != ".m.x.4242-0.tmp" })
        #expect(try transiting.messageData(identifier: storageIdentifier("m")) == Data("1".utf8))
        // With an age of 0 the recent one goes too; the bystanders stay.
        let all = try FileTransiting(container: container).removeStaleTemporaryFiles(olderThan: .zero)
        #expect(all == 1)
        #expect(try names(directory) == (Self.bystanders + ["m.json"]).sorted())
    }

    @Test func aTemporaryHeldByALiveWriterIsNeverRemoved() throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let container = try GroupContainer(group: storageGroup("g"), root: temp.child("root"))
        let transiting = FileTransiting(container: container)
        try container.createDirectory(.default)
        let directory = container.directoryPath(.default)
        try plant(directory, ".m.777-abc.tmp", ageSeconds: 7200)
        // A writer's lock: its own open file description, as another process would have.
        let writer = open(directory + "/.m.777-abc.tmp", O_RDONLY | O_CLOEXEC)
        try #require(writer >= 0)
        #expect(flock(writer, LOCK_EX) == 0)
        #expect(try transiting.removeStaleTemporaryFiles(olderThan: .zero) == 0)
        #expect(try transiting.removeStaleTemporaryFiles() == 0)
        #expect(try names(directory).contains(".m.777-abc.tmp"))
        // The writer dies: its lock goes with it. Unlocked explicitly first: a child another test
        // is spawning shares this open file description (and so the lock) until it execs.
        flock(writer, LOCK_UN)
        close(writer)
        #expect(try transiting.removeStaleTemporaryFiles(olderThan: .zero) == 1)
        #expect(try names(directory) == [])
    }

    /// Kills a writer of 1 MB documents until some kills have left temporaries, then sweeps: those
    /// older than the age go, nothing else; a live writer swept with an age of 0 hundreds of times
    /// never fails a write.
    @Test func killedWritersLeaveTemporariesThatASweepRemoves() async throws {
        let peer = try StoragePeer.executable()
        // In memory (tmpfs) when there is one: megabytes written in a loop must not load the disk
        // the rest of the suite works on.
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : "/tmp"
        var template = Array("\(base)/wormhole-sweep-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } }
        let scratch = try #require(made, "mkdtemp in \(base): errno \(errno)")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let container = try GroupContainer(group: storageGroup("g"), root: scratch + "/root")
        let transiting = FileTransiting(container: container)
        let identifier = storageIdentifier("sweep")
        let arguments = ["write-loop", container.root, "g", "sweep", "1000000"]
        let directory = try container.createDirectory(.default)
        let leftovers: @Sendable () throws -> [String] = { try names(directory).filter { $0.hasSuffix(".tmp") } }

        // Kill writers until some kills have landed mid-write (on a Dispatch thread: spawning and
        // waiting for processes must not hold a thread of the cooperative pool for seconds). Each
        // kill follows the creation of a temporary: most of a writer's loop is spent making the
        // next document, so kills at instants that ignore the write land in one only now and then
        // (137 kills for 2 on a quiet machine; 300 left none on a loaded one).
        let (kills, allKilled) = try await offPool { () throws -> (Int, Bool) in
            let creations = try CreationWatch(directory)
            var kills = 0
            var allKilled = true
            while try leftovers().count < 2 && kills < 300 {
                let pid = try StoragePeer.spawnAndWaitForReady(peer, arguments)
                for _ in 0..<Int.random(in: 0...3) { _ = try transiting.messageData(identifier: identifier) }
                let writing = creations.next(within: 10_000)
                Glibc.kill(pid, SIGKILL)
                if !writing { throw TestFailure("writer \(pid) created no temporary within 10 s") }
                allKilled = try StoragePeer.wait(pid) == .signalled(SIGKILL) && allKilled
                kills += 1
            }
            return (kills, allKilled)
        }
        #expect(allKilled, "a writer ended before it was killed")
        let left = try leftovers()
        try #require(left.count >= 2, "\(kills) kills left only \(left) behind")
        // Young files survive the default age.
        #expect(try transiting.removeStaleTemporaryFiles() == 0)
        #expect(try leftovers() == left)

        // Sweeps with an age of 0 while a live writer writes: they remove the killed writers'
        // files with content (an empty one, killed between its creation and its lock, waits 2 s)
        // and never the live writer's, which would make its rename fail and the writer exit 1.
        let (sweptLive, liveKilled) = try await offPool { () throws -> (Int, Bool) in
            let pid = try StoragePeer.spawnAndWaitForReady(peer, arguments)
            var removed = 0
            for _ in 0..<200 { removed += try transiting.removeStaleTemporaryFiles(olderThan: .zero) }
            Glibc.kill(pid, SIGKILL)
            return (removed, try StoragePeer.wait(pid) == .signalled(SIGKILL))
        }
        try #require(liveKilled, "the live writer failed while swept")
        var removed = sweptLive
        let emptyBefore = left.filter { size(directory + "/" + $0) == 0 }
        #expect(removed >= left.count - emptyBefore.count)
        removed += try transiting.removeStaleTemporaryFiles(olderThan: .zero)
        let remaining = try leftovers()
        #expect(remaining.allSatisfy { size(directory + "/" + $0) == 0 }, "\(remaining)")
        let data = try #require(try transiting.messageData(identifier: identifier))
        #expect(StorageTortureDocument.validSize(data) == 1_000_000)
        print(
            "stale temporaries: \(kills) kills left \(left.count); 201 sweeps with age 0 removed \(removed), "
                + "none held by the live writer")
    }

    @Test func clearAllMessagesAndAFirstWriteInAProcessSweep() async throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let root = temp.child("root")
        let wormhole = try MessageCenter(
            applicationGroupIdentifier: "g", containerRoot: root, busAddress: BusAddressForTests.unreachable,
            logger: MessagingHarness.logger)
        try wormhole.passMessage(1, identifier: "m")
        let directory = wormhole.container.directoryPath(wormhole.directory)
        try plant(directory, ".m.4242-9f3a.tmp", ageSeconds: 7200)
        try plant(directory, ".m.4243-9f3b.tmp", ageSeconds: 5)
        try wormhole.clearAllMessages()
        #expect(try names(directory) == [".m.4243-9f3b.tmp"])

        // A new process's first write sweeps the directory it writes to; so does a defaults write.
        try plant(directory, ".n.4244-1.tmp", ageSeconds: 7200)
        let environment = ["WORMHOLE_CONTAINER_ROOT": root, "XDG_RUNTIME_DIR": temp.path]
        let sent = try await MessagingHarness.run(
            try productPath("wormholectl"),
            ["send", "--group", "g", "--bus-address", "unix:path=/nonexistent/bus", "m", "2"], environment: environment)
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(try names(directory) == [".m.4243-9f3b.tmp", "m.json"])

        let preferences = wormhole.container.path + "/Preferences"
        #expect(mkdir(preferences, 0o700) == 0)
        try plant(preferences, ".g.json.4245-2.tmp", ageSeconds: 7200)
        let written = try await MessagingHarness.run(
            try productPath("wormholectl"),
            ["defaults", "write", "--group", "g", "--bus-address", "unix:path=/nonexistent/bus", "k", "1"],
            environment: environment)
        #expect(written.status == 0, "\(written.stderr)")
        let swept = try names(preferences)
        #expect(swept == ["g.json", "g.json.changes", "g.json.lock"], "\(swept)")
    }
}

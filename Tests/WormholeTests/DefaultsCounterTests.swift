// Shared defaults read through the suite's change counter (GroupDefaults.Freshness.changeCounter,
// contract section 5, docs/shared-defaults.md): writes of other processes, Wormhole's and a foreign
// writer's that counts, are seen by the next read; a foreign writer that does not count is seen
// by the default freshness check, and by the counter reader at the next counting write.

import Foundation
import Glibc
import Testing
import Wormhole
import WormholeTestSupport

@Suite(.sharedBus) struct DefaultsCounterTests {
    let world: MessagingFixture
    init() throws { world = try MessagingFixture() }

    func defaults(_ freshness: GroupDefaults.Freshness) throws -> GroupDefaults {
        try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(world.group), containerRoot: world.root.path,
            busAddress: world.bus.address,
            sharedStateDirectory: world.state.path, freshness: freshness, logger: MessagingHarness.logger)
    }

    /// A write of `n` by a Python process, as contract §5 describes it (lock, temporary file,
    /// a strictly later modification time, rename); with `counting`, it then increments
    /// `<suite>.json.changes` as the proposal describes.
    func foreignWrite(_ value: Int, counting: Bool) async throws {
        let script = #"""
            import fcntl, json, os, sys, time
            path, value, counting = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "count"
            directory = os.path.dirname(path)
            lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(path) as f:
                suite = json.load(f)
            suite["n"] = value
            tmp = os.path.join(directory, "." + os.path.basename(path) + ".%d-1.tmp" % os.getpid())
            with open(tmp, "w") as f:
                os.fchmod(f.fileno(), 0o600)
                json.dump(suite, f)
            stamp = max(time.time_ns(), os.stat(path).st_mtime_ns + 1)
            os.utime(tmp, ns=(stamp, stamp))
            os.replace(tmp, path)
            if counting:
                changes = os.open(path + ".changes", os.O_RDWR | os.O_CREAT, 0o600)
                count = int.from_bytes(os.pread(changes, 8, 0).ljust(8, b"\0"), "little")
                os.pwrite(changes, ((count + 1) % 2**64).to_bytes(8, "little"), 0)
                os.close(changes)
            os.close(lock)
            """#
        let output = try await MessagingHarness.run(
            "/usr/bin/env", ["python3", "-c", script, world.suitePath(), String(value), counting ? "count" : "plain"])
        #expect(output.status == 0, "\(output.stderr)")
    }

    /// Every `wormholectl defaults write` of another process is seen by the next read, and read
    /// again from the cache.
    @Test func anotherProcessesWriteIsSeenByTheNextRead() async throws {
        let reader = try defaults(.changeCounter)
        #expect(try reader.value(forKey: "n") == nil)
        for round in 0..<12 {
            try await world.runCLI(["defaults", "write", "--group", world.group, "n", String(round)])
            #expect(try (reader.value(forKey: "n")?.intValue ?? 0) == round, "round \(round)")
            #expect(try (reader.value(forKey: "n")?.intValue ?? 0) == round, "round \(round), cached")
        }
        try await world.runCLI(["defaults", "delete", "--group", world.group, "n"])
        #expect(try reader.value(forKey: "n") == nil)
    }

    /// The writer's own reads, and another object's in this process, follow every write.
    @Test func writesInThisProcessAreSeen() throws {
        let reader = try defaults(.changeCounter)
        let writer = try defaults(.everyWriter)
        for round in 0..<200 {
            try writer.set(round, forKey: "n")
            #expect(try (reader.value(forKey: "n")?.intValue ?? 0) == round, "round \(round)")
            try reader.set(-round, forKey: "m")
            #expect(
                try (reader.value(forKey: "m")?.intValue ?? 0) == -round
                    && (writer.value(forKey: "m")?.intValue ?? 0) == -round, "round \(round)")
        }
    }

    @Test(.enabled(if: pythonPath != nil, "python3 is not installed: the foreign writer cannot be run"))
    func foreignWritersThatCountAreSeenAndOthersAtTheNextCountingWrite() async throws {
        let counted = try defaults(.changeCounter)
        let checked = try defaults(.everyWriter)
        try checked.set(1, forKey: "n")
        #expect(
            try (counted.value(forKey: "n")?.intValue ?? 0) == 1 && (checked.value(forKey: "n")?.intValue ?? 0) == 1)

        try await foreignWrite(2, counting: true)
        #expect(try (counted.value(forKey: "n")?.intValue ?? 0) == 2, "a foreign writer that counts")
        #expect(try (checked.value(forKey: "n")?.intValue ?? 0) == 2)

        // A writer of contract 1.2 that does not count: the lstat check sees it; the counter
        // reader keeps its cache, with no system call to notice (the mode's stated limit).
        try await foreignWrite(3, counting: false)
        #expect(try (checked.value(forKey: "n")?.intValue ?? 0) == 3, "the default check sees every writer")
        #expect(try (counted.value(forKey: "n")?.intValue ?? 0) == 2, "the counter reader has not looked at the file")
        // The next counting write of any key brings it up to date, the foreign value included.
        try await world.runCLI(["defaults", "write", "--group", world.group, "other", "1"])
        #expect(
            try (counted.value(forKey: "n")?.intValue ?? 0) == 3 && (counted.value(forKey: "other")?.intValue ?? 0) == 1
        )
    }

    /// The counter file: 8 bytes, mode 0600, little-endian, one more per write that changed
    /// something; a write that changes nothing leaves it.
    @Test func everyChangingWriteIncrementsTheCounterFile() throws {
        let writer = try defaults(.everyWriter)
        try writer.set(1, forKey: "a")
        func count() throws -> UInt64 {
            let bytes = try #require(FileManager.default.contents(atPath: world.suitePath() + ".changes"))
            #expect(bytes.count == 8)
            return bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let first = try count()
        try writer.set(2, forKey: "a")
        try writer.set(2, forKey: "a")
        try writer.transaction { suite in
            try suite.set(3, forKey: "a")
            try suite.set(4, forKey: "b")
        }
        #expect(try count() == first + 2)
        var status = stat()
        #expect(lstat(world.suitePath() + ".changes", &status) == 0 && status.st_mode & 0o777 == 0o600)
    }
}

import Foundation
import Glibc
import Logging
import Synchronization
import SystemPackage

/// The suite file of contract §5 (`<container>/Preferences/<suite>.json`) with its lock, its
/// corruption handling and a cache of its parsed content.
///
/// Freshness: the cache remembers the file's identity (device, inode, size, modification and
/// change times in nanoseconds) and a read compares it with one `lstat` of the path. Every write
/// is a rename of a new file whose modification time the writer sets, under the lock, to a
/// nanosecond count strictly greater than the previous file's: two versions of the suite never
/// share that identity, so a read that starts after a write returned sees it.
final class SuiteStore: Sendable {
    static let directoryName = WormholeDirectoryName.reservedForDefaults

    let container: GroupContainer
    let suite: SuiteName
    let durability: FileTransiting.Durability
    let logger: Logger
    /// `<root>/<group>/Preferences/<suite>.json`.
    let path: String

    /// What identifies one version of the suite file.
    struct Signature: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: UInt64
        var changed: UInt64

        init(_ status: stat) {
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
            size = Int64(status.st_size)
            modified = UInt64(status.st_mtim.tv_sec) &* 1_000_000_000 &+ UInt64(status.st_mtim.tv_nsec)
            changed = UInt64(status.st_ctim.tv_sec) &* 1_000_000_000 &+ UInt64(status.st_ctim.tv_nsec)
        }
    }

    /// One version of the suite as read; `signature` nil when there was no file.
    struct Snapshot: Sendable {
        var values: [String: PropertyListValue]
        var signature: Signature?
        /// The version's generation: its modification time in nanoseconds (0 when absent).
        var generation: UInt64 { signature?.modified ?? 0 }
    }

    private let cache = Mutex<Snapshot?>(nil)

    init(container: GroupContainer, suite: SuiteName, durability: FileTransiting.Durability, logger: Logger) {
        self.container = container
        self.suite = suite
        self.durability = durability
        self.logger = logger
        path = container.path + "/" + Self.directoryName + "/" + suite.fileName
    }

    // MARK: Reading

    /// The suite as it is now: from the cache when the file has not changed since it was read.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/corruptSuite`` when the file does not
    ///   parse (it is moved aside first), ``WormholeError/Code/unsafePath`` or ``WormholeError/Code/io``.
    func snapshot() throws(WormholeError) -> Snapshot {
        let current: Signature?
        do throws(Errno) {
            current = Signature(try Syscall.lstat(path))
        } catch .noSuchFileOrDirectory, .notDirectory {
            current = nil
        } catch {
            return try reload()
        }
        if let cached = cache.withLock({ $0 }), cached.signature == current { return cached }
        return try reload()
    }

    /// Reads the file through the container's checked, descriptor-relative opens.
    private func reload() throws(WormholeError) -> Snapshot {
        guard let directory = try container.openDirectory(named: Self.directoryName, create: false) else {
            return remember(Snapshot(values: [:], signature: nil))
        }
        switch try read(in: directory) {
        case .success(let snapshot): return remember(snapshot)
        case .failure:
            // Quarantine under the writers' lock, so that a good file renamed in meanwhile is not
            // the one moved aside.
            let lock = try directory.openOrCreateFile(suite.lockName)
            return try withExtendedLifetime(lock) { () throws(WormholeError) -> Snapshot in
                try lock.lock(exclusive: true)
                switch try read(in: directory) {
                case .success(let snapshot): return remember(snapshot)
                case .failure(let problem): throw try quarantine(in: directory, problem)
                }
            }
        }
    }

    private func remember(_ snapshot: Snapshot) -> Snapshot {
        cache.withLock { $0 = snapshot }
        return snapshot
    }

    /// Why a suite file did not parse.
    struct Unparseable: Error {
        var reason: String
        var size: Int
    }

    /// The suite in `directory`: parsed, or why it did not parse.
    private func read(in directory: OpenFile) throws(WormholeError) -> Result<Snapshot, Unparseable> {
        guard let file = try directory.openFileForReading(suite.fileName) else {
            return .success(Snapshot(values: [:], signature: nil))
        }
        let status: stat
        do throws(Errno) {
            status = try Syscall.fstat(file.descriptor)
        } catch {
            throw ioError(error, "inspect", file.path)
        }
        let data = try file.readToEnd()
        do throws(SuiteJSON.ParseError) {
            return .success(Snapshot(values: try SuiteJSON.decodeSuite(data), signature: Signature(status)))
        } catch {
            return .failure(Unparseable(reason: error.description, size: data.count))
        }
    }

    /// Moves the unparseable suite file aside to the first free `<suite>.json.corrupt-<n>`, logs it,
    /// and returns the error to throw. The caller holds the lock.
    private func quarantine(in directory: OpenFile, _ problem: Unparseable) throws(WormholeError) -> WormholeError {
        var number = 1
        while (try? Syscall.lstatat(directory.descriptor, suite.corruptName(number))) != nil { number += 1 }
        let aside = directory.child(suite.corruptName(number))
        try directory.rename(suite.fileName, to: suite.corruptName(number))
        cache.withLock { $0 = nil }
        let error = WormholeError(
            .corruptSuite, value: path,
            "suite file '\(path)' (\(problem.size) bytes) is not a suite by the book (\(problem.reason)); "
                + "it was moved aside to '\(aside)', and the suite starts again empty")
        logger.error("\(error.message)")
        return error
    }

    // MARK: Writing

    /// What a write changed.
    struct Outcome<Result> {
        var result: Result
        /// The keys whose value changed, with their new value (nil: removed), sorted by key.
        var changes: [(key: String, value: PropertyListValue?)]
        /// The generation of the suite after the write (unchanged when nothing changed).
        var generation: UInt64
    }

    /// Runs `body` on the suite's values under the writers' exclusive `flock`, then, if anything
    /// changed, replaces the file atomically with a strictly newer modification time.
    ///
    /// - Throws: what `body` throws (nothing is written then), ``WormholeError/Code/corruptSuite``
    ///   when the current file does not parse (moved aside, nothing written), or a storage error.
    func modify<Result>(_ body: (inout [String: PropertyListValue]) throws -> Result) throws -> Outcome<Result> {
        guard let directory = try container.openDirectory(named: Self.directoryName, create: true) else {
            throw WormholeError(.io, value: path, "cannot create the directory of '\(path)'")
        }
        let lock = try directory.openOrCreateFile(suite.lockName)
        return try withExtendedLifetime(lock) {
            try lock.lock(exclusive: true)
            let old: Snapshot
            switch try read(in: directory) {
            case .success(let snapshot): old = snapshot
            case .failure(let problem): throw try quarantine(in: directory, problem)
            }
            var values = old.values
            let result = try body(&values)
            var changes: [(key: String, value: PropertyListValue?)] = []
            for key in Set(old.values.keys).union(values.keys).sorted() where old.values[key] != values[key] {
                changes.append((key, values[key]))
            }
            if changes.isEmpty {
                _ = remember(old)
                return Outcome(result: result, changes: [], generation: old.generation)
            }
            let generation = max(Self.now(), old.generation &+ 1)
            try directory.replaceAtomically(
                suite.fileName, with: SuiteJSON.encodeSuite(values), temporaryName: suite.temporaryName,
                durability: durability, modified: generation)
            OpportunisticSweep.onFirstWrite(
                in: directory, olderThan: FileTransiting.staleTemporaryAge.wholeNanoseconds)
            // Still under the lock: the file now in place is the one just written.
            if let status = try? Syscall.lstatat(directory.descriptor, suite.fileName) {
                _ = remember(Snapshot(values: values, signature: Signature(status)))
            }
            return Outcome(result: result, changes: changes, generation: generation)
        }
    }

    /// Nanoseconds since 1970 (`CLOCK_REALTIME`).
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }
}

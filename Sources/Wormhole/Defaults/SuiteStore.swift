import FoundationEssentials
import Glibc
import Logging
import Synchronization
import SystemPackage
import WormholeSystem

/// The suite file of contract §5 (`<container>/Preferences/<suite>.json`) with its lock, its
/// corruption handling and a cache of its parsed content.
///
/// Freshness (``GroupDefaults/Freshness``): by default the cache remembers the file's identity
/// (device, inode, size, modification and change times in nanoseconds) and a read compares it
/// with one `lstat` of the path. Every write is a rename of a new file whose modification time the
/// writer sets, under the lock, to a nanosecond count strictly greater than the previous file's:
/// two versions of the suite never share that identity, so a read that starts after a write
/// returned sees it. Every write also increments the suite's change counter
/// (``SuiteChangeCounter``) after its rename; with ``GroupDefaults/Freshness/changeCounter`` a read
/// compares the counter with the count its cache was read at instead, without a system call.
/// The counter is loaded before the file is checked or read, and a writer renames before it
/// increments, so a cache tagged with a count never predates a write that count includes.
final class SuiteStore: Sendable {
    static let directoryName = WormholeDirectoryName.reservedForDefaults

    let container: GroupContainer
    let suite: SuiteName
    let durability: FileTransiting.Durability
    let freshness: GroupDefaults.Freshness
    let logger: Logger
    /// `<root>/<group>/Preferences/<suite>.json`.
    let path: String

    /// One version of the suite as read; `signature` nil when there was no file.
    struct Snapshot: Sendable {
        var contents: SuiteJSON.Contents
        var signature: FileVersion?
        /// The change counter's word when this version was read (nil: no counter was mapped).
        var counter: UInt64?
        /// The values this version understands (unknown ones are in `contents.unknown`).
        var values: [String: PropertyListValue] { contents.values }
        /// The version's generation: its modification time in nanoseconds (0 when absent).
        var generation: UInt64 { signature?.modified ?? 0 }
    }

    private let cache = Locked<Snapshot?>(nil)
    /// The suite's change counter, once mapped: read-only by a reader, writable once this object
    /// wrote.
    private let counter = Locked<SuiteChangeCounter?>(nil)

    init(
        container: GroupContainer, suite: SuiteName, durability: FileTransiting.Durability,
        freshness: GroupDefaults.Freshness = .everyWriter, logger: Logger
    ) {
        self.container = container
        self.suite = suite
        self.durability = durability
        self.freshness = freshness
        self.logger = logger
        path = container.path + "/" + Self.directoryName + "/" + suite.fileName
    }

    // MARK: Reading

    /// The suite as it is now: from the cache when the file has not changed since it was read.
    /// Reading never changes the disk (contract §5, v1.2).
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/corruptSuite`` when the file is not
    ///   one JSON object (naming the file and the byte offset; the file is left as it is),
    ///   ``WormholeError/Code/unsafePath`` or ``WormholeError/Code/io``.
    func snapshot() throws(WormholeError) -> Snapshot {
        guard freshness == .changeCounter else { return try checkedSnapshot(counter: nil) }
        if let mapped = counter.withLock({ $0 }) {
            // The fast path: one load from the shared mapping, no system call.
            let seen = mapped.value
            if let cached = cache.withLock({ $0 }), cached.counter == seen { return cached }
            return try checkedSnapshot(counter: seen)
        }
        // No counter mapped yet: the status check, and an attempt to map the counter only when the
        // file changed (no counting writer may have written yet; the attempt costs an open).
        if let cached = cachedIfCurrent() { return cached }
        let seen = (try? mapCounter(writable: false, in: nil))?.value
        return try checkedSnapshot(counter: seen)
    }

    /// The cached snapshot when `lstat` says the file is the one it was read from, else the file
    /// read again; tagged with the counter's word `seen`, loaded before this call.
    private func checkedSnapshot(counter seen: UInt64?) throws(WormholeError) -> Snapshot {
        if var cached = cachedIfCurrent() {
            if cached.counter != seen {
                cached.counter = seen
                _ = remember(cached)
            }
            return cached
        }
        guard let directory = try container.openDirectory(named: Self.directoryName, create: false) else {
            return remember(Snapshot(contents: SuiteJSON.Contents(), signature: nil, counter: seen))
        }
        switch try read(in: directory) {
        case .success(var snapshot):
            snapshot.counter = seen
            return remember(snapshot)
        case .failure(let problem): throw unreadable(problem, writing: false)
        }
    }

    /// The change counter, mapped on first use: read-only for a reader; a writer (`writable`, under
    /// the suite's lock) creates the file when missing. Nil when there is no `Preferences`
    /// directory, or (for a reader) no counter file yet.
    private func mapCounter(writable: Bool, in directory: OpenFile?) throws(WormholeError) -> SuiteChangeCounter? {
        if let mapped = counter.withLock({ $0 }), mapped.writable || !writable { return mapped }
        var opened = directory
        if opened == nil { opened = try container.openDirectory(named: Self.directoryName, create: false) }
        guard let directory = opened else { return nil }
        let file: OpenFile?
        if writable {
            file = try directory.openOrCreateFile(suite.counterName)
        } else {
            file = try directory.openFile(suite.counterName)
        }
        guard let file, let mapped = try SuiteChangeCounter(file, writable: writable) else { return nil }
        counter.withLock { $0 = mapped }
        return mapped
    }

    /// The cached snapshot when the file is still the one it was read from (one `lstat`).
    private func cachedIfCurrent() -> Snapshot? {
        let current: FileVersion?
        do throws(Errno) {
            current = FileVersion(try Syscall.lstat(path))
        } catch .noSuchFileOrDirectory, .notDirectory {
            current = nil
        } catch {
            return nil
        }
        if let cached = cache.withLock({ $0 }), cached.signature == current { return cached }
        return nil
    }

    private func remember(_ snapshot: Snapshot) -> Snapshot {
        cache.withLock { $0 = snapshot }
        return snapshot
    }

    /// Why a suite file did not parse.
    struct Unparseable: Error {
        var error: SuiteJSON.ParseError
        var size: Int
    }

    /// The suite in `directory`: parsed, or why it did not parse.
    private func read(in directory: OpenFile) throws(WormholeError) -> Result<Snapshot, Unparseable> {
        guard let file = try directory.openFile(suite.fileName) else {
            return .success(Snapshot(contents: SuiteJSON.Contents(), signature: nil))
        }
        let status: stat
        do throws(Errno) {
            status = try Syscall.fstat(file.descriptor)
        } catch {
            throw ioError(error, "inspect", file.path)
        }
        let data = try file.readToEnd()
        do throws(SuiteJSON.ParseError) {
            return .success(Snapshot(contents: try SuiteJSON.decodeSuite(data), signature: FileVersion(status)))
        } catch {
            return .failure(Unparseable(error: error, size: data.count))
        }
    }

    /// The error for a suite file that is not one JSON object: it names the file and the byte
    /// offset, and the command that repairs it.
    private func unreadable(_ problem: Unparseable, writing: Bool) -> WormholeError {
        let suiteOption = suite.rawValue == container.group.rawValue ? "" : " --suite \(suite.rawValue)"
        return WormholeError(
            .corruptSuite, value: path,
            "suite file '\(path)' (\(problem.size) bytes) is not one JSON object: \(problem.error.reason) at byte "
                + "\(problem.error.offset); \(writing ? "nothing was written" : "it was left as it is"). Fix it by hand, or run "
                + "'wormholectl defaults repair --group \(container.group.rawValue)\(suiteOption)' to move it aside and start "
                + "an empty suite")
    }

    // MARK: Repair

    /// Moves a suite file that is not one JSON object aside to the first free
    /// `<suite>.json.corrupt-<n>` (never deleted), under the writers' lock, so that the suite
    /// starts again empty. Returns the path it was moved to; nil (nothing changed) when the
    /// suite reads, or there is none.
    func repair() throws(WormholeError) -> String? {
        guard let directory = try container.openDirectory(named: Self.directoryName, create: false) else { return nil }
        let lock = try directory.openOrCreateFile(suite.lockName)
        return try withExtendedLifetime(lock) { () throws(WormholeError) -> String? in
            try lock.lock(exclusive: true)
            guard case .failure(let problem) = try read(in: directory) else { return nil }
            var number = 1
            while (try? Syscall.lstatat(directory.descriptor, suite.corruptName(number))) != nil { number += 1 }
            let aside = directory.child(suite.corruptName(number))
            let changeCounter = try mapCounter(writable: true, in: directory)
            try directory.rename(suite.fileName, to: suite.corruptName(number))
            _ = changeCounter?.increment()
            cache.withLock { $0 = nil }
            logger.warning(
                "suite file moved aside; the suite starts again empty",
                metadata: ["path": "\(path)", "aside": "\(aside)", "reason": "\(problem.error)"])
            return aside
        }
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

    /// Runs `body` on the suite under the writers' exclusive `flock`, then, if anything changed,
    /// replaces the file atomically with a strictly newer modification time. Unknown values are
    /// written back byte for byte unless `body` replaced or removed them.
    ///
    /// - Throws: what `body` throws (nothing is written then), ``WormholeError/Code/corruptSuite``
    ///   when the current file is not one JSON object (nothing is written, nothing moved),
    ///   ``WormholeError/Code/suiteTooLarge`` when the suite would be over `maximumBytes` after a
    ///   write that adds or changes a value, or a storage error.
    func modify<Result>(
        maximumBytes: Int = .max, _ body: (inout SuiteJSON.Contents) throws -> Result
    ) throws -> Outcome<Result> {
        guard let directory = try container.openDirectory(named: Self.directoryName, create: true) else {
            throw WormholeError(.io, value: path, "cannot create the directory of '\(path)'")
        }
        let lock = try directory.openOrCreateFile(suite.lockName)
        return try withExtendedLifetime(lock) {
            try lock.lock(exclusive: true)
            let old: Snapshot
            if let cached = cachedIfCurrent() {
                // Under the lock the file cannot change: the cached parse of this very file serves.
                old = cached
            } else {
                switch try read(in: directory) {
                case .success(let snapshot): old = snapshot
                case .failure(let problem): throw unreadable(problem, writing: true)
                }
            }
            var contents = old.contents
            let result = try body(&contents)
            // The keys whose value changed, found without sorting every key (a suite of thousands).
            var changed = Set<String>()
            for (key, value) in contents.values where old.contents.values[key] != value { changed.insert(key) }
            for (key, raw) in contents.unknown where old.contents.unknown[key] != raw { changed.insert(key) }
            for key in old.contents.values.keys where contents.values[key] == nil { changed.insert(key) }
            for key in old.contents.unknown.keys where contents.unknown[key] == nil { changed.insert(key) }
            var changes: [(key: String, value: PropertyListValue?)] = []
            var onlyRemovals = true
            for key in changed.sorted() {
                changes.append((key, contents.values[key]))
                if contents.values[key] != nil || contents.unknown[key] != nil { onlyRemovals = false }
            }
            if changes.isEmpty {
                _ = remember(old)
                return Outcome(result: result, changes: [], generation: old.generation)
            }
            for change in changes {
                if let value = change.value, SuiteJSON.depth(of: value) >= SuiteJSON.maximumDepth {
                    throw WormholeError(
                        .invalidValue, value: change.key,
                        "value for key \(NameRules.quoted(change.key)) nests deeper than \(SuiteJSON.maximumDepth - 1) levels; "
                            + "nothing was written")
                }
            }
            let encoded = SuiteJSON.encodeSuite(&contents)
            if encoded.count > maximumBytes && !onlyRemovals {
                throw WormholeError(
                    .suiteTooLarge, value: path,
                    "the write would make suite '\(suite)' \(encoded.count) bytes, over its limit of \(maximumBytes) bytes; "
                        + "nothing was written (removing keys is always allowed)")
            }
            let generation = max(Syscall.realTimeNanoseconds(), old.generation &+ 1)
            // Mapped (and created) before the rename: a write that could not count is not made.
            let changeCounter = try mapCounter(writable: true, in: directory)
            try directory.replaceAtomically(
                suite.fileName, with: encoded, temporaryName: suite.temporaryName,
                durability: durability, modified: generation)
            WormholeRuntime.shared.sweptDirectories.onFirstWrite(
                in: directory, olderThan: FileTransiting.staleTemporaryAge.wholeNanoseconds)
            let count = changeCounter?.increment()
            // Still under the lock: the file now in place is the one just written.
            if let status = try? Syscall.lstatat(directory.descriptor, suite.fileName) {
                _ = remember(Snapshot(contents: contents, signature: FileVersion(status), counter: count))
            }
            return Outcome(result: result, changes: changes, generation: generation)
        }
    }
}

extension WormholeError.Code {
    /// A write would make a shared-defaults suite larger than its limit (4 MiB by default); the
    /// suite is unchanged. The error names the size and the limit.
    public static let suiteTooLarge = WormholeError.Code("suiteTooLarge")
    /// A shared-defaults value is not of the type asked for, or is a value this version does not
    /// understand (an unknown `$` tag, kept as it is).
    public static let typeMismatch = WormholeError.Code("typeMismatch")
}

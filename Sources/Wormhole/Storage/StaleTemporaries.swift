// SPDX-License-Identifier: Apache-2.0
// Removing the temporary files that writers killed mid-write leave behind (defect #6).
//
// A writer creates `.<name>.<pid>-<hex>.tmp`, takes `flock(LOCK_EX)` on it at once and holds it
// until the file is renamed and closed; the kernel drops the lock when the writer dies, however
// it dies. A sweep removes only files whose name has exactly that shape, that are regular files of
// this user, older than the age asked for, and whose lock it can take without waiting: never a
// file a live writer still owns.

import Glibc
import SystemPackage
import WormholeSystem

extension OpenFile {
    /// An empty temporary younger than this is kept whatever the age asked for: it may belong to a
    /// writer between its `open` and its `flock` (microseconds apart). 2 s, in nanoseconds.
    static let unlockedCreationGrace: UInt64 = 2_000_000_000

    /// Whether `name` is a writer's temporary file: `.` + a name of 1 to 250 bytes of
    /// `A-Z a-z 0-9 . _ -` not starting with `.`, then `.` + decimal pid + `-` + 1 to 16 lower-case
    /// hex digits + `.tmp`. Message temporaries are `.<identifier>.<pid>-<hex>.tmp`, shared-defaults
    /// ones `.<suite>.json.<pid>-<hex>.tmp`; lock files (`.<identifier>.lock`) never match.
    static func isTemporaryName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count > 7, bytes.first == UInt8(ascii: "."), bytes.suffix(4) == Array(".tmp".utf8) else {
            return false
        }
        let middle = bytes[1..<(bytes.count - 4)]
        guard let dot = middle.lastIndex(of: UInt8(ascii: ".")) else { return false }
        let stem = middle[middle.startIndex..<dot]
        let tag = middle[(dot + 1)...]
        guard let dash = tag.firstIndex(of: UInt8(ascii: "-")) else { return false }
        let pid = tag[tag.startIndex..<dash]
        let random = tag[(dash + 1)...]
        func isNameByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
        return (1...250).contains(stem.count) && stem.first != UInt8(ascii: ".") && stem.allSatisfy(isNameByte)
            && (1...10).contains(pid.count) && pid.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            && (1...16).contains(random.count)
            && random.allSatisfy {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
            }
    }

    /// Removes the writers' temporary files in this directory (``isTemporaryName(_:)``) that were
    /// last modified more than `age` nanoseconds ago and that no live writer holds: each is opened
    /// without following symlinks, must be a regular file of this user, and is removed only while
    /// this call holds its `flock(LOCK_EX | LOCK_NB)` and the name still names that very file.
    /// Anything else is left alone. Returns how many were removed.
    @discardableResult
    func removeStaleTemporaries(olderThan age: UInt64) throws(WormholeError) -> Int {
        var removed = 0
        for name in try names() where Self.isTemporaryName(name) {
            if try removeIfStale(name, olderThan: age) { removed += 1 }
        }
        return removed
    }

    private func removeIfStale(_ name: String, olderThan age: UInt64) throws(WormholeError) -> Bool {
        let opened: Int32
        do throws(Errno) {
            opened = try Syscall.openat(descriptor, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        } catch {
            // Renamed or removed meanwhile, a symlink, unreadable: not ours to remove.
            return false
        }
        let file = OpenFile(descriptor: opened, path: child(name))
        guard (try? file.checkSafe(.regularFile)) != nil else { return false }
        do throws(Errno) {
            guard try Syscall.tryFlock(file.descriptor, LOCK_EX) else { return false }  // a live writer
            // Under the lock: the age and size now, and the name must still be this file.
            let status = try Syscall.fstat(file.descriptor)
            let modified =
                UInt64(max(0, status.st_mtim.tv_sec)) &* 1_000_000_000 &+ UInt64(max(0, status.st_mtim.tv_nsec))
            let now = Syscall.realTimeNanoseconds()
            let minimumAge = status.st_size == 0 ? max(age, Self.unlockedCreationGrace) : age
            guard modified <= now, now - modified >= minimumAge else { return false }
            let current = try Syscall.lstatat(descriptor, name)
            guard current.st_dev == status.st_dev, current.st_ino == status.st_ino else { return false }
        } catch {
            return false
        }
        return try remove(name)
    }
}

/// The directories this process has already swept on its first write there (the process's one
/// is ``WormholeRuntime/sweptDirectories``).
final class OpportunisticSweep: Sendable {
    private let swept = Locked<Set<String>>([])

    /// Sweeps `directory` (best effort, errors ignored) when this process has not swept it yet.
    func onFirstWrite(in directory: OpenFile, olderThan age: UInt64) {
        let first = swept.withLock { $0.insert(directory.path).inserted }
        if first { _ = try? directory.removeStaleTemporaries(olderThan: age) }
    }
}

extension Duration {
    /// Whole nanoseconds, 0 for a negative duration.
    var wholeNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000)
    }
}

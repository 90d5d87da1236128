// SPDX-License-Identifier: Apache-2.0
// A lock wait with a bound. `flock` has no timeout, and no descriptor reports a lock's release,
// so the one sanctioned bounded retry of the package lives here: `LOCK_NB`, then a sleep that
// doubles (from 1 ms to 50 ms for the stores' locks, from 10 µs to 1 ms for the journal's, which
// are held for microseconds or one `fdatasync`), until the lock is granted or the bound passes.

import FoundationEssentials
import Glibc
import SystemPackage
import WormholeSystem

enum LockWait {
    /// How long a lock wait may take: `WORMHOLE_LOCK_TIMEOUT` (seconds, fractions allowed) when
    /// set to a number of 0 or more, else 10 seconds.
    static let timeout: Duration = {
        if let text = Syscall.environment("WORMHOLE_LOCK_TIMEOUT"), let seconds = Double(text), seconds >= 0,
            seconds.isFinite
        {
            return .milliseconds(Int64(seconds * 1000))
        }
        return .seconds(10)
    }()

    /// How the sleeps between two tries grow: from `first` nanoseconds, doubling, to `longest`.
    struct Backoff: Sendable {
        var first: Int64
        var longest: Int64

        /// The stores' locks (mailboxes, defaults): held across a file's replacement, rarely contended.
        static let storage = Backoff(first: 1_000_000, longest: 50_000_000)
        /// The journal's `append.lock` (held for microseconds per append) and `sync.lock` (held for
        /// one `fdatasync`): a waiter asleep for milliseconds would leave the lock idle, and the
        /// appenders behind it waiting, for most of that time.
        static let journal = Backoff(first: 10_000, longest: 1_000_000)
        /// The journal's `sync.lock`: the appender that just synchronised appends again within
        /// microseconds and takes the lock back before a waiter asleep for longer wakes, so the
        /// waiters, whose records its syncs already cover, would not learn it for many syncs.
        static let journalSync = Backoff(first: 10_000, longest: 100_000)
    }

    /// Takes `operation` (`LOCK_EX` or `LOCK_SH`) on `descriptor`, retrying with `LOCK_NB` and a
    /// backoff until `timeout` has passed; then throws `EWOULDBLOCK`. Returns true once the lock is
    /// held; false when `unneeded`, asked after each pause, said the lock is no longer needed
    /// (the journal's group commit: another process's sync already covers the waiter's records).
    @discardableResult
    static func acquire(
        _ descriptor: Int32, _ operation: Int32, timeout: Duration, backoff: Backoff = .storage,
        unneeded: (() -> Bool)? = nil
    ) throws(Errno) -> Bool {
        // The uncontended case costs one system call (no clock read).
        if try Syscall.tryFlock(descriptor, operation) { return true }
        let start = ContinuousClock.now
        var pause = backoff.first  // nanoseconds
        while true {
            let elapsed = ContinuousClock.now - start
            if elapsed >= timeout { throw Errno.wouldBlock }
            let left = timeout - elapsed
            let (seconds, attoseconds) = left.components
            let leftNanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            Syscall.pause(nanoseconds: Int(min(pause, max(1, leftNanoseconds))))
            pause = min(pause * 2, backoff.longest)
            if let unneeded, unneeded() { return false }
            if try Syscall.tryFlock(descriptor, operation) { return true }
        }
    }

    /// The error for a lock on `path` not granted in time: it names the file and, when
    /// `/proc/locks` shows one, the process holding it.
    static func timedOut(_ descriptor: Int32, path: String) -> WormholeError {
        let holder = holderPID(descriptor).map { " (held by pid \($0))" } ?? ""
        return WormholeError(
            .lockTimeout, value: path,
            "timed out after \(timeout) waiting for the lock on '\(path)'\(holder); nothing was changed, try again")
    }

    /// The pid `/proc/locks` gives for a `flock` lock on the file open at `descriptor`, other than
    /// this process's; `nil` when none is listed or the file cannot be read.
    static func holderPID(_ descriptor: Int32) -> Int32? {
        guard let status = try? Syscall.fstat(descriptor) else { return nil }
        let device = UInt64(status.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        // `%02x:%02x:%llu`, as /proc/locks writes the device and inode.
        func hex(_ value: UInt64) -> String { (value < 0x10 ? "0" : "") + String(value, radix: 16) }
        let key = "\(hex(major)):\(hex(minor)):\(UInt64(status.st_ino))"
        guard let text = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return nil }
        let own = Syscall.processID()
        for line in text.split(separator: "\n") {
            // `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; a waiter's line has `->` after the number.
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "FLOCK", fields[2] != "->" else { continue }
            guard fields[5] == key, let pid = Int32(fields[4]), pid != own else { continue }
            return pid
        }
        return nil
    }
}

import FoundationEssentials
import Glibc
import SystemPackage

/// An open file or directory of a journal: a descriptor closed when the last reference goes,
/// with the path it was opened at (for messages only; every call goes through the descriptor).
/// Immutable, so it is shared between threads: the calls on it (`pread`, `pwrite`, `flock`…)
/// carry their own offsets and need no shared state.
final class JournalFile: Sendable {
    let descriptor: Int32
    let path: String

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { Syscall.close(descriptor) }

    func child(_ name: String) -> String { path + "/" + name }

    // MARK: The journal directory

    /// Opens (creating it with mode 0700 when `create`) the journal directory `name` of the wormhole
    /// directory, checking the container, the wormhole directory and the journal directory are safe.
    /// Nil when something is missing and `create` is false.
    static func openJournalDirectory(
        container: GroupContainer, directory: WormholeDirectoryName, name: String, create: Bool
    ) throws(WormholeError) -> JournalFile? {
        guard let wormhole = try container.openDirectory(directory, create: create),
            let journal = try wormhole.openDirectory(name, create: create)
        else { return nil }
        do throws(Errno) {
            let copy = try Syscall.openat(journal.descriptor, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            return JournalFile(descriptor: copy, path: journal.path)
        } catch {
            throw ioError(error, "open the directory", journal.path)
        }
    }

    /// The names in this directory, without `.` and `..`.
    func names() throws(WormholeError) -> [String] {
        do throws(Errno) {
            let copy = try Syscall.openat(descriptor, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            return try Syscall.readDirectory(consuming: copy).map(\.name).filter { $0 != "." && $0 != ".." }
        } catch {
            throw ioError(error, "list the directory", path)
        }
    }

    /// Opens the existing regular file `name` (read-only, or read-write), without following a
    /// symlink, and checks it is safe; nil when it does not exist.
    func openFile(_ name: String, writable: Bool = false) throws(WormholeError) -> JournalFile? {
        let flags = (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC
        let opened: Int32
        do throws(Errno) {
            opened = try Syscall.openat(descriptor, name, flags)
        } catch .noSuchFileOrDirectory {
            return nil
        } catch .tooManySymbolicLinkLevels {
            throw WormholeError(
                .unsafePath, value: child(name),
                "'\(child(name))' is a symbolic link; symlinks inside a group container are never followed")
        } catch {
            throw ioError(error, "open", child(name))
        }
        let file = JournalFile(descriptor: opened, path: child(name))
        try OpenFile.checkSafe(try file.status(), kind: .regularFile, path: file.path)
        return file
    }

    /// Opens the file `name` read-write, creating it with mode 0600 when missing (lock files).
    func openOrCreate(_ name: String) throws(WormholeError) -> JournalFile {
        let flags = O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC
        let opened: Int32
        do throws(Errno) {
            opened = try Syscall.openat(descriptor, name, flags, 0o600)
        } catch .tooManySymbolicLinkLevels {
            throw WormholeError(
                .unsafePath, value: child(name),
                "'\(child(name))' is a symbolic link; symlinks inside a group container are never followed")
        } catch {
            throw ioError(error, "open or create", child(name))
        }
        let file = JournalFile(descriptor: opened, path: child(name))
        try OpenFile.checkSafe(try file.status(), kind: .regularFile, path: file.path)
        return file
    }

    /// Creates the file `name` (replacing a leftover of the same name) with mode 0600, writes
    /// `bytes`, optionally `fdatasync`s it, and renames it to `final`. Returns `final` opened
    /// read-write.
    func createAtomically(_ final: String, temporary: String, bytes: [UInt8], sync: Bool) throws(WormholeError) -> JournalFile {
        _ = try? remove(temporary)
        let opened: Int32
        do throws(Errno) {
            opened = try Syscall.openat(descriptor, temporary, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            try Syscall.fchmod(opened, 0o600)
        } catch {
            throw ioError(error, "create", child(temporary))
        }
        let file = JournalFile(descriptor: opened, path: child(final))
        do throws(WormholeError) {
            try file.write(bytes, at: 0)
            if sync { try file.dataSync() }
            do throws(Errno) {
                try Syscall.renameat(descriptor, temporary, final)
            } catch {
                throw ioError(error, "rename '\(child(temporary))' to", child(final))
            }
        } catch {
            _ = try? remove(temporary)
            throw error
        }
        if sync { try dataSync() }
        return file
    }

    /// Removes the file `name`; false when it was not there.
    @discardableResult
    func remove(_ name: String) throws(WormholeError) -> Bool {
        do throws(Errno) {
            try Syscall.unlinkat(descriptor, name)
            return true
        } catch .noSuchFileOrDirectory {
            return false
        } catch {
            throw ioError(error, "remove", child(name))
        }
    }

    /// `stat` of the entry `name`, nil when missing.
    func status(of name: String) throws(WormholeError) -> stat? {
        do throws(Errno) {
            return try Syscall.lstatat(descriptor, name)
        } catch .noSuchFileOrDirectory {
            return nil
        } catch {
            throw ioError(error, "inspect", child(name))
        }
    }

    // MARK: Files

    func status() throws(WormholeError) -> stat {
        do throws(Errno) {
            return try Syscall.fstat(descriptor)
        } catch {
            throw ioError(error, "inspect", path)
        }
    }

    /// The file's size (`lseek` to its end, not `fstat`: see `Syscall.endOffset`).
    func size() throws(WormholeError) -> Int {
        do throws(Errno) {
            return try Syscall.endOffset(descriptor)
        } catch {
            throw ioError(error, "seek to the end of", path)
        }
    }

    /// One `pread` into all of `buffer` (kept by the caller, so a read allocates nothing) at
    /// `offset`; returns the number of bytes read, fewer than asked only at the end of the file.
    func readOnce(at offset: Int, into buffer: inout [UInt8]) throws(WormholeError) -> Int {
        do throws(Errno) {
            let result = buffer.withUnsafeMutableBytes { bytes in
                Result { () throws(Errno) in try Syscall.pread(descriptor, into: bytes, at: offset) }
            }
            return try result.get()
        } catch {
            throw ioError(error, "read", path)
        }
    }

    /// Reads up to `count` bytes at `offset` (fewer at the end of the file).
    func read(at offset: Int, count: Int) throws(WormholeError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got: Int
            do throws(Errno) {
                let result = bytes.withUnsafeMutableBytes { buffer in
                    Result { () throws(Errno) in
                        try Syscall.pread(
                            descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + done)
                    }
                }
                got = try result.get()
            } catch {
                throw ioError(error, "read", path)
            }
            if got == 0 { break }
            done += got
        }
        if done < count { bytes.removeSubrange(done...) }
        return bytes
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: [UInt8], at offset: Int) throws(WormholeError) {
        var done = 0
        while done < bytes.count {
            do throws(Errno) {
                let result = bytes.withUnsafeBytes { buffer in
                    Result { () throws(Errno) in
                        try Syscall.pwrite(descriptor, from: UnsafeRawBufferPointer(rebasing: buffer[done...]), at: offset + done)
                    }
                }
                done += try result.get()
            } catch {
                throw ioError(error, "write", path)
            }
        }
    }

    func truncate(to length: Int) throws(WormholeError) {
        do throws(Errno) {
            try Syscall.ftruncate(descriptor, length)
        } catch {
            throw ioError(error, "truncate", path)
        }
    }

    func dataSync() throws(WormholeError) {
        do throws(Errno) {
            try Syscall.fdatasync(descriptor)
        } catch {
            throw ioError(error, "fdatasync", path)
        }
    }

    /// Takes the lock, waiting at most ``LockWait/timeout`` with one of the journal's short backoffs.
    /// When `unneeded` is given, it is asked after each pause of the wait: once it returns true the
    /// wait ends without the lock and this returns false.
    @discardableResult
    func lock(backoff: LockWait.Backoff = .journal, unneeded: (() -> Bool)? = nil) throws(WormholeError) -> Bool {
        do throws(Errno) {
            return try LockWait.acquire(
                descriptor, LOCK_EX, timeout: LockWait.timeout, backoff: backoff, unneeded: unneeded)
        } catch .wouldBlock {
            throw LockWait.timedOut(descriptor, path: path)
        } catch {
            throw ioError(error, "lock (exclusive)", path)
        }
    }

    func tryLock() throws(WormholeError) -> Bool {
        do throws(Errno) {
            return try Syscall.tryLockExclusive(descriptor)
        } catch {
            throw ioError(error, "lock (exclusive)", path)
        }
    }

    /// Takes the lock, waiting at most `bound` (the bounded retry of ``LockWait``); false when
    /// it is still held then.
    func lock(within bound: Duration) throws(WormholeError) -> Bool {
        do throws(Errno) {
            try LockWait.acquire(descriptor, LOCK_EX, timeout: bound)
            return true
        } catch .wouldBlock {
            return false
        } catch {
            throw ioError(error, "lock (exclusive)", path)
        }
    }

    func unlock() {
        // Closing the descriptor would release it too; an unlock that fails leaves nothing to fix.
        try? Syscall.unlock(descriptor)
    }
}

// SPDX-License-Identifier: Apache-2.0
// An open file or directory inside a group container: the stores (mailboxes, defaults) read and
// write whole files, the journal reads and writes at explicit offsets.

import FoundationEssentials
import Glibc
import SystemPackage
import WormholeSystem

/// Flags every open inside a container uses: never follow a symlink, never leak into a child process.
private let baseFlags = O_NOFOLLOW | O_CLOEXEC

/// A file descriptor that is closed when the last reference goes away. Immutable, so it may be
/// shared between threads: the calls at explicit offsets (`pread`, `pwrite`, `flock`…) need no
/// shared state. A store's file is owned by the call that opened it (its reads and writes move
/// the one file offset); a journal's files are shared by its reader and writers.
final class OpenFile: Sendable {
    let descriptor: Int32
    /// The path the descriptor was opened at, for messages.
    let path: String

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { Syscall.close(descriptor) }

    /// The path of `name` inside this directory.
    func child(_ name: String) -> String {
        path == "/" ? "/" + name : path + "/" + name
    }

    // MARK: Entries inside a container

    /// Opens the directory `name` inside this one without following a symlink, creating it with mode
    /// 0700 when missing and `create` is true, and checks it is safe. Returns nil when it is missing
    /// and `create` is false.
    func openDirectory(_ name: String, create: Bool) throws(WormholeError) -> OpenFile? {
        let path = child(name)
        let flags = O_RDONLY | O_DIRECTORY | baseFlags
        var created = false
        while true {
            let opened: Int32
            do throws(Errno) {
                opened = try Syscall.openat(descriptor, name, flags)
            } catch .noSuchFileOrDirectory where create && !created {
                do throws(Errno) {
                    try Syscall.mkdirat(descriptor, name, 0o700)
                } catch .fileExists {
                    // Someone else created it between our open and our mkdir: open theirs.
                } catch {
                    throw ioError(error, "create the directory", path)
                }
                created = true
                continue
            } catch .noSuchFileOrDirectory where !create {
                return nil
            } catch .tooManySymbolicLinkLevels, .notDirectory {
                throw wrongKind(name, expected: .directory)
            } catch {
                throw ioError(error, "open the directory", path)
            }
            let directory = OpenFile(descriptor: opened, path: path)
            try directory.checkSafe(.directory)
            return directory
        }
    }

    /// Opens the existing file `name` for reading (and writing when `writable`) without following
    /// a symlink and checks it is safe. Returns nil when there is no such file.
    func openFile(_ name: String, writable: Bool = false) throws(WormholeError) -> OpenFile? {
        try openRegularFile(name, writable ? O_RDWR : O_RDONLY, action: "open")
    }

    /// Opens the file `name` for reading and writing, creating it with mode 0600 when missing, without
    /// following a symlink, and checks it is safe. Used for lock files.
    func openOrCreateFile(_ name: String) throws(WormholeError) -> OpenFile {
        try openRegularFile(name, O_RDWR | O_CREAT, action: "open or create")!
    }

    /// Opens the regular file `name` with `flags`, never following a symlink, and checks it is
    /// safe; nil when it does not exist (and `flags` do not create it).
    private func openRegularFile(_ name: String, _ flags: Int32, action: String) throws(WormholeError) -> OpenFile? {
        let opened: Int32
        do throws(Errno) {
            // O_NONBLOCK: opening a FIFO planted in the directory must not hang; it is then refused
            // as not a regular file. It has no effect on reading a regular file.
            opened = try Syscall.openat(descriptor, name, flags | O_NONBLOCK | baseFlags, 0o600)
        } catch .noSuchFileOrDirectory where flags & O_CREAT == 0 {
            return nil
        } catch .tooManySymbolicLinkLevels {
            throw wrongKind(name, expected: .regularFile)
        } catch {
            throw ioError(error, action, child(name))
        }
        let file = OpenFile(descriptor: opened, path: child(name))
        try file.checkSafe(.regularFile)
        return file
    }

    /// Creates the new file `name` (it must not exist) with mode 0600 for writing (and reading
    /// when `readable`). Its messages name `reportedAs` when given (the name it is renamed to).
    func createNewFile(_ name: String, readable: Bool = false, reportedAs: String? = nil) throws(WormholeError)
        -> OpenFile
    {
        let flags = (readable ? O_RDWR : O_WRONLY) | O_CREAT | O_EXCL | baseFlags
        let file: OpenFile
        do throws(Errno) {
            let opened = try Syscall.openat(descriptor, name, flags, 0o600)
            file = OpenFile(descriptor: opened, path: reportedAs ?? child(name))
        } catch {
            throw ioError(error, "create", child(name))
        }
        do throws(Errno) {
            // The umask may have removed bits; the contract says 0600, exactly.
            try Syscall.fchmod(file.descriptor, 0o600)
        } catch {
            throw ioError(error, "set the mode of", child(name))
        }
        return file
    }

    /// Checks, without following it, that the entry `name` (if it exists) is a safe regular file:
    /// so that a rename never silently replaces a symlink, a directory or another user's file.
    func checkReplaceable(_ name: String) throws(WormholeError) {
        guard let status = try status(of: name) else { return }
        try EntryKind.regularFile.check(status, path: child(name))
    }

    /// Replaces the file `name` atomically with `data`: a new file `temporaryName` (mode 0600) in
    /// this directory is written in full (and `fsync`ed for `FileTransiting.Durability.synchronized`),
    /// then renamed over `name` (the directory is `fsync`ed after it for `.synchronized`). A
    /// reader sees the old or the new content, never a mix. When `modified` is given, the new
    /// file's modification time is set to it (nanoseconds since 1970) before the rename. If any
    /// step fails, the temporary file is removed and `name` is left as it was.
    func replaceAtomically(
        _ name: String, with data: Data, temporaryName: String, durability: FileTransiting.Durability,
        modified: UInt64? = nil
    ) throws(WormholeError) {
        // Never silently replace a symlink, a directory or another user's file planted at the target.
        try checkReplaceable(name)
        let file = try createNewFile(temporaryName)
        do throws(WormholeError) {
            // Held until the file is closed, after the rename: a sweep of stale temporaries never
            // removes a file a live writer owns (see `removeStaleTemporaries`).
            try file.lock(exclusive: true)
            try file.write(data)
            if let modified { try file.setModificationTime(nanoseconds: modified) }
            if durability == .synchronized { try file.synchronize() }
            try rename(temporaryName, to: name)
        } catch {
            _ = try? remove(temporaryName)
            throw error
        }
        if durability == .synchronized { try synchronize() }
    }

    /// Creates the file `final` from `bytes`: a new file `temporary` (mode 0600; a leftover of that
    /// name is removed first) is written, `fdatasync`ed when `sync`, and renamed to `final` (the
    /// directory is `fdatasync`ed after it when `sync`). Returns `final` open for reading and
    /// writing. If any step fails, the temporary file is removed.
    func createAtomically(_ final: String, temporary: String, bytes: [UInt8], sync: Bool) throws(WormholeError)
        -> OpenFile
    {
        _ = try? remove(temporary)
        let file = try createNewFile(temporary, readable: true, reportedAs: child(final))
        do throws(WormholeError) {
            try file.write(bytes, at: 0)
            if sync { try file.dataSync() }
            try rename(temporary, to: final)
        } catch {
            _ = try? remove(temporary)
            throw error
        }
        if sync { try dataSync() }
        return file
    }

    /// Sets the open file's access and modification times to `nanoseconds` since 1970.
    func setModificationTime(nanoseconds: UInt64) throws(WormholeError) {
        do throws(Errno) {
            try Syscall.futimens(descriptor, nanoseconds: nanoseconds)
        } catch {
            throw ioError(error, "set the modification time of", path)
        }
    }

    /// Renames `from` to `to` inside this directory, replacing `to` atomically.
    func rename(_ from: String, to: String) throws(WormholeError) {
        do throws(Errno) {
            try Syscall.renameat(descriptor, from, to)
        } catch {
            throw ioError(error, "rename '\(child(from))' to", child(to))
        }
    }

    /// Removes the entry `name` (never a directory; a symlink itself, never its target). Returns false
    /// when there was nothing to remove.
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

    /// The names in this directory, without `.` and `..`, and without subdirectories unless
    /// `includingDirectories`.
    func names(includingDirectories: Bool = false) throws(WormholeError) -> [String] {
        do throws(Errno) {
            // readdir needs its own descriptor (closedir closes it); "." is this very directory.
            let copy = try Syscall.openat(descriptor, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            return try Syscall.readDirectory(consuming: copy).filter { entry in
                guard entry.name != ".", entry.name != ".." else { return false }
                if includingDirectories { return true }
                if let isDirectory = entry.isDirectory { return !isDirectory }
                // The file system did not say: ask (an entry removed meanwhile is dropped too).
                guard let status = try? Syscall.lstatat(descriptor, entry.name) else { return false }
                return status.st_mode & 0o170000 != EntryKind.directory.typeBits
            }.map(\.name)
        } catch {
            throw ioError(error, "list the directory", path)
        }
    }

    // MARK: Reading and writing

    /// Reads the file from its current offset to the end, however many short reads that takes.
    func readToEnd() throws(WormholeError) -> Data {
        try readToEnd(limit: .max) { _ in
            WormholeError(.io, value: path, "cannot read '\(path)': it does not fit in memory")
        }
    }

    /// Reads the file from its current offset to the end, refusing one larger than `limit` bytes.
    ///
    /// The size is taken from `fstat` first: a file over the limit is refused (with the error
    /// `tooLarge` makes of its size) before a byte of it is read or a buffer allocated for it.
    /// A file that grows past the limit while it is read is refused too; at most `limit + 1`
    /// bytes are ever held. The buffer is the returned `Data` itself: no copy is made.
    func readToEnd(limit: Int, tooLarge: (Int) -> WormholeError) throws(WormholeError) -> Data {
        let size: Int
        do throws(Errno) {
            size = Int(try Syscall.fstat(descriptor).st_size)
        } catch {
            throw ioError(error, "inspect", path)
        }
        if size > limit { throw tooLarge(size) }
        // One byte more than the size: reading 0 bytes into it proves the end was reached.
        let ceiling = limit == .max ? Int.max : limit + 1
        var data = Data(count: min(max(size, 4096 - 1) + 1, ceiling))
        var count = 0
        while true {
            if count == data.count {
                if count >= ceiling { throw tooLarge(count) }
                data.count = min(count * 2, ceiling)
            }
            let readCount: Int
            do throws(Errno) {
                let result = data.withUnsafeMutableBytes { buffer in
                    Result { () throws(Errno) in
                        try Syscall.read(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]))
                    }
                }
                readCount = try result.get()
            } catch {
                throw ioError(error, "read", path)
            }
            if readCount == 0 { break }
            count += readCount
        }
        data.count = count
        return data
    }

    /// Writes all of `bytes`, however many short writes that takes: at `offset` (`pwrite`), or
    /// at the file's offset when it is nil (`write`).
    func write(_ bytes: some ContiguousBytes, at offset: Int? = nil) throws(WormholeError) {
        do throws(Errno) {
            let result = bytes.withUnsafeBytes { buffer in
                Result { () throws(Errno) in
                    var done = 0
                    while done < buffer.count {
                        let rest = UnsafeRawBufferPointer(rebasing: buffer[done...])
                        if let offset {
                            done += try Syscall.pwrite(descriptor, from: rest, at: offset + done)
                        } else {
                            done += try Syscall.write(descriptor, from: rest)
                        }
                    }
                }
            }
            try result.get()
        } catch {
            throw ioError(error, "write", path)
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
        do throws(Errno) {
            let result = bytes.withUnsafeMutableBytes { buffer in
                Result { () throws(Errno) in
                    var done = 0
                    while done < count {
                        let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
                        let got = try Syscall.pread(descriptor, into: rest, at: offset + done)
                        if got == 0 { break }
                        done += got
                    }
                    return done
                }
            }
            let done = try result.get()
            if done < count { bytes.removeSubrange(done...) }
            return bytes
        } catch {
            throw ioError(error, "read", path)
        }
    }

    /// The file's `fstat`.
    func status() throws(WormholeError) -> stat {
        do throws(Errno) {
            return try Syscall.fstat(descriptor)
        } catch {
            throw ioError(error, "inspect", path)
        }
    }

    /// The `lstat` of the entry `name` of this directory; nil when there is none.
    func status(of name: String) throws(WormholeError) -> stat? {
        do throws(Errno) {
            return try Syscall.lstatat(descriptor, name)
        } catch .noSuchFileOrDirectory {
            return nil
        } catch {
            throw ioError(error, "inspect", child(name))
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

    /// Cuts the file to `length` bytes.
    func truncate(to length: Int) throws(WormholeError) {
        do throws(Errno) {
            try Syscall.ftruncate(descriptor, length)
        } catch {
            throw ioError(error, "truncate", path)
        }
    }

    /// Flushes the file (or directory) to stable storage.
    func synchronize() throws(WormholeError) {
        do throws(Errno) {
            try Syscall.fsync(descriptor)
        } catch {
            throw ioError(error, "fsync", path)
        }
    }

    /// Flushes the file's data (and the metadata needed to read it) to stable storage.
    func dataSync() throws(WormholeError) {
        do throws(Errno) {
            try Syscall.fdatasync(descriptor)
        } catch {
            throw ioError(error, "fdatasync", path)
        }
    }

    /// Takes an advisory `flock` lock on the file, waiting at most ``LockWait/timeout`` with
    /// `backoff`. It is released by ``unlock()``, or when the descriptor is closed (or the process
    /// exits, however it exits). When `unneeded` is given, it is asked after each pause of the
    /// wait: once it returns true the wait ends without the lock and this returns false.
    @discardableResult
    func lock(
        exclusive: Bool = true, backoff: LockWait.Backoff = .storage, unneeded: (() -> Bool)? = nil
    ) throws(WormholeError) -> Bool {
        do throws(Errno) {
            return try LockWait.acquire(
                descriptor, exclusive ? LOCK_EX : LOCK_SH, timeout: LockWait.timeout, backoff: backoff,
                unneeded: unneeded)
        } catch .wouldBlock {
            throw LockWait.timedOut(descriptor, path: path)
        } catch {
            throw ioError(error, exclusive ? "lock (exclusive)" : "lock (shared)", path)
        }
    }

    /// Takes the exclusive lock without waiting; false when another open file description holds it.
    func tryLock() throws(WormholeError) -> Bool {
        do throws(Errno) {
            return try Syscall.tryFlock(descriptor, LOCK_EX)
        } catch {
            throw ioError(error, "lock (exclusive)", path)
        }
    }

    /// Takes the exclusive lock, waiting at most `bound` (the bounded retry of ``LockWait``);
    /// false when it is still held then.
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

    /// Releases the lock (closing the descriptor would too); an unlock that fails leaves nothing to fix.
    func unlock() { try? Syscall.unlock(descriptor) }

    /// Checks the open file is of `kind`, owned by this user and not writable by group or others.
    func checkSafe(_ kind: EntryKind) throws(WormholeError) {
        try kind.check(try status(), path: path)
    }

    /// The error for an entry that an O_NOFOLLOW open refused: a symlink, or something else.
    private func wrongKind(_ name: String, expected: EntryKind) -> WormholeError {
        expected.refused(try? Syscall.lstatat(descriptor, name), path: child(name))
    }
}

// An open file or directory inside a group container, with the path it was opened at (for error
// messages only: every operation goes through the descriptor, never through the path again).

import FoundationEssentials
import Glibc
import SystemPackage

/// What an entry inside a container must be.
enum EntryKind: CustomStringConvertible {
    case directory
    case regularFile

    var description: String {
        switch self {
        case .directory: "a directory"
        case .regularFile: "a regular file"
        }
    }

    var typeBits: mode_t {
        switch self {
        case .directory: 0o040000
        case .regularFile: 0o100000
        }
    }
}

/// Flags every open inside a container uses: never follow a symlink, never leak into a child process.
private let baseFlags = O_NOFOLLOW | O_CLOEXEC

/// A file descriptor that is closed when the last reference goes away. Not `Sendable`: each one is
/// owned by the call that opened it and never escapes it.
final class OpenFile {
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

    // MARK: Opening the root (the one place where a path is followed)

    /// Opens the container root, following symlinks in its path (the root is the user's choice, like
    /// `$HOME`; only what is inside it is checked). Creates it and its missing parents with mode 0700
    /// when `create` is true; returns nil when it is missing and `create` is false.
    static func openRoot(_ path: String, create: Bool) throws(WormholeError) -> OpenFile? {
        let flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC
        do throws(Errno) {
            return OpenFile(descriptor: try Syscall.open(path, flags), path: path)
        } catch .noSuchFileOrDirectory where create {
            try makeDirectories(path)
            do throws(Errno) {
                return OpenFile(descriptor: try Syscall.open(path, flags), path: path)
            } catch {
                throw ioError(error, "open the container root", path)
            }
        } catch .noSuchFileOrDirectory {
            return nil
        } catch {
            throw ioError(error, "open the container root", path)
        }
    }

    /// `mkdir -p` with mode 0700 for every directory it creates.
    private static func makeDirectories(_ path: String) throws(WormholeError) {
        do throws(Errno) {
            try Syscall.mkdir(path, 0o700)
        } catch .fileExists {
            return
        } catch .noSuchFileOrDirectory {
            let parent = PathText.parent(of: path)
            guard !parent.isEmpty, parent != path else {
                throw ioError(.noSuchFileOrDirectory, "create the directory", path)
            }
            try makeDirectories(parent)
            do throws(Errno) {
                try Syscall.mkdir(path, 0o700)
            } catch .fileExists {
                return
            } catch {
                throw ioError(error, "create the directory", path)
            }
        } catch {
            throw ioError(error, "create the directory", path)
        }
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

    /// Opens the existing file `name` for reading without following a symlink and checks it is safe.
    /// Returns nil when there is no such file.
    func openFileForReading(_ name: String) throws(WormholeError) -> OpenFile? {
        // O_NONBLOCK: opening a FIFO planted in the directory must not hang; it is then refused as
        // not a regular file. It has no effect on reading a regular file.
        let flags = O_RDONLY | O_NONBLOCK | baseFlags
        let opened: Int32
        do throws(Errno) {
            opened = try Syscall.openat(descriptor, name, flags)
        } catch .noSuchFileOrDirectory {
            return nil
        } catch .tooManySymbolicLinkLevels {
            throw wrongKind(name, expected: .regularFile)
        } catch {
            throw ioError(error, "open", child(name))
        }
        let file = OpenFile(descriptor: opened, path: child(name))
        try file.checkSafe(.regularFile)
        return file
    }

    /// Opens the file `name` for reading and writing, creating it with mode 0600 when missing, without
    /// following a symlink, and checks it is safe. Used for lock files.
    func openOrCreateFile(_ name: String) throws(WormholeError) -> OpenFile {
        let flags = O_RDWR | O_CREAT | O_NONBLOCK | baseFlags
        let opened: Int32
        do throws(Errno) {
            opened = try Syscall.openat(descriptor, name, flags, 0o600)
        } catch .tooManySymbolicLinkLevels {
            throw wrongKind(name, expected: .regularFile)
        } catch {
            throw ioError(error, "open or create", child(name))
        }
        let file = OpenFile(descriptor: opened, path: child(name))
        try file.checkSafe(.regularFile)
        return file
    }

    /// Creates the new file `name` (it must not exist) with mode 0600 for writing.
    func createNewFile(_ name: String) throws(WormholeError) -> OpenFile {
        let flags = O_WRONLY | O_CREAT | O_EXCL | baseFlags
        let file: OpenFile
        do throws(Errno) {
            file = OpenFile(descriptor: try Syscall.openat(descriptor, name, flags, 0o600), path: child(name))
        } catch {
            throw ioError(error, "create", child(name))
        }
        do throws(Errno) {
            // The umask may have removed bits; the contract says 0600, exactly.
            try Syscall.fchmod(file.descriptor, 0o600)
        } catch {
            throw ioError(error, "set the mode of", file.path)
        }
        return file
    }

    /// Checks, without following it, that the entry `name` (if it exists) is a safe regular file:
    /// so that a rename never silently replaces a symlink, a directory or another user's file.
    func checkReplaceable(_ name: String) throws(WormholeError) {
        let status: stat
        do throws(Errno) {
            status = try Syscall.lstatat(descriptor, name)
        } catch .noSuchFileOrDirectory {
            return
        } catch {
            throw ioError(error, "inspect", child(name))
        }
        try Self.checkSafe(status, kind: .regularFile, path: child(name))
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
            try file.writeAll(data)
            if let modified { try file.setModificationTime(nanoseconds: modified) }
            if durability == .synchronized { try file.synchronize() }
            try rename(temporaryName, to: name)
        } catch {
            _ = try? remove(temporaryName)
            throw error
        }
        if durability == .synchronized { try synchronize() }
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

    /// The names in this directory, without `.`, `..` and subdirectories.
    func fileNames() throws(WormholeError) -> [String] {
        do throws(Errno) {
            // readdir needs its own descriptor (closedir closes it); "." is this very directory.
            let copy = try Syscall.openat(descriptor, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            return try Syscall.readDirectory(consuming: copy).filter { entry in
                guard entry.name != ".", entry.name != ".." else { return false }
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

    /// Writes all of `data`, however many short writes that takes.
    func writeAll(_ data: Data) throws(WormholeError) {
        var written = 0
        while written < data.count {
            do throws(Errno) {
                let result = data.withUnsafeBytes { buffer in
                    Result { () throws(Errno) in
                        try Syscall.write(descriptor, from: UnsafeRawBufferPointer(rebasing: buffer[written...]))
                    }
                }
                written += try result.get()
            } catch {
                throw ioError(error, "write", path)
            }
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

    /// Takes an advisory `flock` lock on the file, waiting until it is granted. It is released when
    /// the descriptor is closed (or the process exits, however it exits).
    func lock(exclusive: Bool) throws(WormholeError) {
        do throws(Errno) {
            try Syscall.flock(descriptor, exclusive ? LOCK_EX : LOCK_SH)
        } catch .wouldBlock {
            throw LockWait.timedOut(descriptor, path: path)
        } catch {
            throw ioError(error, exclusive ? "lock (exclusive)" : "lock (shared)", path)
        }
    }

    // MARK: Safety checks

    /// Checks the open file is of `kind`, owned by this user and not writable by group or others.
    func checkSafe(_ kind: EntryKind) throws(WormholeError) {
        let status: stat
        do throws(Errno) {
            status = try Syscall.fstat(descriptor)
        } catch {
            throw ioError(error, "inspect", path)
        }
        try Self.checkSafe(status, kind: kind, path: path)
    }

    static func checkSafe(_ status: stat, kind: EntryKind, path: String) throws(WormholeError) {
        let type = status.st_mode & 0o170000
        if type != kind.typeBits {
            throw WormholeError(
                .unsafePath, value: path,
                "'\(path)' is \(describe(type)), not \(kind); refusing to use it")
        }
        let user = Syscall.effectiveUserID()
        if status.st_uid != user {
            throw WormholeError(
                .unsafePath, value: path,
                "'\(path)' is owned by uid \(status.st_uid), not by this user (uid \(user)); refusing to use it")
        }
        let permissions = status.st_mode & 0o7777
        if permissions & 0o022 != 0 {
            throw WormholeError(
                .unsafePath, value: path,
                "'\(path)' is writable by group or others (mode \(String(permissions, radix: 8))); "
                    + "refusing to use it (fix with: chmod go-w '\(path)')")
        }
    }

    /// The error for an entry that an O_NOFOLLOW open refused: a symlink, or something else.
    private func wrongKind(_ name: String, expected: EntryKind) -> WormholeError {
        let path = child(name)
        if let status = try? Syscall.lstatat(descriptor, name) {
            let type = status.st_mode & 0o170000
            if type == 0o120000 {
                return WormholeError(
                    .unsafePath, value: path,
                    "'\(path)' is a symbolic link; symlinks inside a group container are never followed")
            }
            return WormholeError(.unsafePath, value: path, "'\(path)' is \(Self.describe(type)), not \(expected)")
        }
        return WormholeError(.unsafePath, value: path, "'\(path)' is not \(expected)")
    }

    private static func describe(_ type: mode_t) -> String {
        switch type {
        case 0o040000: "a directory"
        case 0o100000: "a regular file"
        case 0o120000: "a symbolic link"
        case 0o010000: "a FIFO"
        case 0o140000: "a socket"
        case 0o020000: "a character device"
        case 0o060000: "a block device"
        default: "of unknown type \(String(type, radix: 8))"
        }
    }
}

/// The `io` error for a failed call on `path`: "cannot ACTION 'PATH': REASON (errno N)".
func ioError(_ error: Errno, _ action: String, _ path: String) -> WormholeError {
    WormholeError(.io, value: path, "cannot \(action) '\(path)': \(error) (errno \(error.rawValue))")
}

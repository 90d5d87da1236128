// SPDX-License-Identifier: Apache-2.0
// The one place where the package calls the system (the modules above reach it through `package`
// access: the storage layer, the journal, the doorbell, the loop, the inotify hub and the D-Bus
// layer's environment). Each function below is the only call site of its C function; it retries
// `EINTR` where the call may be interrupted and turns the C error convention (`-1` and `errno`)
// into a thrown `Errno`. Callers turn an `Errno` into their own error naming the path
// (`WormholeError` in the storage layer, see `OpenFile`; ``SystemFailure`` here). The journal's
// calls at explicit offsets (`pread`, `pwrite`, `ftruncate`, `lseek`, `fdatasync`) are here too.
// libdbus's own functions are the D-Bus library's, not system calls: WormholeDBus calls them.

internal import CWormholeSystem  // epoll, eventfd, inotify and the doorbell's recvmsg
package import Glibc
package import SystemPackage

package enum Syscall {
    /// Runs `body` until it does not fail with `EINTR`; throws `errno` when it returns `-1`.
    static func retrying<Result: BinaryInteger>(_ body: () -> Result) throws(Errno) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code == EINTR { continue }
            throw Errno(rawValue: code)
        }
    }

    /// Throws `errno` when `result` is `-1`; for calls that must not be retried.
    static func checked(_ result: Int32) throws(Errno) {
        if result == -1 { throw Errno(rawValue: errno) }
    }

    /// The corresponding C function is `open`.
    package static func open(_ path: String, _ flags: Int32, _ mode: UInt32 = 0) throws(Errno) -> Int32 {
        try retrying { Glibc.open(path, flags, mode) }
    }

    /// The corresponding C function is `openat`.
    package static func openat(_ directory: Int32, _ name: String, _ flags: Int32, _ mode: UInt32 = 0)
        throws(Errno) -> Int32
    {
        try retrying { Glibc.openat(directory, name, flags, mode) }
    }

    /// The corresponding C function is `close`. On Linux the descriptor is released even when
    /// `close` fails, so it is never retried and its error is not reported.
    package static func close(_ descriptor: Int32) {
        _ = Glibc.close(descriptor)
    }

    /// The corresponding C function is `mkdir`.
    package static func mkdir(_ path: String, _ mode: UInt32) throws(Errno) {
        try checked(Glibc.mkdir(path, mode))
    }

    /// `mkdir`, where an entry already at `path` is not an error (what it is stays the caller's
    /// to check).
    package static func mkdirUnlessPresent(_ path: String, _ mode: UInt32) throws(Errno) {
        do throws(Errno) { try mkdir(path, mode) } catch .fileExists {}
    }

    /// The corresponding C function is `mkdirat`.
    package static func mkdirat(_ directory: Int32, _ name: String, _ mode: UInt32) throws(Errno) {
        try checked(Glibc.mkdirat(directory, name, mode))
    }

    /// The corresponding C function is `mmap`, with `MAP_SHARED` from offset 0: the first `length`
    /// bytes of the file open at `descriptor`, writable when `writable`.
    package static func mapShared(_ descriptor: Int32, length: Int, writable: Bool) throws(Errno)
        -> UnsafeMutableRawPointer
    {
        let protection = writable ? PROT_READ | PROT_WRITE : PROT_READ
        guard let mapping = Glibc.mmap(nil, length, protection, MAP_SHARED, descriptor, 0), mapping != MAP_FAILED else {
            throw Errno(rawValue: errno)
        }
        return mapping
    }

    /// The corresponding C function is `munmap`; its error (only for an invalid range) is not reported.
    package static func unmap(_ mapping: UnsafeMutableRawPointer, length: Int) {
        _ = Glibc.munmap(mapping, length)
    }

    /// The corresponding C function is `fstat`.
    package static func fstat(_ descriptor: Int32) throws(Errno) -> stat {
        var status = stat()
        try checked(Glibc.fstat(descriptor, &status))
        return status
    }

    /// The corresponding C function is `fstatat`, with `AT_SYMLINK_NOFOLLOW`: a symlink is described,
    /// not followed.
    package static func lstatat(_ directory: Int32, _ name: String) throws(Errno) -> stat {
        var status = stat()
        try checked(Glibc.fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW))
        return status
    }

    /// The corresponding C function is `fchmod`.
    package static func fchmod(_ descriptor: Int32, _ mode: UInt32) throws(Errno) {
        _ = try retrying { Glibc.fchmod(descriptor, mode) }
    }

    /// The corresponding C function is `futimens`: sets both times to `nanoseconds` since 1970.
    package static func futimens(_ descriptor: Int32, nanoseconds: UInt64) throws(Errno) {
        let time = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        let times = [time, time]
        try checked(Glibc.futimens(descriptor, times))
    }

    /// The corresponding C function is `stat`: a symlink is followed.
    package static func followingStat(_ path: String) throws(Errno) -> stat {
        var status = stat()
        try checked(Glibc.stat(_:_:)(path, &status))
        return status
    }

    /// The corresponding C function is `lstat`: a symlink is described, not followed.
    package static func lstat(_ path: String) throws(Errno) -> stat {
        var status = stat()
        try checked(Glibc.lstat(path, &status))
        return status
    }

    /// Gives the CPU to another runnable thread, if any. The corresponding C function is
    /// `sched_yield`.
    package static func yieldProcessor() { _ = Glibc.sched_yield() }

    /// The corresponding C function is `renameat`.
    package static func renameat(_ directory: Int32, _ from: String, _ to: String) throws(Errno) {
        try checked(Glibc.renameat(directory, from, directory, to))
    }

    /// The corresponding C function is `unlinkat`: removes the file `name`, or with
    /// `removingDirectory` (`AT_REMOVEDIR`) the empty directory `name`.
    package static func unlinkat(_ directory: Int32, _ name: String, removingDirectory: Bool = false) throws(Errno) {
        try checked(Glibc.unlinkat(directory, name, removingDirectory ? AT_REMOVEDIR : 0))
    }

    /// The corresponding C function is `unlink`.
    package static func unlink(_ path: String) throws(Errno) {
        try checked(Glibc.unlink(path))
    }

    /// The corresponding C function is `rmdir` (`ENOTEMPTY` when the directory is not empty).
    package static func rmdir(_ path: String) throws(Errno) {
        try checked(Glibc.rmdir(path))
    }

    /// The corresponding C function is `dup`, with `F_DUPFD_CLOEXEC` (`fcntl`): a second
    /// descriptor of the same open file description, not inherited by child processes.
    package static func duplicate(_ descriptor: Int32) throws(Errno) -> Int32 {
        try retrying { Glibc.fcntl(descriptor, F_DUPFD_CLOEXEC, 0) }
    }

    /// The corresponding C function is `read`. Returns the number of bytes read; 0 at end of file.
    package static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try retrying { Glibc.read(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// The corresponding C function is `write`. Returns the number of bytes written, which may be
    /// fewer than asked.
    package static func write(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try retrying { Glibc.write(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// The corresponding C function is `pread`. Returns the number of bytes read; 0 at end of file.
    package static func pread(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int)
        throws(Errno)
        -> Int
    {
        try retrying { Glibc.pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// The corresponding C function is `pwrite`. Returns the number of bytes written, which may be
    /// fewer than asked.
    package static func pwrite(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int) throws(Errno)
        -> Int
    {
        try retrying { Glibc.pwrite(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// The corresponding C function is `ftruncate`.
    package static func ftruncate(_ descriptor: Int32, _ length: Int) throws(Errno) {
        _ = try retrying { Glibc.ftruncate(descriptor, off_t(length)) }
    }

    /// The corresponding C function is `lseek(descriptor, 0, SEEK_END)`: the file's size. Not
    /// `fstat`: on kernels with multigrain timestamps (Linux 6.13 and later) a `stat` of a file
    /// makes its next change take a fine-grained time, which costs the journal's appender a
    /// journalled inode update; the journal's files are only ever read and written at explicit
    /// offsets, so moving the file position changes nothing.
    package static func endOffset(_ descriptor: Int32) throws(Errno) -> Int {
        Int(try retrying { Glibc.lseek(descriptor, 0, SEEK_END) })
    }

    /// The corresponding C function is `fdatasync`.
    package static func fdatasync(_ descriptor: Int32) throws(Errno) {
        _ = try retrying { Glibc.fdatasync(descriptor) }
    }

    /// The corresponding C function is `fsync`.
    package static func fsync(_ descriptor: Int32) throws(Errno) {
        _ = try retrying { Glibc.fsync(descriptor) }
    }

    /// The corresponding C function is `flock` with `LOCK_UN`: releases the lock held on the file
    /// open at `descriptor`. (A lock is taken without waiting with ``tryFlock(_:_:)``; the bounded
    /// wait for one is the storage layer's `LockWait`.)
    package static func unlock(_ descriptor: Int32) throws(Errno) {
        // Inside this type, `flock` alone names the C struct; `flock(_:_:)` names the function.
        _ = try retrying { Glibc.flock(_:_:)(descriptor, LOCK_UN) }
    }

    /// The corresponding C function is `nanosleep`: sleeps `nanoseconds`, resuming after a
    /// signal. For the two timed waits nothing else can wake: the bounded lock wait
    /// (``LockWait``) and the CLI's backoff toward a bus that accepts and never answers.
    package static func pause(nanoseconds: Int) {
        var request = timespec(tv_sec: nanoseconds / 1_000_000_000, tv_nsec: nanoseconds % 1_000_000_000)
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }

    /// The corresponding C function is `flock` with `LOCK_NB`: returns false, without waiting, when
    /// another open file description holds a conflicting lock.
    package static func tryFlock(_ descriptor: Int32, _ operation: Int32) throws(Errno) -> Bool {
        while true {
            if Glibc.flock(_:_:)(descriptor, operation | LOCK_NB) == 0 { return true }
            let code = errno
            if code == EINTR { continue }
            if code == EWOULDBLOCK { return false }
            throw Errno(rawValue: code)
        }
    }

    /// The corresponding C function is `clock_gettime(CLOCK_REALTIME)`: nanoseconds since 1970, the
    /// clock file times are set from.
    package static func realTimeNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    /// The corresponding C function is `clock_gettime(CLOCK_REALTIME_COARSE)`: nanoseconds since
    /// 1970 on the clock the file system stamps file times with (its last tick, not now).
    package static func coarseRealTimeNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    /// The corresponding C functions are `fdopendir`, `readdir` and `closedir`: the names in the
    /// directory open at `descriptor`, which this call takes ownership of and closes, each with
    /// whether it is a directory (nil when the file system does not say).
    package static func readDirectory(consuming descriptor: Int32) throws(Errno) -> [(name: String, isDirectory: Bool?)]
    {
        guard let stream = Glibc.fdopendir(descriptor) else {
            let code = errno
            Glibc.close(descriptor)
            throw Errno(rawValue: code)
        }
        defer { Glibc.closedir(stream) }
        var entries: [(name: String, isDirectory: Bool?)] = []
        while true {
            errno = 0
            guard let entry = Glibc.readdir(stream) else {
                if errno != 0 { throw Errno(rawValue: errno) }
                return entries
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) {
                    String(cString: $0)
                }
            }
            let type = entry.pointee.d_type
            entries.append((name, type == UInt8(DT_UNKNOWN) ? nil : type == UInt8(DT_DIR)))
        }
    }

    /// The corresponding C function is `geteuid`, called once per process: every safety check of
    /// every file operation asks for it, and the library never changes it.
    package static func effectiveUserID() -> Glibc.uid_t { effectiveUser }

    private static let effectiveUser = Glibc.geteuid()

    /// The corresponding C function is `getpid`.
    package static func processID() -> Glibc.pid_t {
        Glibc.getpid()
    }

    /// The corresponding C function is `getenv`: the variable's value; nil when it is not set.
    package static func environment(_ name: String) -> String? {
        Glibc.getenv(name).map { String(cString: $0) }
    }

    /// The corresponding C functions are `getpwnam` and `getpwuid(getuid())`: the home directory
    /// the password database gives `user` (nil: this process's user); nil when it has none.
    package static func homeDirectory(ofUser user: String? = nil) -> String? {
        let entry = user.map { Glibc.getpwnam($0) } ?? Glibc.getpwuid(Glibc.getuid())
        return entry.flatMap { $0.pointee.pw_dir.map { String(cString: $0) } }
    }

    // MARK: The process's machinery (the loop, the inotify instance, the doorbell's socket)

    /// The corresponding C function is `clock_gettime(CLOCK_MONOTONIC)`: nanoseconds on the clock
    /// the loop's deadlines and the diagnostic timeline are kept on.
    package static func monotonicNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    /// The corresponding C function is `epoll_create1(EPOLL_CLOEXEC)`.
    static func epollCreate() throws(Errno) -> Int32 {
        let descriptor = epoll_create1(Int32(EPOLL_CLOEXEC))
        try checked(descriptor)
        return descriptor
    }

    /// The corresponding C function is `epoll_ctl`: adds, changes (`EPOLL_CTL_MOD`) or removes
    /// `descriptor` in the epoll instance, for `events` (`EPOLLIN`, `EPOLLOUT`), with the
    /// descriptor as the event's data.
    static func epollControl(_ epoll: Int32, _ operation: Int32, _ descriptor: Int32, events: UInt32) throws(Errno) {
        var event = epoll_event()
        event.events = events
        event.data.fd = descriptor
        try checked(epoll_ctl(epoll, operation, descriptor, &event))
    }

    /// The corresponding C function is `epoll_wait`: how many of `events` were filled, waiting at
    /// most `timeout` milliseconds (-1: until an event). Not retried: `EINTR` is thrown, and the
    /// loop goes round.
    static func epollWait(_ epoll: Int32, _ events: inout [epoll_event], timeout: Int32) throws(Errno) -> Int {
        let count = epoll_wait(epoll, &events, Int32(events.count), timeout)
        try checked(count)
        return Int(count)
    }

    /// The corresponding C function is `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`.
    static func eventCounter() throws(Errno) -> Int32 {
        let descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        try checked(descriptor)
        return descriptor
    }

    /// The corresponding C function is `inotify_init1(IN_CLOEXEC | IN_NONBLOCK)`.
    static func inotifyInit() throws(Errno) -> Int32 {
        let descriptor = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        try checked(descriptor)
        return descriptor
    }

    /// The corresponding C function is `inotify_add_watch`: the watch descriptor.
    static func inotifyAddWatch(_ instance: Int32, _ path: String, _ mask: UInt32) throws(Errno) -> Int32 {
        let watch = inotify_add_watch(instance, path, mask)
        try checked(watch)
        return watch
    }

    /// The corresponding C function is `inotify_rm_watch`; its error (the watch is gone already)
    /// is not reported.
    static func inotifyRemoveWatch(_ instance: Int32, _ watch: Int32) {
        _ = inotify_rm_watch(instance, watch)
    }

    /// The corresponding C function is `chmod`.
    static func chmod(_ path: String, _ mode: mode_t) throws(Errno) {
        try checked(Glibc.chmod(path, mode))
    }
}

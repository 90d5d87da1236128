// The C calls only the journal makes. Like Storage/Syscalls.swift, each function below is the
// only call site of its C function in the module; it retries `EINTR` and turns `-1` and
// `errno` into a thrown `Errno`.

import Glibc
import SystemPackage

extension Syscall {
    private static func retryingJournal<Result: BinaryInteger>(_ body: () -> Result) throws(Errno) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code == EINTR { continue }
            throw Errno(rawValue: code)
        }
    }

    /// The corresponding C function is `pread`. Returns the number of bytes read; 0 at end of file.
    static func pread(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try retryingJournal { Glibc.pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// The corresponding C function is `pwrite`. Returns the number of bytes written, which may be
    /// fewer than asked.
    static func pwrite(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try retryingJournal { Glibc.pwrite(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// The corresponding C function is `ftruncate`.
    static func ftruncate(_ descriptor: Int32, _ length: Int) throws(Errno) {
        _ = try retryingJournal { Glibc.ftruncate(descriptor, off_t(length)) }
    }

    /// The corresponding C function is `lseek(descriptor, 0, SEEK_END)`: the file's size. Not
    /// `fstat`: on kernels with multigrain timestamps (Linux 6.13 and later) a `stat` of a file
    /// makes its next change take a fine-grained time, which costs the appender a journalled
    /// inode update; the journal's files are only ever read and written at explicit offsets, so
    /// moving the file position changes nothing.
    static func endOffset(_ descriptor: Int32) throws(Errno) -> Int {
        Int(try retryingJournal { Glibc.lseek(descriptor, 0, SEEK_END) })
    }

    /// The corresponding C function is `fdatasync`.
    static func fdatasync(_ descriptor: Int32) throws(Errno) {
        _ = try retryingJournal { Glibc.fdatasync(descriptor) }
    }

    /// The corresponding C function is `flock` with `LOCK_UN`.
    static func unlock(_ descriptor: Int32) throws(Errno) {
        _ = try retryingJournal { Glibc.flock(_:_:)(descriptor, LOCK_UN) }
    }

    /// The corresponding C function is `flock` with `LOCK_EX | LOCK_NB`: false when another open
    /// file description holds the lock.
    static func tryLockExclusive(_ descriptor: Int32) throws(Errno) -> Bool {
        do throws(Errno) {
            _ = try retryingJournal { Glibc.flock(_:_:)(descriptor, LOCK_EX | LOCK_NB) }
            return true
        } catch .wouldBlock {
            return false
        }
    }

    /// The corresponding C function is `clock_gettime(CLOCK_REALTIME)`: nanoseconds since 1970.
    static func realtimeNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Glibc
import Synchronization

/// Writes the lines of `observe` and `listen` to a file descriptor: each line is built in one
/// buffer that is allocated once and reused, then written with one `write(2)` (repeated only
/// for a partial write or `EINTR`), so a line costs no encoder, no `Data` and no `FileHandle`.
///
/// Several subscriptions may write at once (listeners of several identifiers), hence the lock;
/// it is never contended on the I/O thread alone. A reader that went away (`EPIPE`) ends the
/// process quietly with status 0, as other command-line tools do.
final class LineWriter: Sendable {
    private let fd: Int32
    private let buffer: Mutex<[UInt8]>

    init(fd: Int32 = STDOUT_FILENO, capacity: Int = 64 * 1024) {
        self.fd = fd
        var bytes: [UInt8] = []
        bytes.reserveCapacity(capacity)
        buffer = Mutex(bytes)
        // A closed pipe must be an EPIPE that we handle, not a signal that kills us.
        signal(SIGPIPE, SIG_IGN)
    }

    /// Builds one line with `build` (which appends to the buffer, without the newline) and
    /// writes it.
    func writeLine(_ build: (inout JSONLine) -> Void) {
        buffer.withLock { bytes in
            bytes.removeAll(keepingCapacity: true)
            var line = JSONLine(bytes: bytes)
            bytes = []
            build(&line)
            line.bytes.append(UInt8(ascii: "\n"))
            Self.writeAll(fd, line.bytes)
            bytes = line.bytes
        }
    }

    /// Writes all of `bytes` to `fd` (again after a partial write or `EINTR`); `EPIPE` ends the
    /// process with status 0, another failure on standard output with status 1.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written >= 0 {
                    offset += written
                    continue
                }
                switch errno {
                case EINTR: continue
                case EPIPE: exit(0)
                // Standard error itself failed: there is nowhere left to say so.
                case _ where fd == STDERR_FILENO: return
                default:
                    writeError("wormhole: cannot write to standard output: \(String(cString: strerror(errno)))")
                    exit(1)
                }
            }
        }
    }
}

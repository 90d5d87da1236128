// SPDX-License-Identifier: Apache-2.0
import Glibc

/// Reads lines from a pipe: blocks in `read(2)`, with `poll(2)` only as a safety limit so a
/// lost line fails the run instead of hanging it. Owns (and closes) the descriptor.
final class LineReader {
    let fd: Int32
    private let owner: String
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0

    init(fd: Int32, owner: String) {
        self.fd = fd
        self.owner = owner
        buffer = [UInt8](repeating: 0, count: 1 << 16)
    }

    deinit { close(fd) }

    /// The next line without its newline, or `nil` at end of file.
    ///
    /// The slice is valid until the next call.
    func readLine(timeoutSeconds: Int) throws -> ArraySlice<UInt8>? {
        while true {
            if let newline = buffer[start..<end].firstIndex(of: UInt8(ascii: "\n")) {
                let line = buffer[start..<newline]
                start = newline + 1
                return line
            }
            if start > 0 {
                // Move the partial line to the front; grow when a line fills the buffer.
                buffer.withUnsafeMutableBufferPointer { pointer in
                    _ = memmove(pointer.baseAddress!, pointer.baseAddress! + start, end - start)
                }
                end -= start
                start = 0
            }
            if end == buffer.count { buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count)) }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(timeoutSeconds, 86_400) * 1000))
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { throw BenchFailure("\(owner) wrote no line within \(timeoutSeconds) s") }
            let count = buffer.withUnsafeMutableBufferPointer { pointer in
                read(fd, pointer.baseAddress! + end, pointer.count - end)
            }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                if end > start {
                    let line = buffer[start..<end]
                    start = end
                    return line
                }
                return nil
            }
            end += count
        }
    }
}

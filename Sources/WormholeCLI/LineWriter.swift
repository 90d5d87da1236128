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

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
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
                default:
                    writeError("wormhole: cannot write to standard output: \(String(cString: strerror(errno)))")
                    exit(1)
                }
            }
        }
    }
}

/// A JSON line under construction: raw bytes, JSON strings and numbers appended without
/// making `String`s.
struct JSONLine {
    var bytes: [UInt8]

    /// Appends ASCII text as it is (the fixed parts of a line: `{"name":`).
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends `text` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\t`,
    /// … or `\u00XX`; everything else, `/` and non-ASCII UTF-8 included, as it is (RFC 8259 §7).
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case 0x0A: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "f"))
            case 0..<0x20:
                let hex: StaticString = "0123456789abcdef"
                raw("\\u00")
                hex.withUTF8Buffer { digits in
                    bytes.append(digits[Int(byte >> 4)])
                    bytes.append(digits[Int(byte & 0xF)])
                }
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends `value` in decimal.
    mutating func number(_ value: UInt64) {
        if value == 0 {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        let start = bytes.count
        var rest = value
        while rest > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        bytes[start...].reverse()
    }
}

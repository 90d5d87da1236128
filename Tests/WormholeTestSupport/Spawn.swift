// SPDX-License-Identifier: Apache-2.0
import Foundation
public import Glibc

/// Starts and reaps child processes with `posix_spawn`, for every process the tests start.
///
/// Not Foundation's `Process`: on Linux its `run()` reads `/proc/self/fd` with a buffer
/// over-read of `dirent.d_name` (swift-corelibs-foundation PR #5472) and crashed the test
/// process about one run in five, with or without a lock around it.
///
/// Every child gets the default action for every signal and an empty signal mask (the test
/// process may block or ignore some), and only its fds 0, 1 and 2: everything else is
/// closed in the child, as `Process` did.
public enum Spawn {
    /// `pipe2` and `posix_spawn_file_actions_addclosefrom_np` are in glibc (2.34 for the
    /// latter) but not in Swift's Glibc module; looked up once by name.
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    nonisolated(unsafe) private static let libc = dlopen(nil, RTLD_NOW)
    private static let pipe2: Pipe2? = dlsym(libc, "pipe2").map { unsafeBitCast($0, to: Pipe2.self) }
    private static let closeFrom: CloseFrom? = dlsym(libc, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: CloseFrom.self) }

    /// Ignores SIGPIPE in the test process (once): a child that exits before reading its input
    /// must fail its test, not kill the test runner. Children get SIGPIPE's default back.
    private static let ignoringSIGPIPE: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// A pipe whose both ends are close-on-exec from the start, so no other child inherits them.
    public static func pipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard let pipe2 else { throw TestFailure("pipe2 is not in this C library") }
        guard pipe2(&ends, O_CLOEXEC) == 0 else { throw TestFailure("pipe2 failed: errno \(errno)") }
        return (ends[0], ends[1])
    }

    /// Starts `executable` (a path; no `PATH` search) with `arguments` and exactly `environment`.
    /// `standardInput`, `standardOutput`, `standardError` become the child's fds 0, 1, 2
    /// (`nil`: `/dev/null`); the caller still owns them and closes its copies after this returns.
    /// Returns the child's pid; the caller must reap it (``wait(_:)``).
    public static func start(
        _ executable: String, _ arguments: [String], environment: [String: String],
        standardInput: Int32? = nil, standardOutput: Int32? = nil, standardError: Int32? = nil
    ) throws -> pid_t {
        _ = ignoringSIGPIPE
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, source) in [standardInput, standardOutput, standardError].enumerated() {
            if let source {
                posix_spawn_file_actions_adddup2(&actions, source, Int32(target))
            } else {
                posix_spawn_file_actions_addopen(
                    &actions, Int32(target), "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            }
        }
        if let closeFrom { _ = closeFrom(&actions, 3) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw TestFailure("cannot start \(executable): \(String(cString: strerror(result)))") }
        return pid
    }

    /// Blocks until the child `pid` exits and reaps it; its raw wait status, `nil` when it is
    /// not (or no longer) this process's child.
    @discardableResult
    public static func wait(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            if errno != EINTR { return nil }
        }
        return status
    }

    /// A raw wait status as `Process.terminationStatus` gave it: the exit code, or the number
    /// of the signal that killed the child.
    public static func exitCode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// Writes all of `bytes` to `fd`, retrying interrupted and partial writes; `false` when the
    /// reader is gone.
    @discardableResult
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return false }
            offset += count
        }
        return true
    }
}

// SPDX-License-Identifier: Apache-2.0
import Glibc

/// Runs a program to completion and reads its standard output, with `posix_spawn`: Foundation's
/// `Process.run()` on Linux over-reads `dirent.d_name` while it lists `/proc/self/fd`
/// (swift-corelibs-foundation PR #5472) and can crash the caller.
enum ProgramOutput {
    /// `pipe2` is in glibc but not in Swift's Glibc module: looked up once by name.
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private static let pipe2: Pipe2? = dlsym(dlopen(nil, RTLD_NOW), "pipe2").map { unsafeBitCast($0, to: Pipe2.self) }

    /// Everything `executable` (a path) writes to standard output when run with `arguments`,
    /// standard input and standard error on `/dev/null`, whatever its exit status; `nil` when
    /// it cannot be started.
    static func standardOutput(of executable: String, _ arguments: [String]) -> String? {
        var ends: [Int32] = [-1, -1]
        guard let pipe2, pipe2(&ends, O_CLOEXEC) == 0 else { return nil }
        defer { close(ends[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Default actions for every signal and none blocked, whatever this process does.
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
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let started = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        close(ends[1])
        guard started == 0 else { return nil }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(ends[0], &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return String(decoding: bytes, as: UTF8.self)
    }
}

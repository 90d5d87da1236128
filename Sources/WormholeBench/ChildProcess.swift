// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import WormholeDBus

/// A child process started with `posix_spawn`, its standard output and standard error on pipes.
///
/// Waiting is blocking (`waitpid`, `read` on the pipes), never polling; reads have a timeout
/// only as a safety limit. The child is killed and reaped when the value is released, so a
/// thrown error cannot leave one behind, and ``ChildReaper`` kills it when the bench is
/// interrupted.
final class ChildProcess {
    let pid: pid_t
    let name: String
    /// Lines the child writes to standard output.
    let output: LineReader
    private let errors: LineReader
    private var status: Int32?

    /// Starts `executable` with `arguments`, with `environment` added to this process's (a
    /// value of `""` removes the variable), and `standardInput` (default `/dev/null`) as fd 0.
    init(executable: String, arguments: [String], environment: [String: String] = [:], standardInput: Int32? = nil)
        throws
    {
        name = String(executable.split(separator: "/").last ?? Substring(executable))
        var outputPipe: [Int32] = [0, 0]
        var errorPipe: [Int32] = [0, 0]
        // Close-on-exec, so no other child inherits these ends (and holds a pipe open). The
        // bench starts children from one thread, so no spawn can slip between pipe and fcntl.
        guard pipe(&outputPipe) == 0 else { throw BenchFailure("pipe failed: errno \(errno)") }
        guard pipe(&errorPipe) == 0 else {
            close(outputPipe[0])
            close(outputPipe[1])
            throw BenchFailure("pipe failed: errno \(errno)")
        }
        for fd in outputPipe + errorPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer {
            close(outputPipe[1])
            close(errorPipe[1])
        }
        output = LineReader(fd: outputPipe[0], owner: name)
        errors = LineReader(fd: errorPipe[0], owner: name)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardInput {
            posix_spawn_file_actions_adddup2(&actions, standardInput, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        // The bench catches these signals to clean up (dispatch blocks them and reads a
        // signalfd); the child gets the default actions back and nothing blocked, or it would
        // ignore the SIGTERM that stops it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in ChildReaper.signals + [SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var environmentLines = ProcessInfo.processInfo.environment
        for (key, value) in environment { environmentLines[key] = value.isEmpty ? nil : value }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environmentLines.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        pid = try ChildReaper.spawn {
            var child: pid_t = 0
            let result = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
            guard result == 0 else {
                throw BenchFailure("cannot start \(executable): \(String(cString: strerror(result)))")
            }
            return child
        }
    }

    deinit {
        terminate(signal: SIGKILL)
    }

    /// Blocks until the child writes the line `ready` to standard error.
    func waitForReady(timeoutSeconds: Int = 300) throws {
        var last = ""
        while let line = try errors.readLine(timeoutSeconds: timeoutSeconds) {
            let text = String(decoding: line, as: UTF8.self)
            if text == "ready" { return }
            last = text
        }
        throw BenchFailure("\(name) exited before it was ready: \(last)")
    }

    /// Everything the child writes to standard output until it closes it.
    func readAllOutput(timeoutSeconds: Int = 600) throws -> [String] {
        var lines: [String] = []
        while let line = try output.readLine(timeoutSeconds: timeoutSeconds) {
            lines.append(String(decoding: line, as: UTF8.self))
        }
        return lines
    }

    /// Waits for the child to exit; its exit status (128 + N when killed by signal N).
    @discardableResult
    func waitForExit() -> Int32 {
        if let status { return status }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        ChildReaper.unregister(pid)
        let exited = raw & 0x7f == 0
        let status = exited ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
        self.status = status
        return status
    }

    /// Sends `signal` (unless the child was already reaped) and waits for it to exit.
    func terminate(signal: Int32 = SIGTERM) {
        if status == nil {
            kill(pid, signal)
            waitForExit()
        }
    }
}

extension ChildProcess {
    /// The other side of a ping-pong session: this binary's hidden `command` with `arguments`
    /// and the session's group, container root and bus, started and ready.
    static func echo(
        _ command: String, _ arguments: [String], group: String, root: String, address: BusAddress
    ) throws -> ChildProcess {
        let child = try ChildProcess(
            executable: Executables.current,
            arguments: [command] + arguments + ["--group", group, "--root", root, "--bus-address", address.rawValue])
        try child.waitForReady()
        return child
    }
}

public import Foundation
import Glibc
import WormholeDBus
import WormholeSystem

/// The directory that holds the package's built products (next to the test bundle).
public let productsDirectory: URL = {
    var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    while url.path != "/" {
        url = url.deletingLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("wormhole-test-peer").path) {
            return url
        }
    }
    return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
}()

/// Where the tests take the executables they start (docs/testing.md, *Which executables*):
/// `WORMHOLE_TEST_PRODUCTS`, a directory of built products (a release build:
/// `.build/release`), instead of the test bundle's own; and `WORMHOLE_TEST_CLI`, the path of
/// another implementation's command line to run wherever a test runs `wormholectl` (the Python
/// package's `wormhole-py`, for the tests of contract section 4).
public enum TestProducts {
    /// The directory the executables come from.
    public static let directory: URL = {
        if let chosen = ProcessInfo.processInfo.environment["WORMHOLE_TEST_PRODUCTS"], !chosen.isEmpty {
            return URL(fileURLWithPath: chosen)
        }
        return productsDirectory
    }()

    /// The command line run as `wormholectl`, when another implementation's is chosen.
    public static let commandLine: String? = {
        guard let chosen = ProcessInfo.processInfo.environment["WORMHOLE_TEST_CLI"], !chosen.isEmpty else { return nil }
        return chosen
    }()

    /// Whether the executables are the test bundle's own build (the debug build `swift test` made).
    public static var areOwnBuild: Bool { directory.path == productsDirectory.path && commandLine == nil }
}

/// The path of a built executable product, such as `wormholectl` or `wormhole-test-peer`, from
/// ``TestProducts``.
public func productPath(_ name: String) throws -> String {
    if name == "wormholectl", let commandLine = TestProducts.commandLine {
        guard FileManager.default.isExecutableFile(atPath: commandLine) else {
            throw TestFailure("WORMHOLE_TEST_CLI names \(commandLine), which is not an executable file")
        }
        return commandLine
    }
    let path = TestProducts.directory.appendingPathComponent(name).path
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw TestFailure(
            "product \(name) is not built at \(path); run `swift build` first (or `swift build -c release` for WORMHOLE_TEST_PRODUCTS=\(TestProducts.directory.path))"
        )
    }
    return path
}

/// What a finished process printed and how it ended.
public struct ProcessOutput: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs a command to completion, feeding `input` on standard input.
@discardableResult
public func run(
    _ executable: String, _ arguments: [String], input: String? = nil, environment: [String: String]? = nil
) throws -> ProcessOutput {
    let child = try ChildProcess(executable, arguments, environment: environment)
    if let input { child.write(input) }
    child.closeInput()
    return child.wait()
}

/// A running child process with line-by-line access to its output.
///
/// Each output pipe is read by a thread that blocks in `read(2)`; lines arrive in an
/// `AsyncStream`, so a test waits for a line (such as `ready`) as an event. Started with
/// ``Spawn`` (never Foundation's `Process`); reaped by ``wait()``, or killed and reaped when
/// released, so no child outlives its test as a zombie or an orphan.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: `pid`, `name` and the streams are set once in init; the rest is Mutex-protected.
    public let pid: pid_t
    /// The executable's file name.
    public let name: String
    public let stdoutLines: AsyncStream<String>
    public let stderrLines: AsyncStream<String>
    /// The write end of the child's standard input; -1 once closed.
    private let input: Locked<Int32>
    private let collected = Locked<(out: String, err: String)>(("", ""))
    private let readers = DispatchGroup()
    /// The child's raw wait status once reaped; `waiting` serialises the `waitpid`.
    private let reaped = Locked<Int32?>(nil)
    private let waiting = NSLock()

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        name = URL(fileURLWithPath: executable).lastPathComponent
        var env = ProcessInfo.processInfo.environment
        // Never let a child find the user's own session bus by accident.
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/wormhole-tests-use-explicit-buses"
        for (key, value) in environment ?? [:] { env[key] = value }
        let inputPipe = try Spawn.pipe()
        var opened = [inputPipe.read, inputPipe.write]
        defer { for fd in opened { close(fd) } }
        let outputPipe = try Spawn.pipe()
        opened += [outputPipe.read, outputPipe.write]
        let errorPipe = try Spawn.pipe()
        opened += [errorPipe.read, errorPipe.write]
        pid = try Spawn.start(
            executable, arguments, environment: env,
            standardInput: inputPipe.read, standardOutput: outputPipe.write, standardError: errorPipe.write)
        // The child has its ends; this process keeps the other three.
        opened = [inputPipe.read, outputPipe.write, errorPipe.write]
        input = Locked(inputPipe.write)
        let (out, outContinuation) = AsyncStream<String>.makeStream()
        let (err, errContinuation) = AsyncStream<String>.makeStream()
        stdoutLines = out
        stderrLines = err
        startReader(outputPipe.read, outContinuation, isError: false)
        startReader(errorPipe.read, errContinuation, isError: true)
    }

    private func startReader(_ fd: Int32, _ continuation: AsyncStream<String>.Continuation, isError: Bool) {
        readers.enter()
        // The thread holds what it writes to, never `self`: it runs until the child closes the
        // pipe, so holding `self` would keep `deinit` (which kills the child) from ever running.
        let (collected, readers) = (collected, readers)
        let thread = Thread {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = Glibc.read(fd, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                let chunk = buffer[0..<count]
                collected.withLock {
                    let text = String(decoding: chunk, as: UTF8.self)
                    if isError { $0.err += text } else { $0.out += text }
                }
                pending.append(contentsOf: chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    continuation.yield(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
            }
            close(fd)
            if !pending.isEmpty { continuation.yield(String(decoding: pending, as: UTF8.self)) }
            continuation.finish()
            readers.leave()
        }
        thread.start()
    }

    /// Writes text to the child's standard input (nothing once it is closed or the child has
    /// stopped reading).
    public func write(_ text: String) {
        input.withLock { fd in
            if fd >= 0 { Spawn.writeAll(fd, Array(text.utf8)) }
        }
    }

    /// Closes the child's standard input.
    public func closeInput() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// Sends a signal to the child (unless it was already reaped).
    public func signal(_ signal: Int32) {
        if reaped.withLock({ $0 }) == nil { Glibc.kill(pid, signal) }
    }

    /// Waits for the child to exit (and reaps it) and for its output to be read to the end.
    /// The status is the exit code, or the number of the signal that killed the child.
    public func wait() -> ProcessOutput {
        let status = reap()
        readers.wait()
        let (out, err) = collected.withLock { ($0.out, $0.err) }
        return ProcessOutput(status: Spawn.exitCode(status), stdout: out, stderr: err)
    }

    private func reap() -> Int32 {
        waiting.withLock {
            if let status = reaped.withLock({ $0 }) { return status }
            let status = Spawn.wait(pid) ?? -1
            reaped.withLock { $0 = status }
            return status
        }
    }

    /// The output so far.
    public var outputSoFar: (stdout: String, stderr: String) { collected.withLock { ($0.out, $0.err) } }

    deinit {
        closeInput()
        if reaped.withLock({ $0 }) == nil {
            Glibc.kill(pid, SIGKILL)
            _ = reap()
        }
    }
}

extension AsyncStream where Element == String {
    /// Waits for the first line that satisfies `predicate`; `nil` when the stream ends first.
    public func firstLine(where predicate: (String) -> Bool) async -> String? {
        for await line in self where predicate(line) { return line }
        return nil
    }
}

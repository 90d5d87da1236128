public import Foundation
import Glibc
import Synchronization
import WormholeDBus

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

/// The path of a built executable product, such as `wormhole` or `wormhole-test-peer`.
public func productPath(_ name: String) throws -> String {
    let path = productsDirectory.appendingPathComponent(name).path
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw TestFailure("product \(name) is not built at \(path); run `swift build` first")
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

/// Serialises `Process.run()` across the test process: Foundation's `Process.run` was seen to
/// crash (a bad memcpy inside it) when many tests spawned children at once on a loaded machine.
public let processSpawnLock = NSLock()

/// A running child process with line-by-line access to its output.
///
/// Each output pipe is read by a thread that blocks in `read(2)`; lines arrive in an
/// `AsyncStream`, so a test waits for a line (such as `ready`) as an event.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: `process` and the pipes are set once in init; the collectors are Mutex-protected.
    public let process: Process
    private let input = Pipe()
    private let outputPipe = Pipe()
    private let errorPipe = Pipe()
    public let stdoutLines: AsyncStream<String>
    public let stderrLines: AsyncStream<String>
    private let collected = Locked<(out: String, err: String)>(("", ""))
    private let readers = DispatchGroup()

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        // Never let a child find the user's own session bus by accident.
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/wormhole-tests-use-explicit-buses"
        for (key, value) in environment ?? [:] { env[key] = value }
        process.environment = env
        process.standardInput = input
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        let (out, outContinuation) = AsyncStream<String>.makeStream()
        let (err, errContinuation) = AsyncStream<String>.makeStream()
        stdoutLines = out
        stderrLines = err
        try processSpawnLock.withLock { try process.run() }
        startReader(outputPipe.fileHandleForReading.fileDescriptor, outContinuation, isError: false)
        startReader(errorPipe.fileHandleForReading.fileDescriptor, errContinuation, isError: true)
    }

    private func startReader(_ fd: Int32, _ continuation: AsyncStream<String>.Continuation, isError: Bool) {
        readers.enter()
        let thread = Thread { [self] in
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = Glibc.read(fd, &buffer, buffer.count)
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
            if !pending.isEmpty { continuation.yield(String(decoding: pending, as: UTF8.self)) }
            continuation.finish()
            readers.leave()
        }
        thread.start()
    }

    /// Writes text to the child's standard input.
    public func write(_ text: String) {
        input.fileHandleForWriting.write(Data(text.utf8))
    }

    /// Closes the child's standard input.
    public func closeInput() {
        try? input.fileHandleForWriting.close()
    }

    /// Sends a signal to the child.
    public func signal(_ signal: Int32) {
        Glibc.kill(process.processIdentifier, signal)
    }

    /// Waits for the child to exit and its output to be read to the end.
    public func wait() -> ProcessOutput {
        process.waitUntilExit()
        readers.wait()
        let (out, err) = collected.withLock { ($0.out, $0.err) }
        return ProcessOutput(status: process.terminationStatus, stdout: out, stderr: err)
    }

    /// The output so far.
    public var outputSoFar: (stdout: String, stderr: String) { collected.withLock { ($0.out, $0.err) } }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }
}

extension AsyncStream where Element == String {
    /// Waits for the first line that satisfies `predicate`; `nil` when the stream ends first.
    public func firstLine(where predicate: (String) -> Bool) async -> String? {
        for await line in self where predicate(line) { return line }
        return nil
    }
}

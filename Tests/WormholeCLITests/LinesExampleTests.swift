// SPDX-License-Identifier: Apache-2.0
// Scenario 1 across processes: LineGrabber's native-messaging host (Examples/LineGrabber),
// spoken to as a browser does (a 4-byte native-endian length, then UTF-8 JSON; standard input
// closed at the end), and Lines (Examples/Lines) showing what it stores, live and at start.

import Dispatch
import Foundation
import Glibc
import Testing
import WormholeDBus
import WormholeSystem
import WormholeTestSupport

private final class LinesWorld: Sendable {
    /// This test's application group: tests that share the suite's bus never hear each other.
    let group = uniqueName("group.com.example.lines-test")
    let bus: TestBus
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory

    init() throws {
        bus = try TestBus.shared()
        root = try TemporaryDirectory("lines-root")
        runtime = try TemporaryDirectory("lines-runtime")
    }

    var environment: [String: String] {
        ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path, "LINES_GROUP": group]
    }

    /// Starts `lines` and returns once it listens.
    func lines() async throws -> ChildProcess {
        let child = try ChildProcess(
            try productPath("lines"), ["--bus-address", bus.address.rawValue], environment: environment)
        let ready = try await next(1, from: child.stderrLines, "ready from lines")
        guard ready == ["ready"] else { throw TestFailure("lines wrote \(ready) before ready") }
        return child
    }

    /// Starts the host as a browser does: no arguments but the extension's origin, the user's
    /// environment (here the private bus through LINES_BUS_ADDRESS).
    func host() throws -> NativeHost {
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in self.environment { environment[key] = value }
        environment["LINES_BUS_ADDRESS"] = bus.address.rawValue
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/wormhole-tests-use-explicit-buses"
        return try NativeHost(try productPath("line-grabber-host"), environment: environment)
    }

    func line(_ child: ChildProcess, containing text: String) async throws -> String {
        try await within("a line with \(text)") {
            guard let line = await child.stdoutLines.firstLine(where: { $0.contains(text) }) else {
                throw TestFailure("output ended without \(text): \(child.outputSoFar)")
            }
            return line
        }
    }
}

/// A native-messaging host process and the browser's half of the protocol.
private final class NativeHost: Sendable {
    let pid: pid_t
    /// The write end of the host's standard input; -1 once closed.
    let input: Locked<Int32>
    /// The read end of the host's standard output.
    let output: Int32
    /// Whether the host was reaped.
    let reaped = Locked(false)

    init(_ executable: String, environment: [String: String]) throws {
        let input = try Spawn.pipe()
        let output: (read: Int32, write: Int32)
        do { output = try Spawn.pipe() } catch {
            close(input.read)
            close(input.write)
            throw error
        }
        defer {
            close(input.read)
            close(output.write)
        }
        do {
            pid = try Spawn.start(
                executable, ["chrome-extension://abcdefghijklmnopabcdefghijklmnop/"], environment: environment,
                standardInput: input.read, standardOutput: output.write)
        } catch {
            close(input.write)
            close(output.read)
            throw error
        }
        self.input = Locked(input.write)
        self.output = output.read
    }

    /// Writes raw bytes to the host's standard input.
    func writeRaw(_ bytes: [UInt8]) {
        input.withLock { fd in
            if fd >= 0 { Spawn.writeAll(fd, bytes) }
        }
    }

    /// Sends one message: its length in native byte order, then the JSON.
    func send(_ json: String) {
        let body = Array(json.utf8)
        var length = UInt32(body.count)
        writeRaw(withUnsafeBytes(of: &length) { Array($0) } + body)
    }

    /// Reads the next message the host writes (blocking reads, on a Dispatch thread).
    func receive() async throws -> [String: Any] {
        let fd = output
        let body = try await within("a message from the host") {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8], any Error>) in
                DispatchQueue.global().async {
                    guard let header = Self.read(fd, 4) else {
                        return continuation.resume(throwing: TestFailure("the host closed its output"))
                    }
                    let length = Int(header.withUnsafeBytes { $0.load(as: UInt32.self) })
                    guard let body = Self.read(fd, length) else {
                        return continuation.resume(throwing: TestFailure("the host's message was cut short"))
                    }
                    continuation.resume(returning: body)
                }
            }
        }
        guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw TestFailure("not a JSON object: \(String(decoding: body, as: UTF8.self))")
        }
        return object
    }

    /// Closes standard input, as the browser does when it is done, and waits for the exit status.
    func finish() async throws -> Int32 {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
        return try await within("the host to exit") {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    let status = Spawn.wait(self.pid) ?? -1
                    self.reaped.withLock { $0 = true }
                    continuation.resume(returning: Spawn.exitCode(status))
                }
            }
        }
    }

    private static func read(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + offset, count - offset) }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { return nil }
            offset += got
        }
        return bytes
    }

    deinit {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
        }
        close(output)
        if !reaped.withLock({ $0 }) {
            kill(pid, SIGKILL)
            Spawn.wait(pid)
        }
    }
}

/// The tests share the suite's bus, each in a group of its own.
@Suite("Examples/Lines and LineGrabber across processes", .sharedBus)
struct LinesExampleTests {
    @Test("a line sent by the host reaches a running Lines at once, and a Lines started later finds it")
    func lineArrives() async throws {
        let world = try LinesWorld()
        let running = try await world.lines()
        let host = try world.host()
        host.send(#"{"line":"Le café coûte 3 €","url":"https://example.com/menu"}"#)
        let reply = try await host.receive()
        #expect(reply["ok"] as? Bool == true)
        #expect(reply["id"] is String)
        #expect(reply["toExtension"] is NSNull)
        #expect(try await host.finish() == 0)
        let shown = try await world.line(running, containing: "Le café")
        #expect(shown.hasPrefix(#"lines: "Le café coûte 3 €" from https://example.com/menu ("#))

        let later = try await world.lines()
        let found = try await next(1, from: later.stdoutLines, "the stored line")
        #expect(found[0].hasPrefix(#"lines: while Lines was closed: "Le café coûte 3 €""#))
        for child in [running, later] { child.closeInput() }
        for child in [running, later] { #expect(try await child.finished().status == 0) }
    }

    @Test("Lines answers back: pushed to an open port, and in the next reply")
    func answerBack() async throws {
        let world = try LinesWorld()
        let lines = try await world.lines()
        let port = try world.host()
        port.send(#"{"line":"first"}"#)
        _ = try await port.receive()
        _ = try await world.line(lines, containing: "\"first\"")
        lines.write("thanks, got it\n")
        let pushed = try await port.receive()
        let answer = try #require(pushed["toExtension"] as? [String: Any])
        #expect(answer["text"] as? String == "thanks, got it")
        #expect(try await port.finish() == 0)

        let next = try world.host()
        next.send(#"{"get":"toExtension"}"#)
        let reply = try await next.receive()
        #expect((reply["toExtension"] as? [String: Any])?["text"] as? String == "thanks, got it")
        #expect(try await next.finish() == 0)
        lines.closeInput()
        #expect(try await lines.finished().status == 0)
    }

    @Test("50 lines sent faster than Lines reads them (it is stopped meanwhile) all reach it, in order")
    func fiftyInARow() async throws {
        let world = try LinesWorld()
        let lines = try await world.lines()
        // Lines cannot read while stopped: all 50 are stored before it reads the first.
        lines.signal(SIGSTOP)
        let host = try world.host()
        for i in 1...50 { host.send(#"{"line":"quick \#(i)"}"#) }
        for _ in 1...50 { #expect(try await host.receive()["ok"] as? Bool == true) }
        #expect(try await host.finish() == 0)
        lines.signal(SIGCONT)
        let shown = try await within("50 lines") {
            var shown: [String] = []
            for await line in lines.stdoutLines where line.hasPrefix("lines: \"quick ") {
                shown.append(String(line.dropFirst("lines: \"".count).prefix { $0 != "\"" }))
                if shown.count == 50 { break }
            }
            return shown
        }
        #expect(shown == (1...50).map { "quick \($0)" })
        lines.closeInput()
        #expect(try await lines.finished().status == 0)
    }

    @Test("protocol edges: a 100 KB line, a request that is not an object, a message cut short")
    func protocolEdges() async throws {
        let world = try LinesWorld()
        let lines = try await world.lines()
        let host = try world.host()
        let long = String(repeating: "ü", count: 50_000)  // 100,000 bytes: every byte of the length is used
        host.send(#"{"line":"\#(long)"}"#)
        #expect(try await host.receive()["ok"] as? Bool == true)
        _ = try await world.line(lines, containing: "üüü")
        host.send("[1,2,3]")
        let refused = try await host.receive()
        #expect(refused["ok"] as? Bool == false)
        // A length of 100, then 10 bytes, then the end of input.
        var length = UInt32(100)
        host.writeRaw(withUnsafeBytes(of: &length) { Array($0) } + Array(#"{"line":"x"#.utf8))
        #expect(try await host.finish() == 1)
        lines.closeInput()
        #expect(try await lines.finished().status == 0)
    }
}

// SPDX-License-Identifier: Apache-2.0
// Scenario 4 across processes: `share-handoff` (the short-lived share extension) hands files to
// `share-host` (the app) through a journal, on a private bus with a fresh container root.

import Foundation
import Glibc
import Testing
import WormholeDBus
import WormholeTestSupport

private final class ShareWorld: Sendable {
    /// This test's application group: tests that share the suite's bus never hear each other.
    let group = uniqueName("group.com.example.share")
    let bus: TestBus
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory
    let files: TemporaryDirectory

    init() throws {
        bus = try TestBus.shared()
        root = try TemporaryDirectory("share-root")
        runtime = try TemporaryDirectory("share-runtime")
        files = try TemporaryDirectory("share-files")
    }

    var environment: [String: String] { ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path] }
    var common: [String] { ["--group", group, "--bus-address", bus.address.rawValue] }

    /// Starts `share-host` and returns once it has written `ready`.
    func startHost(_ extra: [String] = []) async throws -> ChildProcess {
        let host = try ChildProcess(try productPath("share-host"), common + extra, environment: environment)
        let ready = try await next(1, from: host.stderrLines, "ready from share-host")
        guard ready == ["ready"] else { throw TestFailure("share-host wrote \(ready) before ready") }
        return host
    }

    /// A file named `name` holding `text`.
    func file(_ name: String, _ text: String) throws -> String {
        let path = "\(files.path)/\(name)"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Runs `share-handoff` to its end.
    func share(_ arguments: [String], environment extra: [String: String] = [:]) async throws -> ProcessOutput {
        let child = try ChildProcess(
            try productPath("share-handoff"), common + arguments, environment: environment.merging(extra) { $1 })
        child.closeInput()
        return try await child.finished("share-handoff")
    }

    /// The next `count` lines of `host` that show a share.
    func shares(_ count: Int, from host: ChildProcess) async throws -> [String] {
        try await within("\(count) shares") {
            var found: [String] = []
            for await line in host.stdoutLines where line.hasPrefix("share-host: share ") {
                found.append(line)
                if found.count == count { return found }
            }
            throw TestFailure("share-host ended after \(found): \(host.outputSoFar)")
        }
    }
}

/// The tests share the suite's bus, each in a group of its own.
@Suite("Examples/ShareHandoff across processes", .sharedBus)
struct ShareHandoffExampleTests {
    @Test("a hand-off killed with SIGKILL right after its write loses nothing")
    func killedAfterWrite() async throws {
        let world = try ShareWorld()
        let host = try await world.startHost()
        let killed = try await world.share(
            [try world.file("photo.jpg", "not really a jpeg")], environment: ["SHARE_HANDOFF_KILL_AFTER_WRITE": "1"])
        #expect(killed.status != 0, "\(killed)")
        // Its wake-up never reached the bus; the next share wakes the host, which shows both.
        let next = try await world.share(["--action", "disk", try world.file("note.txt", "hello")])
        #expect(next.status == 0, "\(next)")
        let shown = try await world.shares(2, from: host)
        #expect(
            shown == [
                "share-host: share 1: photo.jpg (image/jpeg, 17 bytes): send it in a chat",
                "share-host: share 2: note.txt (text/plain, 5 bytes): save it to disk",
            ])
        host.closeInput()
        #expect(try await host.finished().status == 0)
        // No temporary file is left in the container.
        let directory = "\(world.root.path)/\(world.group)/Shared"
        let shared = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(shared.count == 2 && !shared.contains { $0.hasPrefix(".") }, "\(shared)")

        // One killed while copying leaves its temporary file; the host removes it at start once
        // that process is gone (no process has the number 2147483646).
        try Data("half".utf8).write(to: URL(fileURLWithPath: "\(directory)/.2147483646.0.tmp"))
        let restarted = try await world.startHost()
        restarted.closeInput()
        let output = try await restarted.finished()
        #expect(
            output.stdout.contains(
                "share-host: removed .2147483646.0.tmp, left by a hand-off that was killed while copying"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).count == 2)
    }

    @Test("20 shares in quick succession all arrive, in order")
    func twentyInARow() async throws {
        let world = try ShareWorld()
        let host = try await world.startHost()
        let paths = try (1...20).map { try world.file("item\($0).txt", "item \($0)") }
        for path in paths {
            let output = try await world.share([path])
            #expect(output.status == 0, "\(output)")
        }
        let shown = try await world.shares(20, from: host)
        #expect(
            shown
                == (1...20).map {
                    "share-host: share \($0): item\($0).txt (text/plain, \("item \($0)".utf8.count) bytes): send it in a chat"
                })
        host.closeInput()
        #expect(try await host.finished().status == 0)
    }

    @Test("a share made while the host is closed is shown when it starts, and only once")
    func whileClosed() async throws {
        let world = try ShareWorld()
        let first = try await world.startHost(["--actions", "preview,buffer"])
        first.closeInput()
        #expect(try await first.finished().status == 0)

        let output = try await world.share([try world.file("a.png", "png"), try world.file("b.pdf", "pdf!")])
        #expect(output.status == 0, "\(output)")
        #expect(
            output.stdout
                == "shared 1: a.png (image/png, 3 bytes) to preview\nshared 2: b.pdf (application/pdf, 4 bytes) to preview\n"
        )

        let host = try await world.startHost()
        let shown = try await world.shares(2, from: host)
        #expect(
            shown == [
                "share-host: share 1: a.png (image/png, 3 bytes): preview it",
                "share-host: share 2: b.pdf (application/pdf, 4 bytes): preview it",
            ])
        host.closeInput()
        #expect(try await host.finished().status == 0)

        // Started again, it has nothing new to show.
        let again = try await world.startHost()
        _ = try await world.share(["--action", "buffer", try world.file("c.txt", "c")])
        let shownAgain = try await world.shares(1, from: again)
        #expect(shownAgain == ["share-host: share 3: c.txt (text/plain, 1 bytes): copy it to the clipboard buffer"])
        again.closeInput()
        #expect(try await again.finished().status == 0)
    }

    @Test("a disabled action is refused with a clear message, and nothing is handed over")
    func disabledAction() async throws {
        let world = try ShareWorld()
        let host = try await world.startHost(["--actions", "messenger,disk"])
        let refused = try await world.share(["--action", "preview", try world.file("x.txt", "x")])
        #expect(refused.status == 1)
        #expect(
            refused.stderr == """
                share-handoff: the action 'preview' is not enabled by the host app (enabled: messenger, disk); \
                nothing was shared. Enable it with: share-host --actions messenger,disk,preview

                """)
        let unknown = try await world.share(["--action", "fax", try world.file("y.txt", "y")])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("unknown action 'fax' (the modules are messenger, disk, preview, buffer)"))
        let missing = try await world.share(["\(world.files.path)/absent.txt"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("cannot share '\(world.files.path)/absent.txt': No such file or directory"))

        // Nothing of those reached the host: the next share is number 1.
        _ = try await world.share(["--action", "disk", try world.file("z.txt", "z")])
        let shown = try await world.shares(1, from: host)
        #expect(shown == ["share-host: share 1: z.txt (text/plain, 1 bytes): save it to disk"])
        host.closeInput()
        #expect(try await host.finished().status == 0)
        let shared = try FileManager.default.contentsOfDirectory(atPath: "\(world.root.path)/\(world.group)/Shared")
        #expect(shared.count == 1, "\(shared)")
    }
}

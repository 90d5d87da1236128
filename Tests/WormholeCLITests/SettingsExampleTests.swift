// SPDX-License-Identifier: Apache-2.0
// Scenario 3 across processes: `settings-watch` and `settings-app` (Examples/Settings) on a
// private bus with a fresh container root; each shows the other's changes live, and a watch
// killed in the middle of its writes loses nothing it acknowledged and leaves nothing torn.

import Dispatch
import Foundation
import Glibc
import Testing
import WormholeDBus
import WormholeTestSupport

private final class SettingsWorld: Sendable {
    /// This test's application group: tests that share the suite's bus never hear each other.
    let group = uniqueName("group.com.example.settings")
    let bus: TestBus
    let root: TemporaryDirectory
    let runtime: TemporaryDirectory

    init() throws {
        bus = try TestBus.shared()
        root = try TemporaryDirectory("settings-root")
        runtime = try TemporaryDirectory("settings-runtime")
    }

    /// Starts `settings-ROLE` and returns once it has written `ready` (after its first line).
    func start(_ role: String) async throws -> (ChildProcess, first: String) {
        let child = try ChildProcess(
            try productPath("settings-\(role)"), ["--group", group, "--bus-address", bus.address.rawValue],
            environment: ["WORMHOLE_CONTAINER_ROOT": root.path, "XDG_RUNTIME_DIR": runtime.path])
        let ready = try await next(1, from: child.stderrLines, "ready from settings-\(role)")
        guard ready == ["ready"] else { throw TestFailure("settings-\(role) wrote \(ready) before ready") }
        // The state line is written before `ready`.
        let first = try await next(1, from: child.stdoutLines, "the first line of settings-\(role)")
        return (child, first[0])
    }

    /// Waits for the first line of `child` that contains `text`.
    func line(_ child: ChildProcess, containing text: String) async throws -> String {
        try await within("a line with \(text)") {
            guard let line = await child.stdoutLines.firstLine(where: { $0.contains(text) }) else {
                throw TestFailure("output ended without \(text): \(child.outputSoFar)")
            }
            return line
        }
    }
}

/// The tests share the suite's bus, each in a group of its own.
@Suite("Examples/Settings across processes", .sharedBus)
struct SettingsExampleTests {
    @Test("each side shows the other's currency, theme and photo the moment they change")
    func liveBothWays() async throws {
        let world = try SettingsWorld()
        let (app, appFirst) = try await world.start("app")
        let (watch, watchFirst) = try await world.start("watch")
        #expect(appFirst == "app: currency EUR, theme light, no photo")
        #expect(watchFirst == "watch: currency EUR, theme light, no photo")

        watch.write("currency USD\n")
        _ = try await world.line(app, containing: "app: currency changed to USD by the other side")
        app.write("theme dark\n")
        _ = try await world.line(watch, containing: "watch: theme changed to dark by the other side")
        watch.write("photo 7 300000\n")
        _ = try await world.line(app, containing: "app: photo 7 from the watch: photo 7 (300000 bytes, intact)")
        app.write("photo 8 4000\n")
        _ = try await world.line(watch, containing: "watch: photo 8 from the app: photo 8 (4000 bytes, intact)")

        // A third process started now finds everything where the others left it.
        let (late, lateFirst) = try await world.start("app")
        #expect(lateFirst == "app: currency USD, theme dark, photo 8 (4000 bytes, intact)")
        for child in [app, watch, late] { child.closeInput() }
        for child in [app, watch, late] { #expect(try await child.finished().status == 0) }
    }

    @Test("a watch killed mid-write: every acknowledged write survives, the photo is never torn")
    func killedMidWrite() async throws {
        let world = try SettingsWorld()
        let (app, _) = try await world.start("app")
        for round in 1...3 {
            let (watch, _) = try await world.start("watch")
            watch.write("burst 100000\n")
            // Killed at the instant round k is acknowledged: the next round's photo or setting is
            // being written then.
            let k = Int.random(in: 2...5)
            _ = try await world.line(watch, containing: "watch: burst \(k)")
            watch.signal(SIGKILL)
            let output = try await watch.finished()
            #expect(output.status != 0)
            let acknowledged =
                output.stdout.split(separator: "\n").compactMap { line -> Int? in
                    line.hasPrefix("watch: burst ") ? Int(line.dropFirst("watch: burst ".count)) : nil
                }.max() ?? 0
            #expect(acknowledged >= k)

            // What a new process finds: the suite readable, the photo whole, neither behind.
            let (check, state) = try await world.start("app")
            check.closeInput()
            #expect(try await check.finished().status == 0)
            let pattern = #/app: currency C(\d+), theme light, photo (\d+) \(100000 bytes, intact\)/#
            let match = try #require(state.wholeMatch(of: pattern), "round \(round): \(state)")
            let currency = try #require(Int(match.1))
            let photo = try #require(Int(match.2))
            #expect(currency >= acknowledged, "round \(round): \(state) after burst \(acknowledged)")
            #expect(photo >= acknowledged, "round \(round): \(state) after burst \(acknowledged)")
            #expect(photo == currency || photo == currency + 1, "round \(round): \(state)")
        }
        // The running app saw the killed watches' changes live, and never a torn photo.
        app.closeInput()
        let seen = try await app.finished()
        #expect(seen.stdout.contains("app: currency changed to C"))
        #expect(!seen.stdout.contains("CORRUPT"))
    }
}

import Foundation
import Synchronization
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// Contract §8 outside a sandbox, across processes: a `wormholectl` with an app ID owns
/// `<APPID>.Wormhole.c<unique>` before its first signal, and one without posts anonymously.
/// The proxy side (bubblewrap, xdg-dbus-proxy) is Tests/sandbox.sh.
@Suite("sandbox sender names (contract §8)", .sharedBus)
struct SandboxNameCLITests {
    let harness: NotifyCLITests
    init() throws { harness = try NotifyCLITests() }

    /// What a watcher connection saw, in the order the bus delivered it: `Posted` (sender,
    /// state) and the `NameOwnerChanged` of names below the app ID (name, new owner).
    enum Seen: Equatable, Sendable {
        case posted(sender: String, state: UInt64)
        case owner(name: String, owner: String)
    }

    @Test(
        "with WORMHOLE_APP_ID a poster owns <APPID>.Wormhole.c<unique> before its Posted; without one it owns nothing")
    func ownsNameBeforePosting() async throws {
        let appID = "org.example.sandbox\(UInt32.random(in: 0...UInt32.max))"
        let name = uniqueName("sandbox.names")
        let watcher = try BusConnection(address: harness.bus.address)
        defer { watcher.close() }
        let (stream, continuation) = AsyncStream<Seen>.makeStream()
        // Both routes deliver on the watcher's one I/O thread, in the order the bus sent them.
        try await watchOwners(below: appID, on: watcher) { continuation.yield(.owner(name: $0, owner: $1)) }
        let posted = MatchRule(
            member: try MemberName("Posted"), path: try ObjectPath(NotifyContract.objectPath), arguments: [0: name])
        _ = try await watcher.addRoute([posted]) { signal in
            continuation.yield(
                .posted(sender: signal.sender ?? "", state: signal.arguments.last?.nonNegativeInteger ?? 0))
        }
        let anonymous = try await harness.runToEnd(["post", name, "--state", "1"] + harness.busArguments)
        #expect(anonymous.status == 0, "\(anonymous.stderr)")
        let named = await harness.finish(
            try ChildProcess(
                try productPath("wormholectl"), ["post", name, "--state", "2"] + harness.busArguments,
                environment: harness.environment.merging(["WORMHOLE_APP_ID": appID]) { $1 }))
        #expect(named.status == 0, "\(named.stderr)")
        let seen = try await NotifyCLITests.next(3, from: stream)
        guard case .posted(let first, 1) = seen[0], case .owner(let owned, let owner) = seen[1],
            case .posted(let second, 2) = seen[2]
        else {
            Issue.record("expected Posted(1), then the name, then Posted(2); saw \(seen)")
            return
        }
        #expect(first != second)
        #expect(owner == second, "the second poster owns the name")
        #expect(owned == BusConnection.appSenderName(appID: appID, unique: second))
    }

    @Test("an invalid WORMHOLE_APP_ID: post exits non-zero naming it; send stores and reports it")
    func invalidAppID() async throws {
        let bad = "not an app id"
        let environment = harness.environment.merging(["WORMHOLE_APP_ID": bad]) { $1 }
        let post = await harness.finish(
            try ChildProcess(
                try productPath("wormholectl"), ["post", "a.b"] + harness.busArguments, environment: environment))
        #expect(post.status != 0)
        #expect(post.stderr.contains("'\(bad)'") && post.stderr.contains("WORMHOLE_APP_ID"), "\(post.stderr)")
        let root = try TemporaryDirectory("sandbox-names")
        let send = await harness.finish(
            try ChildProcess(
                try productPath("wormholectl"),
                ["send", "--group", "group.example.names", "inbox", "{}"] + harness.busArguments,
                environment: environment.merging(["WORMHOLE_CONTAINER_ROOT": root.path]) { $1 }))
        #expect(send.status == 0, "\(send.stderr)")
        #expect(send.stderr.contains("'\(bad)'"), "\(send.stderr)")
        #expect(FileManager.default.fileExists(atPath: root.path + "/group.example.names/wormhole/inbox.json"))
    }
}

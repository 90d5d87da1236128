import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

@Suite("Check tokens (notify_register_check / notify_check)", .sharedBus)
struct NotifyCheckTokenTests {
    let bus: TestBus
    let table: NotifyTempDirectory
    init() throws {
        bus = try TestBus.shared()
        table = try NotifyTempDirectory()
    }

    func center() throws -> DarwinNotificationCenter { try NotifyHarness.center(bus, table: table.path) }

    @Test("the first check is true, a second with no post false, a post makes it true once")
    func firstCheck() throws {
        let checking = try center()
        let token = try checking.makeCheckToken(for: NotifyHarness.name("check/first"))
        #expect(token.check() == true)
        #expect(token.check() == false)
        #expect(token.check() == false)
        try center().post(NotifyHarness.name("check/first"))
        #expect(token.check() == true, "the shared table says so before any signal arrives")
    }

    @Test("no false negative over 10,000 posts, each checked as soon as post returns")
    func noFalseNegatives() throws {
        let target = NotifyHarness.name("check/many")
        let checking = try center()
        let posting = try center()
        let token = try checking.makeCheckToken(for: target)
        _ = token.check()
        var misses = 0
        for index in 0..<10_000 {
            try posting.post(target, state: UInt64(index))
            if !token.check() { misses += 1 }
        }
        #expect(misses == 0)
        #expect(checking.sharedState(of: target) == 9_999)
    }

    @Test("a post made by another process (wormholectl post) turns check() true at once")
    func otherProcess() async throws {
        let runtime = try NotifyTempDirectory()
        let target = NotifyHarness.name("check/cross-process")
        let checking = try NotifyHarness.center(bus, table: runtime.tableDirectory)
        let token = try checking.makeCheckToken(for: target)
        #expect(token.check() == true)
        #expect(token.check() == false)
        let output = try await NotifyHarness.run(
            try productPath("wormholectl"),
            ["post", target.rawValue, "--state", "77", "--bus-address", bus.address.rawValue],
            environment: ["XDG_RUNTIME_DIR": runtime.path])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(token.check() == true)
        #expect(checking.sharedState(of: target) == 77, "the child wrote the table this process reads")
    }

    @Test("a hand-typed post (not in the table) turns check() true once its signal arrives")
    func handTyped() async throws {
        let target = NotifyHarness.name("check/hand-typed")
        let checking = try center()
        let token = try checking.makeCheckToken(for: target)
        let (witnessed, witness) = NotifyHarness.recorder()
        let observer = try checking.listen(name: NotifyHarness.name("check/witness"), on: .ioThread, handler: witness)
        defer { observer.cancel() }
        _ = token.check()
        #expect(token.check() == false)
        // One sender for both, so the daemon keeps them in order; signals are dispatched in
        // order on the connection's thread, so the token has seen the first when the witness
        // sees the second.
        let sender = try BusConnection(address: bus.address)
        let path = try ObjectPath(NotifyContract.objectPath)
        let plain = try InterfaceName(NotifyContract.plainInterface)
        let posted = try MemberName("Posted")
        try sender.emit(Signal(path: path, interface: plain, member: posted, arguments: [.string(target.rawValue)]))
        try sender.emit(Signal(path: path, interface: plain, member: posted, arguments: [.string("check/witness")]))
        _ = try await NotifyHarness.next(1, from: witnessed, "the witness post")
        #expect(token.check() == true)
        #expect(token.check() == false)
        token.cancel()
    }
}

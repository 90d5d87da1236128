// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// Names that need escaping in match rules, or that look like other names.
let notifyAwkwardNames = [
    "it's", #"back\slash"#, "with space", "dots.and/slashes/x", #"both '\' mixed''"#, #"trailing\"#, "'",
    "ünïcode/名前", "com.example.app.refresh",
]

/// The tests share the suite's bus. `awkwardNames` (which observes a name `wireFormat` posts and
/// counts what the process's one connection to its bus received) and `invalidNames` (which
/// watches everything that connection sends) have a bus of their own, their cases one at a time.
@Suite("Notification names, buckets and the wire format (contract §1)", .sharedBus)
struct NotifyNameTests {
    let bus: TestBus
    let table: NotifyTempDirectory
    init() throws {
        bus = try TestBus.shared()
        table = try NotifyTempDirectory()
    }

    func center() throws -> DarwinNotificationCenter { try NotifyHarness.center(bus, table: table.path) }

    @Test("FNV-1a-32 test vectors")
    func fnvVectors() {
        #expect(NotifyContract.fnv1a32("a".utf8) == 0xe40c_292c)
        #expect(NotifyContract.fnv1a32("foobar".utf8) == 0xbf9c_f968)
        #expect(NotifyContract.fnv1a32([UInt8]()) == 0x811c_9dc5)
    }

    @Test(
        "a post is Posted(s name, t state) on /org/wormhole/Notify1 and the name's bucket interface",
        arguments: [
            ("com.example.app.refresh", "org.wormhole.Notify1.BE6A2"),
            ("group.com.example.lines/wormhole/clip", "org.wormhole.Notify1.B5F31"),
        ])
    func wireFormat(name: String, interface: String) async throws {
        #expect(try NotificationName(name).bucketInterface == interface)
        #expect(NotifyContract.bucketInterface(for: name) == interface)
        // A raw listener, not our own observer: it sees exactly what the poster put on the wire for
        // the name (the process's other tests post other names on the same connection).
        let poster = try center()
        let listener = try BusConnection(address: bus.address)
        let raw = try await listener.signals(
            matching: MatchRule(
                sender: poster.connection.uniqueName, member: try MemberName("Posted"), arguments: [0: name]))
        try poster.post(NotificationName(name), state: 42)
        try poster.post(NotificationName(name), state: .max)
        let signals = try await NotifyHarness.next(2, from: raw, "raw Posted signals")
        for (signal, state) in zip(signals, [42, UInt64.max]) {
            #expect(signal.interface.rawValue == interface)
            #expect(signal.path.rawValue == "/org/wormhole/Notify1")
            #expect(signal.member.rawValue == "Posted")
            #expect(signal.signature == "st")
            #expect(signal.arguments == [.string(name), .uint64(state)])
            #expect(signal.sender == poster.connection.uniqueName)
        }
    }

    @Test(
        "names with quotes, backslashes, spaces, dots and slashes reach observers, look-alikes do not",
        .sharedBus, .serialized, arguments: notifyAwkwardNames)
    func awkwardNames(name: String) async throws {
        let observing = try center()
        // What is measured is the bus's filtering: the posts go by the bus alone (with the
        // doorbell, a ring could deliver before the signal is counted).
        let posting = try NotifyHarness.center(bus, table: table.path, wake: .busOnly)
        // The cases share a bus and (one at a time) the process's connection to it.
        let before = observing.connection.signalsReceived
        let (handled, handler) = NotifyHarness.recorder()
        let observer = try observing.listen(
            name: NotificationName(name), on: .queue(DispatchQueue(label: "test.awkward")), handler: handler)
        defer { observer.cancel() }
        let stream = try await observing.notifications(name: NotificationName(name))
        for lookalike in [name + "x", "x" + name, name + "'", "\\" + name, String(name.dropLast())]
        where !lookalike.isEmpty {
            try posting.post(NotificationName(lookalike), state: 0)
        }
        try posting.post(NotificationName(name), state: 1)
        for delivered in [
            try await NotifyHarness.next(1, from: handled), try await NotifyHarness.next(1, from: stream),
        ] {
            #expect(delivered.map(\.name.rawValue) == [name])
            #expect(delivered.map(\.state) == [1])
        }
        #expect(observing.connection.signalsReceived == before + 1, "the daemon filtered every look-alike")
    }

    @Test(
        "a name of exactly 900 bytes works end to end",
        arguments: [
            "com.example/" + String(repeating: "n", count: 888),
            String(repeating: "é", count: 450),
            "it's a \\ long/" + String(repeating: "q", count: 886),
        ])
    func longestName(name: String) async throws {
        #expect(name.utf8.count == 900)
        let observing = try center()
        let posting = try center()
        let stream = try await observing.notifications(name: NotificationName(name))
        try posting.post(NotificationName(name), state: 900)
        let delivered = try await NotifyHarness.next(1, from: stream)
        #expect(delivered.map(\.name.rawValue) == [name])
        #expect(delivered.map(\.state) == [900])
    }

    @Test(
        "invalid names are refused by name and by post, naming the problem, and nothing is sent", .sharedBus,
        .serialized,
        arguments: [
            ("", "empty"),
            (String(repeating: "n", count: 901), "901 bytes"),
            (String(repeating: "é", count: 451), "902 bytes"),
            ("com.example\0refresh", "NUL"),
        ])
    func invalidNames(name: String, problem: String) async throws {
        #expect { try NotificationName(name) } throws: { error in
            guard let error = error as? WormholeError else { return false }
            return error.code == .invalidName && error.message.contains(problem)
        }
        // Everything the poster's connection sends: this test's cases share a bus of their own, one
        // case at a time.
        let poster = try center()
        let listener = try BusConnection(address: bus.address)
        let raw = try await listener.signals(
            matching: MatchRule(sender: poster.connection.uniqueName, member: try MemberName("Posted")))
        #expect(#expect(throws: WormholeError.self) { try poster.post(NotificationName(name)) }?.code == .invalidName)
        #expect(
            #expect(throws: WormholeError.self) { try poster.post(NotificationName(name), state: 1) }?.code
                == .invalidName)
        try poster.post("sentinel")
        let signals = try await NotifyHarness.next(1, from: raw, "the sentinel")
        #expect(signals.map { $0.arguments.first } == [.string("sentinel")], "the refused posts sent nothing")
    }

    @Test(
        "bytes that are not UTF-8 are refused",
        arguments: [
            [0x61, 0xff, 0x62], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xfe],
        ] as [[UInt8]])
    func notUTF8(bytes: [UInt8]) {
        #expect { try NotificationName(utf8: bytes) } throws: { error in
            guard let error = error as? WormholeError else { return false }
            return error.code == .invalidName && error.message.contains("not valid UTF-8")
                && error.message.contains(String(bytes.last!, radix: 16))
        }
    }

    @Test("valid UTF-8 bytes make the same name as the string")
    func validBytes() throws {
        #expect(try NotificationName(utf8: Array("ünïcode/名前".utf8)) == NotificationName("ünïcode/名前"))
        #expect { try NotificationName(utf8: [0x61, 0x00]) } throws: { ($0 as? WormholeError)?.code == .invalidName }
    }

    @Test("a prefix must end with '/'")
    func prefixNeedsSlash() async throws {
        let observing = try center()
        let handlerError = #expect(throws: WormholeError.self) {
            try observing.listen(prefix: NotificationName("group/box"), on: .ioThread) { _ in }
        }
        #expect(handlerError?.code == .invalidName)
        #expect(handlerError?.message.contains("'group/box' must end with '/'") == true)
        let streamError = await #expect(throws: WormholeError.self) {
            try await observing.notifications(prefix: NotificationName("group/box"))
        }
        #expect(streamError?.code == .invalidName)
    }

    @Test("a name whose match rule would exceed 1024 bytes is refused by name, for posting and observing alike")
    func quoteHeavyName() async throws {
        // 300 quotes + 600 letters = 900 bytes, but each ' is spelled '\'' in the rule.
        let heavy = String(repeating: "'", count: 300) + String(repeating: "a", count: 600)
        let error = #expect(throws: WormholeError.self) { try NotificationName(heavy) }
        #expect(error?.code == .invalidName)
        #expect(error?.message.contains("accepts at most 1024") == true)
        let observing = try center()
        #expect(throws: WormholeError.self) { try observing.post(NotificationName(heavy)) }
        // The longest name that fits: the rule is exactly 1024 bytes.
        let fixed = NotifyContract.exactRuleLength(of: "")
        let quotes = (MatchRule.maximumLength - fixed) / 4
        let edge =
            String(repeating: "'", count: quotes)
            + String(repeating: "c", count: MatchRule.maximumLength - fixed - 4 * quotes)
        #expect(NotifyContract.exactRuleLength(of: edge) == MatchRule.maximumLength)
        let edgeName = try NotificationName(edge)
        let edgeStream = try await observing.notifications(name: edgeName)
        try observing.post(edgeName, state: 4)
        let edgeNote = try await NotifyHarness.within("the longest name") { await edgeStream.first { _ in true } }
        #expect(edgeNote?.state == 4)
        #expect(throws: WormholeError.self) { try NotificationName(edge + "'") }
        // A name with a few quotes is fine end to end.
        let fine = try NotificationName(String(repeating: "'", count: 20) + "b")
        let stream = try await observing.notifications(name: fine)
        try observing.post(fine, state: 5)
        let note = try await NotifyHarness.within("the quoted name") { await stream.first { _ in true } }
        #expect(note?.name.rawValue == fine.rawValue)
        #expect(note?.state == 5)
    }
}

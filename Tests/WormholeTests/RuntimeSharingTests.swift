// SPDX-License-Identifier: Apache-2.0
// One runtime per process: every facade on one bus shares one connection (one unique name, one
// loop thread), closing one facade ends only what it added, and the directory watches of every
// listener without a bus share one inotify instance. Asked of the bus and of /proc, not of the
// library's own bookkeeping.

import Dispatch
import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

@Suite("One runtime per process")
struct RuntimeSharingTests {
    /// The unique names on `bus` whose connection belongs to process `pid`, as the bus daemon
    /// says (`ListNames`, then `GetConnectionUnixProcessID` for each), asked with `dbus-send` so
    /// that asking adds no connection of this process.
    static func uniqueNames(on bus: TestBus, of pid: pid_t) throws -> [String] {
        let listed = try run(
            "/usr/bin/env",
            [
                "dbus-send", "--bus=\(bus.address.rawValue)", "--print-reply", "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus", "org.freedesktop.DBus.ListNames",
            ])
        let names = listed.stdout.split(separator: "\n").compactMap { line -> String? in
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("string \":") else { return nil }
            return String(text.dropFirst("string \"".count).dropLast())
        }
        return try names.filter { name in
            let answer = try run(
                "/usr/bin/env",
                [
                    "dbus-send", "--bus=\(bus.address.rawValue)", "--print-reply", "--dest=org.freedesktop.DBus",
                    "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:\(name)",
                ])
            // A connection that left between the two calls has no process any more.
            guard answer.status == 0,
                let value = answer.stdout.split(separator: " ").last.flatMap({
                    UInt32($0.trimmingCharacters(in: .whitespacesAndNewlines))
                })
            else { return false }
            return pid_t(value) == pid
        }
    }

    @Test(
        "a message center, shared defaults, a notification center and a journal reader hold one connection to the bus")
    func facadesShareOneConnection() async throws {
        let bus = try TestBus()
        let root = try TemporaryDirectory("runtime-root")
        let state = try TemporaryDirectory("runtime-state")
        let group = "group.com.example.runtime"
        let wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root.path, busAddress: bus.address,
            sharedStateDirectory: state.path)
        let defaults = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root.path, busAddress: bus.address,
            sharedStateDirectory: state.path)
        let center = try DarwinNotificationCenter(busAddress: bus.address, sharedStateDirectory: state.path)
        let listener = try wormhole.listen(identifier: "inbox", as: JSONDocument.self) { _ in }
        let reader = try wormhole.journal("events").listen(from: .end, as: JSONDocument.self) { _ in }
        let observer = try defaults.listen(forKey: "volume") { _ in }
        let token = try center.makeCheckToken(for: NotificationName("com.example.runtime.refresh"))
        defer {
            listener.cancel()
            reader.cancel()
            observer.cancel()
            withExtendedLifetime(token) {}
        }
        let names = try Self.uniqueNames(on: bus, of: getpid())
        #expect(names.count == 1, "one unique name for this process on the bus, got \(names)")
        #expect(try wormhole.notificationCenter().connection.uniqueName == center.connection.uniqueName)
        #expect(try defaults.notificationCenter().connection.uniqueName == center.connection.uniqueName)
    }

    @Test("every spelling of one bus's address finds the same connection")
    func spellingsShare() throws {
        let bus = try TestBus()
        let printed = try bus.printedAddress  // with guid=
        let path = bus.socketPath
        let spellings = [
            bus.address, printed,
            try BusAddress("unix:path=\(path),guid=\(printed.rawValue.split(separator: "=").last!)"),
        ]
        #expect(Set(spellings.map(\.sharingKey)).count == 1, "keys: \(spellings.map(\.sharingKey))")
        let centers = try spellings.map { try DarwinNotificationCenter(busAddress: $0) }
        #expect(Set(centers.map(\.connection.uniqueName)).count == 1)
        #expect(try Self.uniqueNames(on: bus, of: getpid()).count == 1)
        // Another bus is another connection.
        let other = try TestBus()
        #expect(other.address.sharingKey != bus.address.sharingKey)
        let elsewhere = try DarwinNotificationCenter(busAddress: other.address)
        #expect(elsewhere.connection.uniqueName != "")
        #expect(try Self.uniqueNames(on: other, of: getpid()).count == 1)
    }

    @Test("closing one facade ends its observers and streams; another facade's go on")
    func closingOneFacade() async throws {
        let bus = try TestBus()
        let name = NotificationName("com.example.runtime.close")
        let closing = try DarwinNotificationCenter(busAddress: bus.address)
        let staying = try DarwinNotificationCenter(busAddress: bus.address)
        let ended = try await closing.notifications(name: name)
        let (received, continuation) = AsyncStream<DarwinNotification>.makeStream()
        let observer = try staying.listen(name: name) { continuation.yield($0) }
        defer { observer.cancel() }
        closing.close()
        // The closed center's stream finishes (its route was removed with its scope)...
        try await within("the closed center's stream to finish") {
            for await _ in ended {}
        }
        #expect(throws: BusError.self) { try closing.post(name) }
        // ...while the other center, on the same connection, still observes and posts.
        try staying.post(name, state: 7)
        let note = try await within("the staying observer's post") {
            for await note in received { return note }
            throw TestFailure("the stream ended")
        }
        #expect(note.state == 7)
        #expect(staying.connection.isConnected)
    }

    @Test("the last facade's close closes the connection: its unique name leaves the bus")
    func lastCloseDisconnects() async throws {
        let bus = try TestBus()
        let center = try DarwinNotificationCenter(busAddress: bus.address)
        let unique = center.connection.uniqueName
        // A private connection of the test watches the name's owner go.
        let watcher = try BusConnection(address: bus.address)
        let rule = MatchRule(
            sender: "org.freedesktop.DBus", interface: try InterfaceName("org.freedesktop.DBus"),
            member: try MemberName("NameOwnerChanged"), arguments: [0: unique])
        let changes = try await watcher.signals(matching: rule)
        #expect(try Self.uniqueNames(on: bus, of: getpid()).contains(unique))
        center.close()
        let change = try await within("NameOwnerChanged for \(unique)") {
            for await signal in changes { return signal }
            throw TestFailure("the stream ended")
        }
        #expect(change.arguments.count == 3 && change.arguments[2] == .string(""), "\(unique) lost its owner")
        watcher.close()
    }

    /// This process's inotify instances (their descriptor numbers) and, for each, the inodes it
    /// watches (the `ino:` of the `inotify wd:` lines of its `/proc/self/fdinfo`).
    static func inotifyWatches() -> [String: [String]] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        var watches: [String: [String]] = [:]
        for entry in entries {
            var buffer = [UInt8](repeating: 0, count: 256)
            let length = readlink("/proc/self/fd/\(entry)", &buffer, buffer.count - 1)
            guard length > 0, String(decoding: buffer[..<length], as: UTF8.self).contains("inotify"),
                let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(entry)", encoding: .utf8)
            else { continue }
            watches[entry] = info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("ino:") }.map(String.init)
            }
        }
        return watches
    }

    /// `ino:<hex>` of the directory at `path`, as fdinfo spells it; nil when it does not exist.
    static func inode(of path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return "ino:" + String(UInt64(status.st_ino), radix: 16)
    }

    /// How many inotify watches this process holds on the directory at `path`: a directory of
    /// the test's own, so other tests' watches are not counted.
    static func watches(of path: String) -> Int {
        guard let inode = inode(of: path) else { return 0 }
        return inotifyWatches().values.reduce(0) { $0 + $1.filter { $0 == inode }.count }
    }

    /// The inotify instances of this process that watch any of `paths` (the test's own
    /// directories): what the test made, not the instances other tests of the process open.
    static func instances(watching paths: [String]) -> Set<String> {
        let inodes = Set(paths.compactMap(inode(of:)))
        return Set(inotifyWatches().filter { !inodes.isDisjoint(with: $0.value) }.keys)
    }

    @Test("a directory watch stays while one of its listeners is left, and stops with the last one")
    func watchFollowsItsLastListener() async throws {
        let root = try TemporaryDirectory("runtime-watch")
        let state = try TemporaryDirectory("runtime-watch-state")
        let group = "group.com.example.watch"
        let center = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root.path,
            busAddress: try BusAddress("unix:path=\(root.path)/no-bus-here"), sharedStateDirectory: state.path)
        let directory = root.path + "/\(group)/wormhole"
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let first = try center.listen(identifier: "a", as: JSONDocument.self) { _ in }
        let second = try center.listen(identifier: "b", as: JSONDocument.self) { delivery in
            if case .success(let message) = delivery.result { continuation.yield(message.compactText) }
        }
        #expect(Self.watches(of: directory) == 1)
        first.cancel()
        // The other listener still needs it, and is still woken through it.
        #expect(Self.watches(of: directory) == 1)
        _ = try center.passMessage(JSONDocument(data: Data("{\"n\":1}".utf8)), identifier: "b")
        let json = try await within("the message to b") {
            for await json in stream { return json }
            throw TestFailure("the stream ended")
        }
        #expect(json == "{\"n\":1}")
        second.cancel()
        #expect(Self.watches(of: directory) == 0)
    }

    @Test("twenty listeners without a bus, on twenty groups, wake through one inotify instance")
    func oneInotifyInstance() async throws {
        let root = try TemporaryDirectory("runtime-nobus")
        let state = try TemporaryDirectory("runtime-nobus-state")
        let missing = try BusAddress("unix:path=\(root.path)/no-bus-here")
        var listeners: [Subscription] = []
        var streams: [AsyncStream<String>] = []
        var centers: [MessageCenter] = []
        for index in 0..<20 {
            let center = try MessageCenter(
                applicationGroupIdentifier: GroupIdentifier("group.com.example.nobus\(index)"),
                containerRoot: root.path,
                busAddress: missing, sharedStateDirectory: state.path)
            let (stream, continuation) = AsyncStream<String>.makeStream()
            listeners.append(
                try center.listen(identifier: "inbox", as: JSONDocument.self) { delivery in
                    if case .success(let message) = delivery.result { continuation.yield(message.compactText) }
                })
            streams.append(stream)
            centers.append(center)
        }
        defer { for listener in listeners { listener.cancel() } }
        // The twenty directories are watched through one instance (the process's, which other
        // tests share; the instances some tests open of their own are not counted: they watch
        // no directory of this test).
        let directories = centers.indices.map { root.path + "/group.com.example.nobus\($0)/wormhole" }
        #expect(directories.allSatisfy { Self.watches(of: $0) == 1 }, "each directory watched once")
        #expect(Self.instances(watching: directories).count == 1)
        for (index, center) in centers.enumerated() {
            _ = try center.passMessage(JSONDocument(data: Data("{\"n\":\(index)}".utf8)), identifier: "inbox")
        }
        for (index, stream) in streams.enumerated() {
            let json = try await within("listener \(index)'s message") {
                for await json in stream { return json }
                throw TestFailure("the stream ended")
            }
            #expect(json == "{\"n\":\(index)}")
        }
        #expect(Self.instances(watching: directories).count == 1)
    }
}

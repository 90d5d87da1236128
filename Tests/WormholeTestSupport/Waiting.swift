// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
public import WormholeDBus
import WormholeSystem

/// A fresh directory from `mkdtemp` (mode 0700), removed with everything in it on release.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "test") throws {
        var template = Array("/tmp/wormhole-\(label)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        guard let made else { throw TestFailure("mkdtemp failed: errno \(errno)") }
        path = made
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Everything below the directory, as relative paths, sorted.
    public func contents() throws -> [String] {
        try FileManager.default.subpathsOfDirectory(atPath: path).sorted()
    }
}

/// How long any one wait in a test may take before the test fails instead of hanging.
public let waitGuardSeconds: Double = 10

/// Runs `body`; fails with a `TestFailure` when it has not finished after `seconds`.
/// A bounded guard against a hang, not a way to wait for an event: `body` waits for events.
public func within<T: Sendable>(
    _ what: String, seconds: Double = waitGuardSeconds, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TestFailure("timed out after \(seconds) s waiting for \(what)")
        }
        return value
    }
}

/// The next `count` elements of `sequence` (a new iteration that continues where the last ended).
public func next<S: AsyncSequence & Sendable>(
    _ count: Int, from sequence: S, _ what: String
) async throws -> [S.Element] where S.Element: Sendable, S.Failure == Never {
    try await within("\(count) \(what)") {
        var result: [S.Element] = []
        if count == 0 { return result }
        for await element in sequence {
            result.append(element)
            if result.count == count { break }
        }
        if result.count < count { throw TestFailure("\(what) ended after \(result.count) of \(count)") }
        return result
    }
}

/// Runs `body` in a task of its own and returns its result, or throws after `seconds` without
/// waiting for a body that never returns (a task group would wait for it): for tests of calls
/// that used to hang.
public func race<T: Sendable>(
    _ what: String, seconds: Double = waitGuardSeconds, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let once = FirstOutcome<T>()
    let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>?, Never>) in
        once.set(continuation)
        Task {
            do { once.resume(.success(try await body())) } catch { once.resume(.failure(error)) }
        }
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            once.resume(nil)
        }
    }
    guard let result else { throw TestFailure("still waiting for \(what) after \(seconds) s") }
    return try result.get()
}

/// A continuation resumed by whichever outcome comes first.
final class FirstOutcome<T: Sendable>: Sendable {
    private let continuation = Locked<CheckedContinuation<Result<T, any Error>?, Never>?>(nil)
    func set(_ value: CheckedContinuation<Result<T, any Error>?, Never>) { continuation.withLock { $0 = value } }
    func resume(_ value: Result<T, any Error>?) { continuation.withLock { $0.take() }?.resume(returning: value) }
}

/// Calls `gained(name, owner)` for every well-known name below `prefix` (`prefix.` + more) that a
/// connection comes to own, from the bus daemon's `NameOwnerChanged`, on `watcher`'s I/O thread
/// (so in the order the bus delivered it among the watcher's other routes). Active on return.
public func watchOwners(
    below prefix: String, on watcher: BusConnection,
    _ gained: @escaping @Sendable (_ name: String, _ owner: String) -> Void
) async throws {
    let owners = MatchRule(
        sender: "org.freedesktop.DBus", interface: try InterfaceName("org.freedesktop.DBus"),
        member: try MemberName("NameOwnerChanged"))
    _ = try await watcher.addRoute([owners]) { signal in
        guard case .string(let name)? = signal.arguments.first, name.hasPrefix(prefix + "."),
            case .string(let owner)? = signal.arguments.last, !owner.isEmpty
        else { return }
        gained(name, owner)
    }
}

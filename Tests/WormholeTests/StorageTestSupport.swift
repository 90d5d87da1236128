// SPDX-License-Identifier: Apache-2.0
// Helpers for the storage tests: fresh temporary directories, file inspection, the test peer.

import Foundation
import Glibc
import Testing
import Wormhole

/// A fresh directory from `mkdtemp`, removed (with everything in it) by `remove()`.
struct StorageTempDirectory {
    let path: String

    init() throws {
        let base = NSTemporaryDirectory().hasSuffix("/") ? NSTemporaryDirectory() : NSTemporaryDirectory() + "/"
        var template = Array((base + "wormhole-storage-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        guard let made else {
            throw StorageTestFailure("mkdtemp failed: errno \(errno)")
        }
        path = made
    }

    func child(_ components: String...) -> String {
        ([path] + components).joined(separator: "/")
    }

    /// Everything below the directory, as relative paths, sorted.
    func contents() throws -> [String] {
        try FileManager.default.subpathsOfDirectory(atPath: path).sorted()
    }

    func remove() {
        _ = try? FileManager.default.removeItem(atPath: path)
    }
}

struct StorageTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `lstat` of `path`: its type, mode, owner and modification time, without following a symlink.
struct StorageFileStatus: Equatable {
    var type: mode_t
    var permissions: mode_t
    var owner: uid_t
    var modificationSeconds: Int
    var modificationNanoseconds: Int

    init(_ path: String) throws {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            throw StorageTestFailure("lstat '\(path)' failed: errno \(errno)")
        }
        type = status.st_mode & 0o170000
        permissions = status.st_mode & 0o7777
        owner = status.st_uid
        modificationSeconds = status.st_mtim.tv_sec
        modificationNanoseconds = status.st_mtim.tv_nsec
    }

    static func permissions(_ path: String) throws -> mode_t { try StorageFileStatus(path).permissions }
}

/// The `wormhole-test-peer` executable, looked up next to the test binary and in the folders above
/// it (`swift test` builds it with everything else, in the same build folder).
enum StoragePeer {
    static let executableName = "wormhole-test-peer"

    static func executable() throws -> String {
        var starts: [URL] = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()]
        starts.append(Bundle.main.bundleURL)
        if let url = Bundle.main.executableURL { starts.append(url) }
        var searched: [String] = []
        for start in starts {
            var folder = start.deletingLastPathComponent()
            while true {
                for candidate in [folder.path + "/" + executableName, folder.path + "/debug/" + executableName] {
                    searched.append(candidate)
                    if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                }
                let parent = folder.deletingLastPathComponent()
                if parent.path == folder.path { break }
                folder = parent
            }
        }
        throw StorageTestFailure(
            "\(executableName) not found next to the test binary "
                + "(searched \(searched.prefix(6).joined(separator: ", ")), …); "
                + "build it with `swift build --product \(executableName)` in the same build folder")
    }

    /// Starts the peer with `arguments`; standard output and error are inherited, or standard output
    /// goes to `standardOutput` when given.
    static func spawn(_ executable: String, _ arguments: [String], standardOutput: Int32? = nil) throws -> pid_t {
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardOutput {
            posix_spawn_file_actions_adddup2(&actions, standardOutput, STDOUT_FILENO)
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard result == 0 else {
            throw StorageTestFailure("posix_spawn '\(executable)' failed: errno \(result)")
        }
        return pid
    }

    /// Starts the peer with its standard output on a pipe and returns once it has written its first
    /// line (`ready`), or has exited without writing one.
    static func spawnAndWaitForReady(_ executable: String, _ arguments: [String]) throws -> pid_t {
        var ends: [Int32] = [0, 0]
        // pipe2 is not imported; set close-on-exec right away so that no other child inherits the pipe.
        guard pipe(&ends) == 0 else { throw StorageTestFailure("pipe failed: errno \(errno)") }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        defer { close(ends[0]) }
        let pid: pid_t
        do {
            defer { close(ends[1]) }
            pid = try spawn(executable, arguments, standardOutput: ends[1])
        }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while byte != UInt8(ascii: "\n") {
            let count = read(ends[0], &byte, 1)
            if count == 1 {
                line.append(byte)
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        guard line == Array("ready\n".utf8) else {
            throw StorageTestFailure("peer \(arguments.first ?? "") did not print 'ready' (got \(line.count) bytes)")
        }
        return pid
    }

    /// How a child ended.
    enum Ending: Equatable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        var description: String {
            switch self {
            case .exited(let code): "exited with status \(code)"
            case .signalled(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// Waits for the child `pid` to end.
    static func wait(_ pid: pid_t) throws -> Ending {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw StorageTestFailure("waitpid \(pid) failed: errno \(errno)") }
        }
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
    }

    /// Runs the peer to completion.
    static func run(_ executable: String, _ arguments: [String]) throws -> Ending {
        try wait(spawn(executable, arguments))
    }
}

/// A copy of the test peer's `TortureDocument` (the peer is an executable, which tests cannot import):
/// `{"seq":N,"size":S,"pad":"ccc…"}` with the pad's length and letter derived from N and S.
enum StorageTortureDocument {
    static func make(sequence: Int, size: Int) -> Data {
        let letter = UInt8(ascii: "a") + UInt8(sequence % 26)
        // Data(repeating:count:) is one memset, fast even in a debug build.
        var document = Data(#"{"seq":\#(sequence),"size":\#(size),"pad":""#.utf8)
        document.append(Data(repeating: letter, count: size + sequence % 1024))
        document.append(contentsOf: #""}"#.utf8)
        return document
    }

    /// The document's size parameter when `data` is a complete, valid document; otherwise nil.
    static func validSize(_ data: Data) -> Int? {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let sequence = object["seq"] as? Int, let size = object["size"] as? Int, sequence >= 0, size >= 0,
            make(sequence: sequence, size: size) == data
        else { return nil }
        return size
    }
}

/// The two transitings, for tests that must hold for both.
enum StorageTransitingKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case file
    case coordinated

    var testDescription: String { rawValue }

    func make(
        _ container: GroupContainer, directory: WormholeDirectoryName = .default,
        durability: FileTransiting.Durability = .atomic
    ) -> any WormholeTransiting {
        switch self {
        case .file: FileTransiting(container: container, directory: directory, durability: durability)
        case .coordinated:
            CoordinatedFileTransiting(container: container, directory: directory, durability: durability)
        }
    }
}

/// For tests: a message identifier known to be valid.
func storageIdentifier(_ string: String) -> MessageIdentifier {
    try! MessageIdentifier(string)
}

/// For tests: a group identifier known to be valid.
func storageGroup(_ string: String) -> GroupIdentifier {
    try! GroupIdentifier(string)
}

/// Runs each body on its own thread and returns when all have returned.
func storageRunOnThreads(_ bodies: [@Sendable () -> Void]) {
    let done = DispatchSemaphore(value: 0)
    for body in bodies {
        Thread {
            body()
            done.signal()
        }.start()
    }
    for _ in bodies { done.wait() }
}

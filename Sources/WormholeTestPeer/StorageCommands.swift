// SPDX-License-Identifier: Apache-2.0
import Foundation
import Wormhole

/// Commands that exercise group containers and message storage.
///
/// - `write-loop ROOT GROUP IDENTIFIER SIZE [file|coordinated]`: writes self-checking documents of
///   about SIZE bytes to IDENTIFIER, forever (tests kill it), and prints `ready` on standard output
///   after the first one.
/// - `read-check ROOT GROUP IDENTIFIER [file|coordinated]`: reads once; exits 0 when no message is
///   stored or it is a complete, valid document, 1 otherwise.
/// - `increment ROOT GROUP IDENTIFIER COUNT`: adds 1 to the counter document `{"count":N}` COUNT times,
///   each a read-modify-write under the coordinated lock.
/// - `write-limited ROOT GROUP IDENTIFIER SIZE LIMIT`: writes one document of about SIZE bytes with
///   the process's file-size limit (`RLIMIT_FSIZE`) set to LIMIT bytes, so that the write fails midway;
///   exits 1 with the error when it fails (the test then checks nothing partial was left).
let storageCommands: [String: @Sendable ([String]) throws -> Void] = [
    "write-loop": writeLoop,
    "read-check": readCheck,
    "increment": increment,
    "write-limited": writeLimited,
]

struct StorageCommandError: Error, CustomStringConvertible {
    var description: String
}

/// The transiting named by the optional last argument (`file`, the default, or `coordinated`).
private func transiting(_ arguments: [String], kindAt index: Int) throws -> any WormholeTransiting {
    let container = try GroupContainer(group: GroupIdentifier(arguments[1]), root: arguments[0])
    let kind = arguments.count > index ? arguments[index] : "file"
    switch kind {
    case "file": return FileTransiting(container: container)
    case "coordinated": return CoordinatedFileTransiting(container: container)
    default: throw StorageCommandError(description: "unknown transiting '\(kind)' (expected file or coordinated)")
    }
}

private func writeLoop(_ arguments: [String]) throws {
    guard arguments.count == 4 || arguments.count == 5, let size = Int(arguments[3]), size >= 0 else {
        throw StorageCommandError(description: "usage: write-loop ROOT GROUP IDENTIFIER SIZE [file|coordinated]")
    }
    let store = try transiting(arguments, kindAt: 4)
    let identifier = try MessageIdentifier(arguments[2])
    var sequence = 0
    while true {
        try store.writeMessage(TortureDocument.make(sequence: sequence, size: size), identifier: identifier)
        if sequence == 0 {
            // Tests wait for this line, so that their random kill instants fall in the steady writing,
            // not in the process start-up (which takes longer than a write on a loaded machine).
            FileHandle.standardOutput.write(Data("ready\n".utf8))
        }
        sequence += 1
    }
}

private func readCheck(_ arguments: [String]) throws {
    guard arguments.count == 3 || arguments.count == 4 else {
        throw StorageCommandError(description: "usage: read-check ROOT GROUP IDENTIFIER [file|coordinated]")
    }
    let store = try transiting(arguments, kindAt: 3)
    guard let data = try store.messageData(identifier: MessageIdentifier(arguments[2])) else { return }
    if let problem = TortureDocument.problem(in: data) {
        throw StorageCommandError(description: "stored document is not valid: \(problem)")
    }
}

private func increment(_ arguments: [String]) throws {
    guard arguments.count == 4, let count = Int(arguments[3]), count >= 0 else {
        throw StorageCommandError(description: "usage: increment ROOT GROUP IDENTIFIER COUNT")
    }
    let container = try GroupContainer(group: GroupIdentifier(arguments[1]), root: arguments[0])
    let store = CoordinatedFileTransiting(container: container)
    let identifier = try MessageIdentifier(arguments[2])
    for _ in 0..<count {
        try store.updateMessage(identifier: identifier) { old in
            var value = 0
            if let old {
                guard let object = try JSONSerialization.jsonObject(with: old) as? [String: Any],
                    let stored = object["count"] as? Int
                else {
                    throw StorageCommandError(description: "counter document is not {\"count\":N}")
                }
                value = stored
            }
            return Data(#"{"count":\#(value + 1)}"#.utf8)
        }
    }
}

private func writeLimited(_ arguments: [String]) throws {
    guard arguments.count == 5, let size = Int(arguments[3]), size >= 0, let limit = rlim_t(arguments[4]) else {
        throw StorageCommandError(description: "usage: write-limited ROOT GROUP IDENTIFIER SIZE LIMIT")
    }
    let store = try transiting(arguments, kindAt: 5)
    let identifier = try MessageIdentifier(arguments[2])
    // Without this, exceeding the limit kills the process with SIGXFSZ; ignored, write fails with EFBIG.
    signal(SIGXFSZ, SIG_IGN)
    var limits = rlimit(rlim_cur: limit, rlim_max: limit)
    guard setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limits) == 0 else {
        throw StorageCommandError(description: "setrlimit(RLIMIT_FSIZE, \(limit)) failed: errno \(errno)")
    }
    try store.writeMessage(TortureDocument.make(sequence: 1, size: size), identifier: identifier)
}

/// The documents `write-loop` writes: `{"seq":N,"size":S,"pad":"ccc…"}`, where the pad's length
/// (S + N % 1024) and letter (the N % 26th) follow from N and S, so a document checks itself: a
/// truncated file, or a mix of two documents, does not match the document rebuilt from its N and S.
/// (The storage tests carry a copy of this enum: the two must stay the same.)
enum TortureDocument {
    static func make(sequence: Int, size: Int) -> Data {
        let letter = UInt8(ascii: "a") + UInt8(sequence % 26)
        // Data(repeating:count:) is one memset, fast even in a debug build.
        var document = Data(#"{"seq":\#(sequence),"size":\#(size),"pad":""#.utf8)
        document.append(Data(repeating: letter, count: size + sequence % 1024))
        document.append(contentsOf: #""}"#.utf8)
        return document
    }

    /// Nil when `data` is a complete, valid document; otherwise what is wrong with it.
    static func problem(in data: Data) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            return "not a JSON object (\(data.count) bytes)"
        }
        guard let sequence = object["seq"] as? Int, let size = object["size"] as? Int, sequence >= 0, size >= 0
        else {
            return "no seq or size (\(data.count) bytes)"
        }
        if make(sequence: sequence, size: size) != data {
            return "document \(sequence) does not match its rebuilt form (\(data.count) bytes)"
        }
        return nil
    }
}

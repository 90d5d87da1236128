// SPDX-License-Identifier: Apache-2.0
// The share extension of scenario 4 (see Examples/ShareHandoff/Shared): started by the desktop
// with the shared files, it hands them to the host app and exits.
//
//   share-handoff [--group GROUP] [--bus-address ADDRESS] [--action ACTION] FILE...
//
// Without --action it uses the first action the host app enabled. Exit 0 once every item is
// copied and in the journal (one line per item on standard output), 1 when the action is not
// enabled or something fails (nothing handed over), 64 on a usage error.
import Foundation
import Glibc
import ShareHandoffShared
import Wormhole

func fail(_ message: String, status: Int32 = 1) -> Never {
    say("share-handoff: \(message)", to: .standardError)
    exit(status)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var settings: [String: String] = [:]
while let first = arguments.first, first.hasPrefix("--") {
    guard ["--group", "--bus-address", "--action"].contains(first), arguments.count >= 2 else {
        fail("usage: share-handoff [--group GROUP] [--bus-address ADDRESS] [--action ACTION] FILE...", status: 64)
    }
    settings[first] = arguments[1]
    arguments.removeFirst(2)
}
let files = arguments
if files.isEmpty {
    fail("usage: share-handoff [--group GROUP] [--bus-address ADDRESS] [--action ACTION] FILE...", status: 64)
}

do {
    let group = try ShareGroup(group: settings["--group"], busAddress: settings["--bus-address"])

    // Only what the host app enabled; a refusal says what is enabled and how to change it.
    let enabled = group.enabledActions
    guard let first = enabled.first else {
        fail("the host app has no share action enabled; enable one with: share-host --actions messenger,disk")
    }
    let action: ShareAction
    if let name = settings["--action"] {
        guard let chosen = ShareAction(rawValue: name) else {
            fail(
                "unknown action '\(name)' (the modules are \(ShareAction.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        guard enabled.contains(chosen) else {
            fail(
                "the action '\(name)' is not enabled by the host app (enabled: \(enabled.map(\.rawValue).joined(separator: ", "))); "
                    + "nothing was shared. Enable it with: share-host --actions \((enabled + [chosen]).map(\.rawValue).joined(separator: ","))"
            )
        }
        action = chosen
    } else {
        action = first
    }

    // Every file readable before anything is written: all of them are handed over, or none.
    let contents = try files.map { file -> Data in
        var status = stat()
        guard stat(file, &status) == 0 else {
            throw ShareError("cannot share '\(file)': \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw ShareError("cannot share '\(file)': not a regular file") }
        guard let data = FileManager.default.contents(atPath: file) else { throw ShareError("cannot read '\(file)'") }
        return data
    }

    // Each copy is written to a temporary file and renamed: the host app sees a whole file or none.
    var shares: [Share] = []
    for (file, data) in zip(files, contents) {
        let name = (file as NSString).lastPathComponent
        let path = "\(group.sharedDirectory)/\(UUID().uuidString.prefix(8).lowercased())-\(name)"
        let temporary = "\(group.sharedDirectory)/.\(getpid()).\(shares.count).tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else {
            throw ShareError("cannot write \(temporary): \(String(cString: strerror(errno)))")
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw ShareError("cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))")
        }
        shares.append(
            Share(type: mimeType(ofFileNamed: name), action: action, path: path, name: name, bytes: data.count))
    }

    // One append for all the items: in the journal together, in order, or not at all.
    let sequences = try group.journal.append(contentsOf: shares)
    if ProcessInfo.processInfo.environment["SHARE_HANDOFF_KILL_AFTER_WRITE"] == "1" {
        // For the tests: killed right after the write, before the wake-up reaches the bus.
        kill(getpid(), SIGKILL)
    }
    if let error = group.journal.flush() {
        // The items are in the journal; the host app reads them when it next wakes or starts.
        say("share-handoff: handed over, but the host app was not woken: \(error)", to: .standardError)
    }
    for (sequence, share) in zip(sequences, shares) {
        say("shared \(sequence): \(share.name) (\(share.type), \(share.bytes) bytes) to \(share.action.rawValue)")
    }
    exit(0)
} catch {
    fail("\(error)")
}

// SPDX-License-Identifier: Apache-2.0
// The host app of scenario 4 (see Examples/ShareHandoff/Shared): shows every item handed over by
// `share-handoff`, in order, including those shared while it was closed.
//
//   share-host [--group GROUP] [--bus-address ADDRESS] [--actions LIST]
//
// --actions (comma-separated: messenger, disk, preview, buffer) stores the actions its share
// extension offers. It prints the enabled actions, then `ready` on standard error once it reads
// the journal, then one line per share; it exits when standard input ends.
import Foundation
import Glibc
import ShareHandoffShared
import Wormhole

let arguments = CommandLine.arguments
do {
    let group = try ShareGroup(
        group: option("--group", in: arguments), busAddress: option("--bus-address", in: arguments))
    if let list = option("--actions", in: arguments) {
        try group.defaults.set(try ShareAction.parse(list).map(\.rawValue), for: .shareActions)
    }
    say("share-host: actions \(group.enabledActions.map(\.rawValue).joined(separator: ", "))")

    // A hand-off killed while copying leaves its temporary file `.PID.N.tmp`: removed once its
    // process is gone (the share itself was never appended, so nothing refers to it).
    for name in (try? FileManager.default.contentsOfDirectory(atPath: group.sharedDirectory)) ?? [] {
        let parts = name.split(separator: ".")
        guard name.hasPrefix("."), parts.count == 3, parts[2] == "tmp", let pid = Int32(parts[0]) else { continue }
        if kill(pid, 0) != 0 && errno == ESRCH {
            unlink("\(group.sharedDirectory)/\(name)")
            say("share-host: removed \(name), left by a hand-off that was killed while copying")
        }
    }

    // A durable consumer: its cursor is stored in the journal directory, so a share made while
    // this app was closed is shown when it starts, and none is shown twice (unless it was being
    // shown when the app was killed: then it is marked "again").
    let listener = try group.journal.listen(from: .beginning, consumer: "host", as: Share.self) { result in
        switch result {
        case .success(let record):
            let share = record.message
            let size = (try? FileManager.default.attributesOfItem(atPath: share.path)[.size] as? Int) ?? nil
            let found =
                size == share.bytes
                ? "\(share.bytes) bytes" : "MISSING or wrong size (\(size.map(String.init) ?? "absent"))"
            say(
                "share-host: share \(record.sequence): \(share.name) (\(share.type), \(found)): \(share.action.verb)"
                    + (record.isRedelivery ? " (again)" : ""))
        case .failure(let error):
            say("share-host: error: \(error)")
        }
    }
    say("ready", to: .standardError)
    let reader = Thread {
        while readLine() != nil {}
        withExtendedLifetime(listener) { exit(0) }
    }
    reader.start()
    dispatchMain()
} catch {
    say("share-host: \(error)", to: .standardError)
    exit(1)
}

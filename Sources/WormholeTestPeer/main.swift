// SPDX-License-Identifier: Apache-2.0
// A peer process for cross-process tests. `wormhole-test-peer COMMAND ARGS...`;
// each command lives in the file of the layer it exercises.
import Foundation
import Synchronization

/// One line on standard error. A line that cannot be written is dropped, never a crash: a peer
/// under a file-size limit (`write-limited`) whose standard error is a test log larger than the
/// limit gets `EFBIG` here (FileHandle's `write` traps on it).
func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { return }
        offset += written
    }
}

let commands = dbusCommands.merging(storageCommands) { first, _ in first }
    .merging(messagingCommands) { first, _ in first }.merging(defaultsCommands) { first, _ in first }
    .merging(journalCommands) { first, _ in first }.merging(exitCommands) { first, _ in first }
    .merging(flowCommands) { first, _ in first }.merging(stormCommands) { first, _ in first }
    .merging(doorbellCommands) { first, _ in first }
let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let command = commands[name] else {
    let known = commands.keys.sorted().joined(separator: ", ")
    printError("usage: wormhole-test-peer COMMAND ARGS... (commands: \(known))")
    exit(64)
}
do {
    try command(Array(arguments.dropFirst()))
} catch {
    printError("wormhole-test-peer \(name): \(error)")
    exit(1)
}
// `send-once … return` ends by returning from `main`; every other command calls exit(0).
if !returnFromMain.load(ordering: .relaxed) { exit(0) }

// A peer process for cross-process tests. `wormhole-test-peer COMMAND ARGS...`;
// each command lives in the file of the layer it exercises.
import Foundation
import Synchronization

func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
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

// A peer process for cross-process tests. `wormhole-test-peer COMMAND ARGS...`;
// each command lives in the file of the layer it exercises.
import Foundation

func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

let commands = dbusCommands.merging(storageCommands) { first, _ in first }
    .merging(messagingCommands) { first, _ in first }.merging(defaultsCommands) { first, _ in first }
    .merging(journalCommands) { first, _ in first }
let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let command = commands[name] else {
    let known = commands.keys.sorted().joined(separator: ", ")
    printError("usage: wormhole-test-peer COMMAND ARGS... (commands: \(known))")
    exit(64)
}
do {
    try command(Array(arguments.dropFirst()))
    exit(0)
} catch {
    printError("wormhole-test-peer \(name): \(error)")
    exit(1)
}

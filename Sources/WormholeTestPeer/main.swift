// A peer process for cross-process tests. `wormhole-test-peer COMMAND ARGS...`;
// each command lives in the file of the layer it exercises.
#if canImport(Glibc)
    import Glibc
#endif

let commands = dbusCommands.merging(storageCommands) { first, _ in first }
let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let command = commands[name] else {
    let known = commands.keys.sorted().joined(separator: ", ")
    fputs("usage: wormhole-test-peer COMMAND ARGS... (commands: \(known))\n", stderr)
    exit(64)
}
do {
    try command(Array(arguments.dropFirst()))
    exit(0)
} catch {
    fputs("wormhole-test-peer \(name): \(error)\n", stderr)
    exit(1)
}

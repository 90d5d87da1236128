import ArgumentParser
import FoundationEssentials
import Glibc

/// `wormholectl bench …`: runs `wormhole-bench`, built next to this executable, with the same
/// arguments. The benchmark is its own executable so the user tool does not link its
/// dependencies (HdrHistogram).
struct BenchLauncher: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure latency and post rate against the raw libdbus floor (runs wormhole-bench).",
        discussion: "Every argument goes to wormhole-bench; see `wormholectl bench --help`.")

    @Argument(parsing: .captureForPassthrough, help: "Arguments for wormhole-bench.")
    var arguments: [String] = []

    func run() throws {
        try Self.execute(arguments)
    }

    /// The path of `wormhole-bench` next to this executable.
    static var benchPath: String {
        let this =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: this).deletingLastPathComponent().appendingPathComponent("wormhole-bench").path
    }

    /// Replaces this process with `wormhole-bench arguments…`; returns only by throwing.
    static func execute(_ arguments: [String]) throws -> Never {
        let path = benchPath
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw CLIFailure(
                message:
                    "the benchmark is not built: no executable at \(path) "
                    + "(run `swift build -c release` in the repository)"
            )
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        execv(path, argv)
        let reason = String(cString: strerror(errno))
        for pointer in argv { free(pointer) }
        throw CLIFailure(message: "cannot run \(path): \(reason)")
    }
}

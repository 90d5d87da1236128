import Foundation

/// Where the bench finds itself, the programs built next to it, and the bus configuration.
enum Executables {
    /// This executable's path (`wormhole-bench`, which also runs the hidden helpers).
    static var current: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// An executable built next to this one (`wormhole`, `wormhole-floor`).
    static func sibling(_ name: String) throws -> String {
        let path = URL(fileURLWithPath: current).deletingLastPathComponent().appendingPathComponent(name).path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchFailure("\(name) is not built at \(path) (run `swift build`, or `swift build -c release`)")
        }
        return path
    }

    /// The bus configuration: `path` when it exists; when it does not and it is the default
    /// relative path, the first `dbus/wormhole-session.conf` found walking up from this
    /// executable's directory (`.build/release/` lies inside the repository).
    static func busConfiguration(_ path: String, isDefault: Bool) throws -> String {
        if FileManager.default.fileExists(atPath: path) { return path }
        if isDefault {
            var directory = URL(fileURLWithPath: current).deletingLastPathComponent()
            while directory.path != "/" {
                let candidate = directory.appendingPathComponent(path).path
                if FileManager.default.fileExists(atPath: candidate) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw BenchFailure(
            "bus configuration '\(path)' not found"
                + (isDefault ? " here or above \(URL(fileURLWithPath: current).deletingLastPathComponent().path)" : "")
                + " (pass --config or --bus-address)")
    }
}

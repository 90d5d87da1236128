import Foundation

/// Where the bench finds itself, the programs built next to it, and the bus configuration.
enum Executables {
    /// This executable's path (`wormhole-bench`, which also runs the hidden helpers).
    static var current: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// An executable built next to this one (`wormholectl`, `wormhole-floor`).
    static func sibling(_ name: String) throws -> String {
        let path = URL(fileURLWithPath: current).deletingLastPathComponent().appendingPathComponent(name).path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchFailure("\(name) is not built at \(path) (run `swift build`, or `swift build -c release`)")
        }
        return path
    }

    /// The bus configuration: `path` when it exists. When it does not and it is the default
    /// relative path, the first of: `dbus/wormhole-session.conf` walking up from this
    /// executable's directory (`.build/release/` lies inside the repository); beside an
    /// installed executable, `PREFIX/share/wormhole/wormhole-session.conf` for `PREFIX/bin`;
    /// `/usr/local/share/wormhole/…`, `/usr/share/wormhole/…`.
    static func busConfiguration(_ path: String, isDefault: Bool) throws -> String {
        if FileManager.default.fileExists(atPath: path) { return path }
        guard isDefault else {
            throw BenchFailure("bus configuration '\(path)' not found (pass --config FILE or --bus-address)")
        }
        let executableDirectory = URL(fileURLWithPath: current).deletingLastPathComponent()
        var candidates: [String] = []
        var directory = executableDirectory
        while directory.path != "/" {
            candidates.append(directory.appendingPathComponent(path).path)
            directory = directory.deletingLastPathComponent()
        }
        let installed = "share/wormhole/" + URL(fileURLWithPath: path).lastPathComponent
        candidates.append(executableDirectory.deletingLastPathComponent().appendingPathComponent(installed).path)
        candidates += ["/usr/local/" + installed, "/usr/" + installed]
        if let found = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) { return found }
        throw BenchFailure(
            "bus configuration '\(path)' not found here, above \(executableDirectory.path), nor in "
                + "\(executableDirectory.deletingLastPathComponent().appendingPathComponent(installed).path), "
                + "/usr/local/\(installed) or /usr/\(installed) (pass --config FILE or --bus-address)")
    }
}

import WormholeDBus

/// A private dbus-daemon for the benchmark, listening on a socket in a scratch directory;
/// stopped (and the directory removed) when released.
final class PrivateDaemon {
    let address: BusAddress
    /// The configuration file it was started from.
    let config: String
    private let process: ChildProcess
    private let directory: ScratchDirectory

    /// Starts the daemon from the configuration file `config`; returns once it listens.
    init(config: String) throws {
        self.config = config
        directory = try ScratchDirectory("bus")
        let socket = directory.path + "/bus"
        process = try ChildProcess(
            executable: "/usr/bin/env",
            arguments: [
                "dbus-daemon", "--config-file=\(config)", "--nofork", "--print-address",
                "--address=unix:path=\(socket)",
            ])
        // dbus-daemon prints its address once it listens.
        let line = try process.output.readLine(timeoutSeconds: 60).map { String(decoding: $0, as: UTF8.self) } ?? ""
        guard line.hasPrefix("unix:") else {
            throw BenchFailure("dbus-daemon did not start (is the dbus-daemon package installed?): \(line)")
        }
        address = try BusAddress("unix:path=\(socket)")
    }

    deinit {
        process.terminate()
    }
}

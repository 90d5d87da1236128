// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Wormhole

/// What `--json` says about the machine a run was measured on, so that two runs compared by a
/// script (`Tests/bench-compare.sh`) show whether they come from the same kind of machine.
/// Every field is read once at the end of the run; a field that cannot be read is `"unknown"`.
struct MachineDescription: Encodable {
    /// Processors online (`sysconf(_SC_NPROCESSORS_ONLN)`).
    var cores: Int
    /// The first `model name` of `/proc/cpuinfo`.
    var cpu: String
    /// `MemTotal` of `/proc/meminfo`, in MiB.
    var memoryMiB: Int?
    /// `uname -r`.
    var kernel: String
    /// `PRETTY_NAME` of `/etc/os-release`.
    var system: String
    /// The Swift compiler the bench was built with.
    var swift: String
    /// The bus daemon's name and version (`dbus-daemon --version`, `dbus-broker --version`), or
    /// that the run used a bus it was given (`--bus-address`).
    var busDaemon: String
    /// `wormhole-bench --version`.
    var wormhole: String

    static func current(daemon: BusDaemonKind?) -> MachineDescription {
        MachineDescription(
            cores: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), cpu: field("/proc/cpuinfo", "model name", separator: ":"),
            memoryMiB: Int(field("/proc/meminfo", "MemTotal", separator: ":").split(separator: " ").first ?? "")
                .map { $0 / 1024 },
            kernel: kernelRelease(), system: field("/etc/os-release", "PRETTY_NAME", separator: "="),
            swift: compilerVersion, busDaemon: daemon.map(daemonVersion) ?? "a bus given with --bus-address",
            wormhole: WormholeVersion.description)
    }

    /// The value of the first line `KEY<separator>value` of `path`, trimmed and unquoted.
    private static func field(_ path: String, _ key: String, separator: Character) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "unknown" }
        for line in text.split(separator: "\n") {
            guard let index = line.firstIndex(of: separator),
                line[..<index].trimmingCharacters(in: .whitespaces) == key
            else { continue }
            return line[line.index(after: index)...].trimmingCharacters(in: .whitespaces)
                .trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        return "unknown"
    }

    private static func kernelRelease() -> String {
        var names = utsname()
        guard uname(&names) == 0 else { return "unknown" }
        return withUnsafeBytes(of: &names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// The first line `--version` prints for the daemon the bench started.
    private static func daemonVersion(_ kind: BusDaemonKind) -> String {
        let executable = kind == .broker ? "dbus-broker" : "dbus-daemon"
        let process = Process()
        let pipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable, "--version"]
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return executable + " (version unknown)" }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let first = String(decoding: data, as: UTF8.self).split(separator: "\n").first.map(String.init)
        return first ?? executable + " (version unknown)"
    }

    /// The compiler version, as far as `#if compiler` tells it.
    private static var compilerVersion: String {
        #if compiler(>=6.5)
            "Swift 6.5 or later"
        #elseif compiler(>=6.4)
            "Swift 6.4"
        #elseif compiler(>=6.3)
            "Swift 6.3"
        #elseif compiler(>=6.2)
            "Swift 6.2"
        #else
            "Swift 6.1"
        #endif
    }
}

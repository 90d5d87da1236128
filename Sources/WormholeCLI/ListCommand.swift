import ArgumentParser
import FoundationEssentials
import Glibc
import Wormhole

/// `wormholectl list --group G [--directory D] [--json]`: the stored messages of a wormhole.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the identifiers with a stored message, with their sizes and ages.",
        discussion: """
            One line per identifier, sorted: identifier, size in bytes, age. With --json, one JSON \
            object per line instead: {"identifier":"ID","bytes":N,"modifiedAt":T} (T in ns since 1970). \
            An empty wormhole prints nothing; a group container or directory that does not exist is \
            an error that says which, and suggests the nearest existing one.
            """)

    @Flag(help: "One JSON object per line.")
    var json = false

    @OptionGroup var options: WormholeOptions

    func run() throws {
        let wormhole = try options.wormhole()
        if let missing = absence(in: wormhole) { throw CLIFailure(message: missing) }
        let identifiers = try withCLIErrors { try wormhole.transiting.storedIdentifiers() }
        let directory = wormhole.container.directoryPath(wormhole.directory)
        let now = Date().timeIntervalSince1970
        var rows: [(identifier: String, bytes: Int64, modifiedAt: UInt64)] = []
        for identifier in identifiers {
            var info = stat()
            // A message removed since the listing is simply not shown.
            guard lstat(directory + "/" + identifier.rawValue + ".json", &info) == 0 else { continue }
            let modified = UInt64(max(0, info.st_mtim.tv_sec)) * 1_000_000_000 + UInt64(max(0, info.st_mtim.tv_nsec))
            rows.append((identifier.rawValue, Int64(info.st_size), modified))
        }
        if json {
            for row in rows {
                var line = JSONLine(bytes: [])
                line.raw(#"{"identifier":"#)
                line.string(row.identifier)
                line.raw(#","bytes":"#)
                line.number(UInt64(max(0, row.bytes)))
                line.raw(#","modifiedAt":"#)
                line.number(row.modifiedAt)
                line.raw("}")
                writeOutput(String(decoding: line.bytes, as: UTF8.self))
            }
            return
        }
        let width = rows.map(\.identifier.count).max() ?? 0
        let sizeWidth = rows.map { "\($0.bytes)".count }.max() ?? 0
        for row in rows {
            let size = String(repeating: " ", count: sizeWidth - "\(row.bytes)".count) + "\(row.bytes)"
            let age = Self.age(seconds: now - Double(row.modifiedAt) / 1e9)
            let padding = String(repeating: " ", count: width - row.identifier.count)
            writeOutput(row.identifier + padding + "  \(size) B  \(age)")
        }
    }

    /// A short age: `12 s`, `5 min`, `3 h`, `2 d` (a file from the future is `0 s`).
    static func age(seconds: Double) -> String {
        let s = Int(max(0, seconds))
        if s < 120 { return "\(s) s" }
        if s < 7200 { return "\(s / 60) min" }
        if s < 172_800 { return "\(s / 3600) h" }
        return "\(s / 86400) d"
    }
}

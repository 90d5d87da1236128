// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FoundationEssentials
import Glibc
import Wormhole

/// `--group`, `--directory` and `--max-size`, taken by `send`, `read` and `listen`: the wormhole
/// and its maximum message size.
struct MessageOptions: ParsableArguments {
    @OptionGroup var wormholeOptions: WormholeOptions

    @Option(
        name: .customLong("max-size"),
        help: ArgumentHelp(
            "Refuse a message larger than this: bytes, or a number with K, M or G (KiB, MiB, GiB).",
            valueName: "size"))
    var maxSize = ByteCount(FileTransiting.defaultMaximumMessageSize)

    /// The limit in bytes.
    var maximumMessageSize: Int { maxSize.bytes }

    /// `--bus-address` and `--log-level`.
    var bus: BusOptions { wormholeOptions.bus }

    /// The wormhole with this limit, every name validated first.
    func wormhole(identifiers: [String]) throws -> MessageCenter {
        try wormholeOptions.wormhole(identifiers: identifiers, maximumMessageSize: maximumMessageSize)
    }
}

/// A size in bytes as given on the command line: `1048576`, `512K`, `64M`, `1G` (binary units;
/// `KiB`, `MiB`, `GiB` and lower case are accepted too).
struct ByteCount: ExpressibleByArgument, CustomStringConvertible {
    var bytes: Int

    init(_ bytes: Int) { self.bytes = bytes }

    init?(argument: String) {
        var digits = Substring(argument)
        var shift = 0
        for (suffixes, bits) in [(["g", "gib"], 30), (["m", "mib"], 20), (["k", "kib"], 10)] {
            if let suffix = suffixes.first(where: { argument.lowercased().hasSuffix($0) }) {
                digits = digits.dropLast(suffix.count)
                shift = bits
                break
            }
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int(digits), number > 0,
            number <= Int.max >> shift
        else { return nil }
        bytes = number << shift
    }

    var description: String {
        for (unit, bits) in [("G", 30), ("M", 20), ("K", 10)] where bytes % (1 << bits) == 0 {
            return "\(bytes >> bits)\(unit)"
        }
        return "\(bytes)"
    }

    var defaultValueDescription: String { description }
}

/// Reads standard input to its end as one `Data`, refusing more than `limit` bytes without
/// reading further: a regular file is refused from its size (`fstat`), a pipe once `limit + 1`
/// bytes have arrived. The bytes are read into the returned buffer, with no further copy.
func readStandardInput(limit: Int, identifier: String) throws -> Data {
    var status = stat()
    var size = 0
    if fstat(STDIN_FILENO, &status) == 0, status.st_mode & S_IFMT == S_IFREG {
        size = Int(status.st_size)
        if size > limit { throw tooLarge(identifier, "is \(size) bytes", limit: limit) }
    }
    let ceiling = limit == .max ? Int.max : limit + 1
    var data = Data(count: min(max(size, 65_535) + 1, ceiling))
    var count = 0
    while true {
        if count == data.count {
            if count >= ceiling { throw tooLarge(identifier, "is more than \(limit) bytes", limit: limit) }
            data.count = min(count * 2, ceiling)
        }
        let result = data.withUnsafeMutableBytes { buffer in
            read(STDIN_FILENO, buffer.baseAddress! + count, buffer.count - count)
        }
        if result == 0 { break }
        if result < 0 {
            if errno == EINTR { continue }
            throw CLIFailure(
                message: "cannot read standard input: \(String(cString: strerror(errno))) (errno \(errno))")
        }
        count += result
    }
    data.count = count
    return data
}

private func tooLarge(_ identifier: String, _ size: String, limit: Int) -> CLIFailure {
    CLIFailure(
        message: "message for '\(identifier)' on standard input \(size), over the limit of \(limit) bytes "
            + "(raise it with --max-size)")
}

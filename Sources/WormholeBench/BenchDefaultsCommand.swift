// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import Glibc
import Wormhole

/// The processes of the defaults suite (run by the bench), one `--mode` each:
///
/// - `increment`: `--count` `update` increments of `--key`.
/// - `distinct`: sets `--key`-0 … `--key`-(count-1) to their index.
/// - `foundation-increment`, `foundation-distinct`: the same with Foundation's
///   `UserDefaults(suiteName: --group)` (read, change, `set`, `synchronize()` each time), into
///   `$XDG_CONFIG_HOME`, which the bench points at a scratch directory.
/// - `write-loop`: reads `--key`, then sets it to the next integer forever (the bench kills it),
///   writing each value on standard output after its `set` returned; keys `pad-<n>` change size.
/// - `echo`: observes `ping` and sets `pong` to each value; exits on value -1.
/// - `set-rate`: one `set` (connects), `ready` on standard error, waits for a shared lock on
///   `--go` (the bench holds it exclusively until every writer is ready), then `--count` `set`s;
///   prints `START END COUNT` (monotonic nanoseconds).
struct BenchDefaultsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_bench-defaults", shouldDisplay: false)

    enum Mode: String, ExpressibleByArgument {
        case increment, distinct
        case foundationIncrement = "foundation-increment"
        case foundationDistinct = "foundation-distinct"
        case writeLoop = "write-loop"
        case echo
        case setRate = "set-rate"
    }

    @Option var mode: Mode
    @Option var group: String
    @Option var root = ""
    @Option var key = "counter"
    @Option var count = 0
    @Option var go = ""
    @OptionGroup var bus: BusOptions

    func run() throws {
        switch mode {
        case .foundationIncrement, .foundationDistinct:
            guard let defaults = UserDefaults(suiteName: group) else { throw BenchFailure("no UserDefaults suite") }
            for index in 0..<count {
                if mode == .foundationIncrement {
                    defaults.set(defaults.integer(forKey: key) + 1, forKey: key)
                } else {
                    defaults.set(index, forKey: "\(key)-\(index)")
                }
                defaults.synchronize()
            }
            return
        default: break
        }
        let defaults = try LibraryAPI.defaults(group: group, root: root, address: try bus.required())
        switch mode {
        case .increment:
            for _ in 0..<count { try LibraryAPI.increment(defaults, key: key) }
        case .distinct:
            for index in 0..<count { try LibraryAPI.set(defaults, index, forKey: "\(key)-\(index)") }
        case .writeLoop:
            var sequence = try LibraryAPI.integer(defaults, forKey: key) ?? 0
            while true {
                sequence += 1
                let value = sequence
                try defaults.transaction { suite in
                    try suite.set(value, forKey: key)
                    try suite.set(String(repeating: "x", count: value % 700), forKey: "pad-\(value % 5)")
                }
                // Unbuffered: once written, the bench can read it even after the kill.
                let line = Array("\(value)\n".utf8)
                guard write(1, line, line.count) == line.count else { Foundation.exit(1) }
            }
        case .echo:
            let observer = try LibraryAPI.observe(defaults, key: "ping") { value in
                if value == -1 { Foundation.exit(0) }
                try? LibraryAPI.set(defaults, value, forKey: "pong")
            }
            HelperProcess.announceReadyAndServe(keeping: (defaults, observer))
        case .setRate:
            try LibraryAPI.set(defaults, -1, forKey: key)
            try StartGate.pass(go)
            let start = MonotonicClock.now()
            for index in 0..<count { try LibraryAPI.set(defaults, index, forKey: key) }
            let end = MonotonicClock.now()
            Console.output("\(start) \(end) \(count)")
        default: break
        }
        defaults.flush()
    }
}

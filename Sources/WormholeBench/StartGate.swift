// SPDX-License-Identifier: Apache-2.0
import Glibc

/// Lets helper processes begin their timed work at one instant: the bench holds an exclusive
/// `flock` on the gate file while it starts them; each helper says `ready` and waits for a
/// shared lock on it (``pass(_:)``); the bench opens the gate once every helper is ready.
final class StartGate {
    /// The gate file, `<directory>/go`: what the helpers get as `--go`.
    let path: String
    private let descriptor: Int32

    /// Creates the gate file in `directory`, closed.
    init(in directory: String) throws {
        path = directory + "/go"
        descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0, flock(descriptor, LOCK_EX) == 0 else {
            throw BenchFailure("cannot lock \(path): errno \(errno)")
        }
    }

    /// Starts `count` helpers, the one numbered `index` as this binary with `arguments(index)`,
    /// and returns them once every one is ready (waiting at the gate).
    func start(_ count: Int, arguments: (_ index: Int) -> [String]) throws -> [ChildProcess] {
        var children: [ChildProcess] = []
        for index in 0..<count {
            let child = try ChildProcess(executable: Executables.current, arguments: arguments(index))
            try child.waitForReady()
            children.append(child)
        }
        return children
    }

    /// Lets every helper waiting at the gate go.
    func open() {
        flock(descriptor, LOCK_UN)
    }

    /// What the helpers of a rate run did together: the time from the first one's start to the
    /// last one's end, the count of all, and each further number they printed, summed.
    struct RateRun {
        var seconds: Double
        var total: Int
        var more: [UInt64]

        var rate: Double { Double(total) / seconds }
    }

    /// Opens the gate to `children` (from ``start(_:arguments:)``) and reads the line each prints
    /// when done: `FIRST LAST COUNT` (its first and last instant on the monotonic clock, in
    /// nanoseconds, and how much it did) and `extra` more numbers. A helper that fails or prints
    /// another line fails the run, named `who`.
    func openAndMeasure(_ children: [ChildProcess], extra: Int = 0, who: String) throws -> RateRun {
        open()
        var (first, last, total) = (UInt64.max, UInt64(0), 0)
        var more = [UInt64](repeating: 0, count: extra)
        for child in children {
            let line = try child.readAllOutput().first ?? ""
            let numbers = line.split(separator: " ").compactMap { UInt64($0) }
            guard child.waitForExit() == 0, numbers.count == 3 + extra else {
                throw BenchFailure("\(who) failed: \(line)")
            }
            (first, last, total) = (min(first, numbers[0]), max(last, numbers[1]), total + Int(numbers[2]))
            for index in 0..<extra { more[index] += numbers[3 + index] }
        }
        return RateRun(seconds: Double(last - first) / 1e9, total: total, more: more)
    }

    deinit {
        close(descriptor)
    }

    /// In a helper: says `ready`, then blocks until the bench opens the gate at `path`.
    static func pass(_ path: String) throws {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw BenchFailure("cannot open \(path): errno \(errno)") }
        defer { close(descriptor) }
        Console.progress("ready")
        while flock(descriptor, LOCK_SH) != 0 {
            guard errno == EINTR else { throw BenchFailure("flock \(path): errno \(errno)") }
        }
    }
}

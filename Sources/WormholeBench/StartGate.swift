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

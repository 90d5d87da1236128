import Dispatch
import Foundation
import Glibc
import Synchronization

/// Kills the bench's children (helpers, floors, the private daemon) and removes its scratch
/// directories when the bench is interrupted (SIGINT, SIGTERM, SIGHUP). Normal exits and thrown
/// errors clean up through `deinit` and `defer`; this covers the signals that skip them.
enum ChildReaper {
    /// The signals the bench handles; children get their default actions back.
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    private struct State {
        var pids: Set<pid_t> = []
        var directories: Set<String> = []
    }

    private static let state = Mutex(State())

    /// Installs the handlers once: the signals are ignored and read from dispatch sources instead.
    private static let handlers: Void = {
        for signal in signals {
            Glibc.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
            source.setEventHandler {
                cleanUp()
                Console.progress("wormhole-bench: interrupted (signal \(signal)); children stopped")
                exit(128 + signal)
            }
            source.resume()
            // The sources live as long as the process.
            _ = Unmanaged.passRetained(source as AnyObject)
        }
    }()

    static func register(_ pid: pid_t) {
        _ = handlers
        state.withLock { _ = $0.pids.insert(pid) }
    }

    static func unregister(_ pid: pid_t) {
        state.withLock { _ = $0.pids.remove(pid) }
    }

    /// Removes `path` if the bench is interrupted before it does so itself.
    static func removeOnInterrupt(_ path: String) {
        _ = handlers
        state.withLock { _ = $0.directories.insert(path) }
    }

    static func removed(_ path: String) {
        state.withLock { _ = $0.directories.remove(path) }
    }

    private static func cleanUp() {
        let (pids, directories) = state.withLock { ($0.pids, $0.directories) }
        for pid in pids { kill(pid, SIGKILL) }
        for pid in pids { waitpid(pid, nil, 0) }
        for path in directories { try? FileManager.default.removeItem(atPath: path) }
    }
}

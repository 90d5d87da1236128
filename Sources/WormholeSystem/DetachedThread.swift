// SPDX-License-Identifier: Apache-2.0
internal import CWormholeSystem  // the thread-naming shim
import Glibc

/// Starts a detached POSIX thread that runs `body` once: what `Foundation.Thread` would do,
/// without loading Foundation (the library's core uses FoundationEssentials only; see
/// docs/performance.md, memory).
package enum DetachedThread {
    /// The closure and the name, carried across `pthread_create` (its only owner is the new thread).
    private final class Start {
        let name: String
        let body: () -> Void
        init(name: String, body: @escaping () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts the thread; `name` (the first 15 bytes) is what `ps -T`, /proc/PID/task/*/comm
    /// and debuggers show.
    /// A failure to create a thread (the process is out of threads or memory) stops the process:
    /// nothing can run without it.
    package static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { argument in
                let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
                _ = start.name.withCString { cwormhole_name_this_thread($0) }
                start.body()
                return nil
            }, start)
        guard status == 0 else {
            fatalError("cannot start the thread '\(name)': \(SystemFailure.text(of: status))")
        }
        pthread_detach(thread)
    }
}

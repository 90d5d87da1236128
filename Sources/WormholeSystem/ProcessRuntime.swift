// SPDX-License-Identifier: Apache-2.0
/// The process's machinery below D-Bus, one per process: the event loop every connection,
/// watch, deadline and socket shares, the one inotify instance, the drain that runs at exit,
/// and the pool for work off the loop. `Wormhole`'s runtime objects hold it (with the shared
/// connections, the doorbell and the subscription tables, which belong to the layers above; a
/// test's private runtime holds the same one); the D-Bus layer reaches it through ``shared``.
/// Beside it, the layers below `Wormhole` keep only the statics docs/architecture.md lists
/// (`HopTrace`'s buffer, libdbus's one initialisation).
package final class ProcessRuntime: Sendable {
    /// The process's runtime.
    package static let shared = ProcessRuntime()

    /// The process's one event loop, started with its first handler, stopped with its last.
    package let loop: RuntimeLoop
    /// The process's one inotify instance, on ``loop``.
    package let inotify: InotifyHub
    /// What runs at a normal exit: hooks, then every connection's drain.
    package let exitDrain: ExitDrain
    /// The one place for work that must not run on ``loop`` (it blocks), whose threads exist
    /// only while it has work.
    package let pool: WorkPool

    private init() {
        loop = RuntimeLoop()
        inotify = InotifyHub(loop: loop)
        exitDrain = ExitDrain()
        pool = WorkPool()
    }
}

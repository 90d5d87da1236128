// SPDX-License-Identifier: Apache-2.0
import Glibc
import WormholeDBus
import WormholeSystem

/// What a ``DirectoryWatch`` saw.
enum DirectoryChange: Sendable {
    /// These entries of the directory changed (in the order seen; a name may repeat).
    case names([String])
    /// Events may have been lost (the kernel's queue overflowed, or the directory was removed or
    /// moved and watched again): whatever the directory holds must be compared with what was
    /// last delivered.
    case rescan
    /// The directory cannot be watched any more (it was removed and cannot be made again, or
    /// inotify failed); the reason. Nothing more is reported.
    case failed(WormholeError)
}

/// A directory that can be watched: opened with the container's checks.
protocol WatchableDirectory {
    var descriptor: Int32 { get }
    var path: String { get }
}

extension OpenFile: WatchableDirectory {}

/// What a subscription wants watched while it has no bus (see ``WakeEngine``): one directory,
/// opened (and created when missing) with the container's checks, and the events that mean
/// "something changed" there. Subscriptions with the same ``key`` share one watch.
struct WatchTarget: Sendable {
    /// The directory's path: the key under which subscriptions share a watch.
    let key: String
    /// The events watched on the directory's entries (`IN_MOVED_TO`, `IN_MODIFY`, …).
    let events: UInt32
    /// Opens the directory, checked, making it when `create` (nil when it does not exist and
    /// `create` is false); the watch is added on what was opened.
    let open: @Sendable (_ create: Bool) throws(WormholeError) -> (any WatchableDirectory)?

    /// A wormhole directory: mailboxes are replaced by a rename onto `ID.json` and cleared by
    /// removing it. The temporaries (`.ID.pid-random.tmp`) are written, not renamed onto, so a
    /// write is seen once, on its rename.
    static func mailboxes(_ files: MessageFiles) -> WatchTarget {
        WatchTarget(
            key: files.container.directoryPath(files.directory), events: UInt32(IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)
        ) { create throws(WormholeError) in
            create ? try files.openOrCreateDirectory() : try files.openExistingDirectory()
        }
    }
}

/// inotify on one directory (a ``WatchTarget``): reports the names of the entries whose events
/// it asked for, in batches. The watch is one of the process's inotify instance (`InotifyHub`),
/// read on the process's loop: no thread or instance of its own.
///
/// The directory is opened (and created, mode 0700, when missing) with the container's checks
/// (no symlink, owned by this user, not writable by others), and the watch is added on that
/// open directory (`/proc/self/fd/N`), not on a path looked up again. When the directory is
/// removed or moved away it is made again, watched again, and a ``DirectoryChange/rescan`` is
/// reported.
final class DirectoryWatch: Sendable {
    private let target: WatchTarget
    /// Where changes go, with the watch that saw them: a report its owner gets from a watch it
    /// already released (one running on the loop as the owner let go) is the owner's to ignore.
    private let report: @Sendable (DirectoryWatch, DirectoryChange) -> Void
    /// The watch on the directory now watched (replaced, on the loop's thread, when the directory
    /// is made again), active while this object lives: its owner releases it to stop watching.
    private let watch = Locked<InotifyHub.Watch?>(nil)

    /// The events watched on the directory itself.
    private static let selfEvents = UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    /// Watches `target` (creating the directory when missing, unless `create` is false: then
    /// nil when it does not exist). `report` runs on the process's loop, one call per batch of
    /// events read: it must return quickly.
    /// - Throws: ``WormholeError`` when the directory cannot be made or opened safely, or inotify
    ///   is unavailable (for example the process cannot get an instance because
    ///   `fs.inotify.max_user_instances` is reached: the error's value names the limit).
    init?(
        _ target: WatchTarget, create: Bool = true,
        report: @escaping @Sendable (DirectoryWatch, DirectoryChange) -> Void
    )
        throws(WormholeError)
    {
        self.target = target
        self.report = report
        guard let added = try addWatch(create: create) else { return nil }
        watch.withLock { $0 = added }
    }

    /// Opens (or makes) the directory safely and watches what was opened.
    private func addWatch(create: Bool = true) throws(WormholeError) -> InotifyHub.Watch? {
        guard let directory = try target.open(create) else { return nil }
        let mask = target.events | Self.selfEvents
        // The open descriptor, through /proc: the directory that passed the checks, not whatever
        // the path names a moment later. Without /proc, the path (checked just above).
        let handler: @Sendable ([InotifyHub.Event]) -> Void = { [weak self] events in self?.handle(events) }
        do throws(SystemFailure) {
            do throws(SystemFailure) {
                return try ProcessRuntime.shared.inotify.watch(
                    "/proc/self/fd/\(directory.descriptor)", mask: mask, handler: handler)
            } catch  where error.call == "inotify_add_watch" && error.code == ENOENT {
                return try ProcessRuntime.shared.inotify.watch(
                    directory.path, mask: mask | UInt32(IN_DONT_FOLLOW), handler: handler)
            }
        } catch {
            // A per-user limit is named as the value (the sysctl that raises it): the subscribers
            // then wait for the bus instead of failing.
            throw WormholeError(.io, value: error.limit ?? directory.path, "cannot watch '\(directory.path)': \(error)")
        }
    }

    /// On the loop's thread: one batch of the directory's events.
    private func handle(_ events: [InotifyHub.Event]) {
        var names: [String] = []
        var rescan = false
        var directoryGone = false
        for event in events {
            if event.has(IN_Q_OVERFLOW) { rescan = true }
            if event.has(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) { directoryGone = true }
            guard let name = event.name, !event.has(IN_ISDIR), event.mask & target.events != 0 else { continue }
            names.append(name)
        }
        if !names.isEmpty { report(self, .names(names)) }
        if directoryGone {
            // Removed or moved away: make it again, watch the new one, compare everything. The
            // old watch is gone with its directory (or moved with it: released here, outside the
            // lock, before the new one is added).
            _ = watch.withLock { watch -> InotifyHub.Watch? in
                defer { watch = nil }
                return watch
            }
            do {
                guard let added = try addWatch() else { return report(self, .rescan) }
                watch.withLock { $0 = added }
            } catch {
                return report(self, .failed(error))
            }
            rescan = true
        }
        if rescan { report(self, .rescan) }
    }
}

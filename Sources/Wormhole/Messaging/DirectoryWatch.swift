import Glibc
import Synchronization
import WormholeDBus

/// What a ``DirectoryWatch`` saw.
enum DirectoryChange: Sendable {
    /// These mailboxes were replaced (a file renamed onto `ID.json`) or removed, in the order seen.
    case mailboxes([MessageIdentifier])
    /// Events may have been lost (the kernel's queue overflowed, or the directory was removed or
    /// moved and watched again): every mailbox must be compared with what was last delivered.
    case rescan
    /// The directory cannot be watched any more (it was removed and cannot be made again, or
    /// inotify failed); the reason. Nothing more is reported.
    case failed(WormholeError)
}

/// inotify on one wormhole directory: wakes on `IN_MOVED_TO` (the contract's atomic replace
/// renames a temporary onto `ID.json`), `IN_MOVED_FROM` and `IN_DELETE` (a cleared mailbox) of
/// names `ID.json`. The watch is one of the process's inotify instance (`InotifyHub`), read on
/// the process's loop: no thread or instance of its own. The temporaries
/// (`.ID.pid-random.tmp`) are not mailboxes and are ignored, so a write wakes it once, on its
/// rename.
///
/// The directory is opened (and created, mode 0700, when missing) with the container's checks
/// (no symlink, owned by this user, not writable by others), and the watch is added on that
/// open directory (`/proc/self/fd/N`), not on a path looked up again. When the directory is
/// removed or moved away it is made again, watched again, and a ``DirectoryChange/rescan`` is
/// reported.
final class DirectoryWatch: Sendable {
    private let files: MessageFiles
    private let report: @Sendable (DirectoryChange) -> Void
    private let stopped = Atomic<Bool>(false)
    /// The watch on the directory now watched (replaced, on the loop's thread, when the
    /// directory is made again).
    private let watch = Mutex<InotifyHub.Watch?>(nil)

    /// The events watched on the directory itself and on its entries.
    private static let mask = UInt32(IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    /// Watches the wormhole directory of `files` (creating it when missing). `report` runs on the
    /// process's loop, one call per batch of events read: it must return quickly.
    /// - Throws: ``WormholeError`` when the directory cannot be made or opened safely, or inotify
    ///   is unavailable (for example the process cannot get an instance because
    ///   `fs.inotify.max_user_instances` is reached: the message names the limit).
    init(files: MessageFiles, report: @escaping @Sendable (DirectoryChange) -> Void) throws(WormholeError) {
        self.files = files
        self.report = report
        let added = try addWatch()
        watch.withLock { $0 = added }
    }

    deinit { stop() }

    /// Stops the watch. No report starts after the loop has seen it; one already running
    /// finishes. Calling it again does nothing.
    func stop() {
        if stopped.exchange(true, ordering: .acquiringAndReleasing) { return }
        let current = watch.withLock { watch -> InotifyHub.Watch? in
            defer { watch = nil }
            return watch
        }
        current?.cancel()
    }

    /// Opens (or makes) the directory safely and watches what was opened.
    private func addWatch() throws(WormholeError) -> InotifyHub.Watch {
        let directory = try files.openOrCreateDirectory()
        // The open descriptor, through /proc: the directory that passed the checks, not whatever
        // the path names a moment later. Without /proc, the path (checked just above).
        let handler: @Sendable ([InotifyHub.Event]) -> Void = { [weak self] events in self?.handle(events) }
        do throws(InotifyHub.Failure) {
            do throws(InotifyHub.Failure) {
                return try InotifyHub.shared.watch("/proc/self/fd/\(directory.descriptor)", mask: Self.mask, handler: handler)
            } catch where error.call == "inotify_add_watch" && error.code == ENOENT {
                return try InotifyHub.shared.watch(directory.path, mask: Self.mask | UInt32(IN_DONT_FOLLOW), handler: handler)
            }
        } catch {
            throw WormholeError(.io, value: directory.path, "cannot watch '\(directory.path)': \(error)")
        }
    }

    /// On the loop's thread: one batch of the directory's events.
    private func handle(_ events: [InotifyHub.Event]) {
        guard !stopped.load(ordering: .acquiring) else { return }
        var identifiers: [MessageIdentifier] = []
        var rescan = false
        var directoryGone = false
        for event in events {
            if event.has(IN_Q_OVERFLOW) { rescan = true }
            if event.has(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) { directoryGone = true }
            guard let name = event.name, !event.has(IN_ISDIR) else { continue }
            if let identifier = MessageIdentifier(fileName: name) { identifiers.append(identifier) }
        }
        if !identifiers.isEmpty { deliver(.mailboxes(identifiers)) }
        if directoryGone {
            // Removed or moved away: make it again, watch the new one, compare everything. The
            // old watch is gone with its directory (or moved with it: cancelled here).
            let old = watch.withLock { watch -> InotifyHub.Watch? in
                defer { watch = nil }
                return watch
            }
            old?.cancel()
            do {
                let added = try addWatch()
                let keep = watch.withLock { watch -> Bool in
                    guard !stopped.load(ordering: .acquiring) else { return false }
                    watch = added
                    return true
                }
                if !keep { added.cancel() }
            } catch {
                return deliver(.failed(error))
            }
            rescan = true
        }
        if rescan { deliver(.rescan) }
    }

    private func deliver(_ change: DirectoryChange) {
        if !stopped.load(ordering: .acquiring) { report(change) }
    }
}

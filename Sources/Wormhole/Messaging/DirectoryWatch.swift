import Foundation
import Glibc
import Synchronization

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
/// names `ID.json`, on its own thread, which sleeps in `poll(2)` on the inotify descriptor and
/// on a pipe that ``stop()`` writes to. The temporaries (`.ID.pid-random.tmp`) are not
/// mailboxes and are ignored, so a write wakes the thread once, on its rename.
///
/// The directory is opened (and created, mode 0700, when missing) with the container's checks
/// (no symlink, owned by this user, not writable by others), and the watch is added on that
/// open directory (`/proc/self/fd/N`), not on a path looked up again. When the directory is
/// removed or moved away it is made again, watched again, and a ``DirectoryChange/rescan`` is
/// reported.
///
/// `@unchecked Sendable`: the descriptors are set once in `init`; `stopped` is atomic;
/// `watchDescriptor` is set in `init`, before the thread starts, and then only on the thread.
final class DirectoryWatch: @unchecked Sendable {
    private let files: MessageFiles
    private let report: @Sendable (DirectoryChange) -> Void
    private let inotifyFD: Int32
    private let stopPipe: (read: Int32, write: Int32)
    private let stopped = Atomic<Bool>(false)
    /// The watch on the directory now watched: set in `init`, then only on the watch's thread.
    private var watchDescriptor: Int32 = -1

    /// The events watched on the directory itself and on its entries.
    private static let mask = UInt32(IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    /// Watches the wormhole directory of `files` (creating it when missing) and starts the thread.
    /// `report` runs on the watch's thread, one call per batch of events read.
    /// - Throws: ``WormholeError`` when the directory cannot be made or opened safely, or inotify
    ///   is unavailable (for example `fs.inotify.max_user_instances` is reached).
    init(files: MessageFiles, report: @escaping @Sendable (DirectoryChange) -> Void) throws(WormholeError) {
        self.files = files
        self.report = report
        let path = files.container.directoryPath(files.directory)
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else {
            throw WormholeError(
                .io, value: path,
                "cannot watch '\(path)': inotify_init1 failed: \(String(cString: strerror(errno))) "
                    + "(see fs.inotify.max_user_instances)")
        }
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw WormholeError(.io, value: path, "cannot watch '\(path)': pipe failed: \(reason)")
        }
        for descriptor in pipeFDs { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        inotifyFD = fd
        stopPipe = (pipeFDs[0], pipeFDs[1])
        // On a failure deinit runs (every property is set) and closes the descriptors.
        watchDescriptor = try addWatch()
        let thread = Thread { [self] in run() }
        thread.name = "wormhole.directory-watch"
        thread.start()
    }

    /// Stops the thread. No report starts after the thread sees it; one already running
    /// finishes. Calling it again does nothing. The descriptors are closed when the watch is
    /// released (the thread holds it until it returns), never while the thread may use them.
    func stop() {
        if stopped.exchange(true, ordering: .acquiringAndReleasing) { return }
        var byte: UInt8 = 1
        _ = Glibc.write(stopPipe.write, &byte, 1)
    }

    /// Opens (or makes) the directory safely and watches what was opened.
    private func addWatch() throws(WormholeError) -> Int32 {
        let directory = try files.openOrCreateDirectory()
        // The open descriptor, through /proc: the directory that passed the checks, not whatever
        // the path names a moment later. Without /proc, the path (checked just above).
        var wd = inotify_add_watch(inotifyFD, "/proc/self/fd/\(directory.descriptor)", Self.mask)
        if wd < 0 && errno == ENOENT { wd = inotify_add_watch(inotifyFD, directory.path, Self.mask | UInt32(IN_DONT_FOLLOW)) }
        guard wd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw WormholeError(
                .io, value: directory.path,
                "cannot watch '\(directory.path)': inotify_add_watch failed: \(reason) (see fs.inotify.max_user_watches)")
        }
        return wd
    }

    private func closeDescriptors() {
        Glibc.close(inotifyFD)
        Glibc.close(stopPipe.read)
        Glibc.close(stopPipe.write)
    }

    deinit { closeDescriptors() }

    private func run() {
        // Room for at least 64 events with the longest names (16 + 256 bytes each).
        let capacity = 64 * 272
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        var fds = [
            pollfd(fd: inotifyFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0),
        ]
        while !stopped.load(ordering: .acquiring) {
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return deliver(.failed(WormholeError(.io, "the directory watch stopped: poll failed: \(String(cString: strerror(errno)))")))
            }
            if fds[1].revents != 0 || stopped.load(ordering: .acquiring) { return }
            var identifiers: [MessageIdentifier] = []
            var rescan = false
            var directoryGone = false
            var drained = false
            while !drained {
                let count = Glibc.read(inotifyFD, buffer, capacity)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                // Less than a full buffer: the queue was drained (no further read just to see EAGAIN).
                defer { if count < capacity - 272 { drained = true } }
                var offset = 0
                while offset + 16 <= count {
                    let wd = buffer.load(fromByteOffset: offset, as: Int32.self)
                    let mask = buffer.load(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(buffer.load(fromByteOffset: offset + 12, as: UInt32.self))
                    defer { offset += 16 + length }
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 { rescan = true }
                    // Events of a directory watched before (moved away, or its watch's last
                    // IN_IGNORED) are not this wormhole's any more.
                    guard wd == watchDescriptor else { continue }
                    if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 { directoryGone = true }
                    guard length > 0, mask & UInt32(IN_ISDIR) == 0 else { continue }
                    let name = buffer.advanced(by: offset + 16).assumingMemoryBound(to: CChar.self)
                    if let identifier = MessageIdentifier(fileName: String(cString: name)) {
                        identifiers.append(identifier)
                    }
                }
            }
            if !identifiers.isEmpty { deliver(.mailboxes(identifiers)) }
            if directoryGone {
                // Removed or moved away: make it again, watch the new one, compare everything.
                // The old watch is gone with its directory (or moved with it: removed here).
                _ = inotify_rm_watch(inotifyFD, watchDescriptor)  // a moved directory's watch stays otherwise
                do {
                    watchDescriptor = try addWatch()
                } catch {
                    return deliver(.failed(error))
                }
                rescan = true
            }
            if rescan { deliver(.rescan) }
        }
    }

    private func deliver(_ change: DirectoryChange) {
        if !stopped.load(ordering: .acquiring) { report(change) }
    }
}

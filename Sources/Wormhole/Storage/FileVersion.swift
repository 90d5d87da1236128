// SPDX-License-Identifier: Apache-2.0
// One version of a file or directory, as its `stat` describes it.

import Glibc
import WormholeSystem

/// What identifies one version of a file or directory: the same device, inode, link count (for a
/// directory, one per subdirectory), size, modification and change time mean the same contents
/// (for a directory, the same entries), once the file system's clock has moved past those times
/// (``isSettled``). A suite file's cache, the journal directory's listing and the doorbell
/// directory's listing are kept while the version they were read at is the current one.
struct FileVersion: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64
    var links: UInt64
    var size: Int64
    /// The modification time, in nanoseconds since 1970.
    var modified: UInt64
    /// The status change time, in nanoseconds since 1970.
    var changed: UInt64

    init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        links = UInt64(status.st_nlink)
        size = Int64(status.st_size)
        modified = UInt64(status.st_mtim.tv_sec) &* 1_000_000_000 &+ UInt64(status.st_mtim.tv_nsec)
        changed = UInt64(status.st_ctim.tv_sec) &* 1_000_000_000 &+ UInt64(status.st_ctim.tv_nsec)
    }

    /// Whether its times are older than the file system's clock now (`CLOCK_REALTIME_COARSE`,
    /// the clock of file times): a change from now on gets a later time, so an unchanged version
    /// means unchanged contents. Within the tick of a change (a few milliseconds), two changes can
    /// leave the same times and size (an entry removed and another made), so a listing taken then
    /// is not to be kept.
    var isSettled: Bool {
        let now = Syscall.coarseRealTimeNanoseconds()
        return modified < now && changed < now
    }
}

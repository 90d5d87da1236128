// SPDX-License-Identifier: Apache-2.0
// What an entry inside a group container must be, and the check that it is: of that kind, owned
// by this user, not writable by group or others.

import Glibc
import WormholeSystem

/// What an entry inside a container must be.
enum EntryKind: CustomStringConvertible {
    case directory
    case regularFile

    var description: String {
        switch self {
        case .directory: "a directory"
        case .regularFile: "a regular file"
        }
    }

    var typeBits: mode_t {
        switch self {
        case .directory: 0o040000
        case .regularFile: 0o100000
        }
    }

    /// Checks that `status` (of the entry at `path`) is of this kind, owned by this user and not
    /// writable by group or others.
    func check(_ status: stat, path: String) throws(WormholeError) {
        let type = status.st_mode & 0o170000
        if type != typeBits {
            throw WormholeError(
                .unsafePath, value: path,
                "'\(path)' is \(Self.describe(type)), not \(self); refusing to use it")
        }
        let user = Syscall.effectiveUserID()
        if status.st_uid != user {
            throw WormholeError(
                .unsafePath, value: path,
                "'\(path)' is owned by uid \(status.st_uid), not by this user (uid \(user)); refusing to use it")
        }
        let permissions = status.st_mode & 0o7777
        if permissions & 0o022 != 0 {
            throw WormholeError(
                .unsafePath, value: path,
                "'\(path)' is writable by group or others (mode \(String(permissions, radix: 8))); "
                    + "refusing to use it (fix with: chmod go-w '\(path)')")
        }
    }

    /// The error for the entry at `path` that an `O_NOFOLLOW` open refused, from its `lstat`
    /// (nil when that failed too): a symlink, or something other than this kind.
    func refused(_ status: stat?, path: String) -> WormholeError {
        guard let status else { return WormholeError(.unsafePath, value: path, "'\(path)' is not \(self)") }
        let type = status.st_mode & 0o170000
        if type == 0o120000 {
            return WormholeError(
                .unsafePath, value: path,
                "'\(path)' is a symbolic link; symlinks inside a group container are never followed")
        }
        return WormholeError(.unsafePath, value: path, "'\(path)' is \(Self.describe(type)), not \(self)")
    }

    /// The file type bits `type` (`st_mode & S_IFMT`) in words.
    static func describe(_ type: mode_t) -> String {
        switch type {
        case 0o040000: "a directory"
        case 0o100000: "a regular file"
        case 0o120000: "a symbolic link"
        case 0o010000: "a FIFO"
        case 0o140000: "a socket"
        case 0o020000: "a character device"
        case 0o060000: "a block device"
        default: "of unknown type \(String(type, radix: 8))"
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Glibc
import SystemPackage

/// Why the process's machinery could not do something: the call that failed, its `errno` and
/// the path involved. One type for the loop, the inotify instance and the doorbell's socket.
package struct SystemFailure: Error, Sendable, CustomStringConvertible {
    /// The call that failed (`epoll_create1`, `inotify_add_watch`, `bind`, …), or what could not
    /// be had (`the runtime loop`).
    package var call: String
    /// Its `errno`, or 0 when no call failed.
    package var code: Int32
    /// The path involved, if any.
    package var path: String?
    /// What went wrong when `errno` does not say it.
    package var detail: String?

    package init(call: String, code: Int32, path: String? = nil, detail: String? = nil) {
        self.call = call
        self.code = code
        self.path = path
        self.detail = detail
    }

    /// The kernel limit the failure points at, when it is one: what raises it.
    package var limit: String? {
        switch (call, code) {
        case ("inotify_init1", EMFILE): "fs.inotify.max_user_instances"
        case ("inotify_add_watch", ENOSPC): "fs.inotify.max_user_watches"
        default: nil
        }
    }

    /// The text of `errno` `code`, as the syscall layer's `Errno` gives it.
    package static func text(of code: Int32) -> String { Errno(rawValue: code).description }

    package var description: String {
        let reason = detail ?? Self.text(of: code)
        let subject = path.map { "\(call) \($0)" } ?? call
        guard let limit else { return "\(subject) failed: \(reason)" }
        return "\(subject) failed: \(reason): the per-user limit \(limit) is reached "
            + "(raise it with `sysctl \(limit)=N` as root)"
    }
}

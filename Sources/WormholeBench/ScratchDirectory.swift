// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc

/// A fresh private directory (`mkdtemp`, mode 0700), removed when released or when the bench
/// is interrupted.
final class ScratchDirectory {
    let path: String

    /// A directory in `base` (default: the temporary directory).
    init(_ label: String, in base: String? = nil) throws {
        let parent = base.map { $0.hasSuffix("/") ? $0 : $0 + "/" } ?? NSTemporaryDirectory()
        path = try ChildReaper.makeDirectory {
            var template = Array((parent + "wormhole-bench-\(label)-XXXXXX").utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } }
            guard let made else {
                throw BenchFailure("cannot create a temporary directory in \(parent): errno \(errno)")
            }
            return made
        }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
        ChildReaper.removed(path)
    }

    /// Creates `relative` (and its parents) inside, each mode 0700.
    @discardableResult
    func makeDirectory(_ relative: String) throws -> String {
        let full = path + "/" + relative
        try FileManager.default.createDirectory(
            atPath: full, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return full
    }
}

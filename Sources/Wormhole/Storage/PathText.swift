// SPDX-License-Identifier: Apache-2.0
import Glibc
import WormholeSystem

/// The few path and text operations the library took from `NSString` and `CharacterSet`, which
/// FoundationEssentials does not have.
package enum PathText {
    /// The path without its last component, as `NSString.deletingLastPathComponent` gives it:
    /// `/a/b` → `/a`, `/a` → `/`, `a` → `` (trailing slashes ignored).
    package static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        if slash == trimmed.startIndex { return "/" }
        var parent = trimmed[..<slash]
        while parent.count > 1, parent.hasSuffix("/") { parent = parent.dropLast() }
        return String(parent)
    }

    /// `~` and `~/…` with the home directory (`$HOME`, else the password database), `~user/…`
    /// with that user's; anything else (or an unknown user) as it is: what
    /// `NSString.expandingTildeInPath` does.
    package static func expandingTilde(_ path: String) -> String {
        guard path.hasPrefix("~") else { return path }
        let slash = path.firstIndex(of: "/") ?? path.endIndex
        let user = path[path.index(after: path.startIndex)..<slash]
        let home: String?
        if user.isEmpty {
            if let variable = Syscall.environment("HOME"), !variable.isEmpty {
                home = variable
            } else {
                home = Syscall.homeDirectory()
            }
        } else {
            home = Syscall.homeDirectory(ofUser: String(user))
        }
        guard let home else { return path }
        let rest = path[slash...]
        return home.hasSuffix("/") && rest.hasPrefix("/") ? String(home.dropLast()) + rest : home + rest
    }

    /// `text` without the spaces and tabs at either end (`CharacterSet.whitespaces`: blanks, not
    /// line breaks).
    package static func trimmingBlanks(_ text: some StringProtocol) -> String {
        func blank(_ character: Character) -> Bool { character.isWhitespace && !character.isNewline }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) })
        else {
            return ""
        }
        return String(text[first...last])
    }

    /// `text` without whitespace and line breaks at either end (`CharacterSet.whitespacesAndNewlines`).
    package static func trimmingWhitespace(_ text: some StringProtocol) -> String {
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
            let last = text.lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(text[first...last])
    }

    /// The last component of a path (`NSString.lastPathComponent`): `/usr/bin/dbus-daemon` →
    /// `dbus-daemon` (trailing slashes ignored).
    package static func lastComponent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/"), trimmed.count > 1 else { return String(trimmed) }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// Whether `path` names a directory, following symlinks (`stat`).
    package static func isDirectory(_ path: String) -> Bool {
        guard let status = try? Syscall.followingStat(path) else { return false }
        return status.st_mode & S_IFMT == S_IFDIR
    }
}

// SPDX-License-Identifier: Apache-2.0
// The Swift example in GroupDefaults.update's doc comment, so that the compiler checks it.
// Never run (it uses the session bus). The Swift blocks of README.md, docs/ and the DocC
// catalogs are built from where they are written by Tests/snippets.sh.

import Wormhole

/// GroupDefaults.update's doc comment.
private func updateDocComment() throws {
    let defaults = try GroupDefaults(applicationGroupIdentifier: "group.com.example.watch")
    try defaults.update(forKey: "launches") { .integer(($0?.intValue ?? 0) + 1) }
}

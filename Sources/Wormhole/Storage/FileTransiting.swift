// SPDX-License-Identifier: Apache-2.0
package import FoundationEssentials

/// Stores each message as a file replaced atomically: the equivalent of MMWormhole's
/// `MMWormholeFileTransiting` (contract §3).
///
/// The message for identifier `I` is `<container>/<directory>/I.json`, mode 0600. A write goes to a
/// new temporary file in the same directory (`.I.<pid>-<random>.tmp`, hidden, so never taken for a
/// message), which is written in full and then renamed over `I.json`. A reader therefore sees the
/// old document or the new one, never a mix or a truncated file, even if the writer is killed at any
/// instant. If a write fails, its temporary file is removed; a writer that is killed leaves its
/// temporary file behind (it is never read, and ``WormholeTransiting/storedIdentifiers()`` skips it).
///
/// Stale temporary files are swept: by `removeStaleTemporaryFiles(olderThan:)`, by
/// ``deleteAllMessages()``, and once per process and directory on its first write. A writer holds
/// `flock(LOCK_EX)` on its temporary file from creation to rename, so a sweep removes only files
/// named exactly `.<identifier>.<pid>-<hex>.tmp`, regular files of this user, older than
/// `staleTemporaryAge` (10 minutes), whose lock it takes without waiting: never a live writer's.
///
/// The container and the directory are created (mode 0700) by the first write; reads, deletes and
/// listings of a wormhole that was never written find nothing and create nothing. Before a read the
/// file is checked like the container: a symlink, another user's file, or a file writable by group
/// or others is refused with ``WormholeError/Code/unsafePath``. A write refuses to replace such a file
/// too; ``WormholeTransiting/deleteMessage(identifier:)`` removes it (the name only, never what a
/// symlink points to).
///
/// Concurrent writers of the same identifier never corrupt the file, but the last rename wins. When
/// writers must be serialised, use `CoordinatedFileTransiting`.
///
/// ```swift
/// let container = try GroupContainer(group: GroupIdentifier("group.com.example.lines"))
/// let transiting = FileTransiting(container: container)
/// try transiting.writeMessage(Data(#"{"n":1}"#.utf8), identifier: MessageIdentifier("counter"))
/// ```
package struct FileTransiting: WormholeTransiting, Hashable {
    /// How far a stored message survives a crash (``GroupContainer/Durability``).
    package typealias Durability = GroupContainer.Durability

    /// The group container holding the wormhole.
    package var container: GroupContainer { files.container }
    /// The wormhole directory inside the container.
    package var directory: WormholeDirectoryName { files.directory }
    /// How far a stored message survives a crash.
    package var durability: Durability { files.durability }

    /// The default `maximumMessageSize`: 64 MiB (67,108,864 bytes).
    package static let defaultMaximumMessageSize = MessageCenter.defaultMaximumMessageSize

    /// The largest message, in bytes, this transiting reads or writes.
    ///
    /// A larger message is refused with ``WormholeError/Code/messageTooLarge`` naming the
    /// identifier, the size and the limit: a write before anything is written; a read from the
    /// file's size (`fstat`), before a byte of it is read or memory is allocated for it, so a huge
    /// or sparse file planted in the directory costs nothing. A file that grows past the limit
    /// while it is read is refused too. Every process that shares a wormhole should use the same
    /// limit (or the reader the larger one).
    package var maximumMessageSize: Int { files.maximumMessageSize }

    let files: MessageFiles

    /// A transiting storing messages in `<container>/<directory>/`, refusing messages over
    /// `maximumMessageSize` bytes (a negative limit counts as 0). Does not touch the disk.
    package init(
        container: GroupContainer, directory: WormholeDirectoryName = .default, durability: Durability = .atomic,
        maximumMessageSize: Int = defaultMaximumMessageSize
    ) {
        files = MessageFiles(
            container: container, directory: directory, durability: durability, maximumMessageSize: maximumMessageSize)
    }

    /// Stores `data` as `<identifier>.json`, replacing the previous message atomically, and creates
    /// the container and directory first if needed.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/unsafePath`` when the container, the
    ///   directory or an existing message file is unsafe; ``WormholeError/Code/io`` when a file-system
    ///   call fails; ``WormholeError/Code/messageTooLarge`` (before anything is written) when `data`
    ///   is over `maximumMessageSize`.
    package func writeMessage(_ data: Data, identifier: MessageIdentifier) throws {
        try files.checkSize(data.count, identifier: identifier)
        let directory = try files.openOrCreateDirectory()
        try files.write(data, identifier: identifier, in: directory)
    }

    /// The bytes of `<identifier>.json`, or nil when no message is stored.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/unsafePath`` when the container, the
    ///   directory or the file is unsafe; ``WormholeError/Code/io`` when a file-system call fails;
    ///   ``WormholeError/Code/messageTooLarge`` (from its size, before it is read) when the file is
    ///   over `maximumMessageSize`.
    package func messageData(identifier: MessageIdentifier) throws -> Data? {
        guard let directory = try files.openExistingDirectory() else { return nil }
        return try files.read(identifier: identifier, in: directory)
    }

    /// Removes `<identifier>.json`; does nothing when no message is stored.
    ///
    /// - Throws: ``WormholeError`` when the container or directory is unsafe or a file-system call fails.
    package func deleteMessage(identifier: MessageIdentifier) throws {
        guard let directory = try files.openExistingDirectory() else { return }
        try files.delete(identifier: identifier, in: directory)
    }

    /// Removes every `<identifier>.json` in the directory, and the stale temporary files of killed
    /// writers (as `removeStaleTemporaryFiles(olderThan:)` with `staleTemporaryAge`). Other files
    /// are left alone.
    ///
    /// - Throws: ``WormholeError`` when the container or directory is unsafe or a file-system call fails.
    package func deleteAllMessages() throws {
        guard let directory = try files.openExistingDirectory() else { return }
        for identifier in try files.identifiers(in: directory) {
            try files.delete(identifier: identifier, in: directory)
        }
        try directory.removeStaleTemporaries(olderThan: Self.staleTemporaryAge.wholeNanoseconds)
    }

    /// How old a writer's temporary file must be before a sweep may remove it: 10 minutes. A
    /// sweep never removes a file a live writer holds, whatever its age; the age keeps sweeps off
    /// files of writers that do not take the lock (older versions, other programs).
    package static let staleTemporaryAge: Duration = .seconds(600)

    /// Removes the temporary files that writers killed mid-write left in the directory: files
    /// named `.<identifier>.<pid>-<hex>.tmp` that are regular files of this user, last modified
    /// more than `age` ago, and not held by a live writer (each is removed only while this call
    /// holds its `flock(LOCK_EX | LOCK_NB)`). Returns how many were removed. An empty temporary
    /// younger than 2 seconds is always kept (its writer may not have locked it yet).
    ///
    /// - Throws: ``WormholeError`` when the container or directory is unsafe or cannot be listed.
    @discardableResult
    package func removeStaleTemporaryFiles(olderThan age: Duration = staleTemporaryAge) throws -> Int {
        try files.removeStaleTemporaries(olderThan: age)
    }

    /// The identifiers with a stored message, sorted.
    ///
    /// - Throws: ``WormholeError`` when the container or directory is unsafe or cannot be read.
    package func storedIdentifiers() throws -> [MessageIdentifier] {
        guard let directory = try files.openExistingDirectory() else { return [] }
        return try files.identifiers(in: directory)
    }
}

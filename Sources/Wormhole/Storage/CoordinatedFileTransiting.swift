// SPDX-License-Identifier: Apache-2.0
package import FoundationEssentials

/// Stores messages like `FileTransiting` and also coordinates the processes that use them with
/// advisory locks: the equivalent of MMWormhole's `MMWormholeCoordinatedFileTransiting`, with `flock`
/// in place of `NSFileCoordinator`.
///
/// The layout and the atomic replace are those of `FileTransiting` (`<container>/<directory>/I.json`,
/// mode 0600, written to a temporary file and renamed), so the two read each other's messages. In
/// addition each identifier `I` has a lock file `.I.lock` in the same directory (mode 0600, opened
/// without following symlinks and checked like the messages). Writers and deleters hold an exclusive
/// `flock` on it, readers a shared one, and ``deleteAllMessages()`` takes each message's lock in turn.
///
/// What this adds over `FileTransiting`:
/// - Writers of the same identifier are serialised, across processes and threads. With
///   ``updateMessage(identifier:_:)``, read-modify-write sequences never interleave, so no update is
///   lost (two processes incrementing a counter 100 times each leave it at 200).
/// - A reader never races a writer or a delete: it sees the message as it is between two of them.
///
/// The locks are advisory: they coordinate users of this type only, and a `FileTransiting` writer
/// still replaces the file atomically but does not wait for them. They are released when the
/// holder's process exits however it exits, so a killed writer never blocks the others. Lock files
/// stay in the directory (removing one while another process waits on it would break the lock); they
/// are never taken for messages. Each operation opens and locks a file and may wait for others, so
/// this is slower than `FileTransiting`.
package struct CoordinatedFileTransiting: WormholeTransiting, Hashable {
    /// The group container holding the wormhole.
    package var container: GroupContainer { files.container }
    /// The wormhole directory inside the container.
    package var directory: WormholeDirectoryName { files.directory }
    /// How far a stored message survives a crash; see `FileTransiting.Durability`.
    package var durability: FileTransiting.Durability { files.durability }

    /// The largest message, in bytes, this transiting reads or writes; see
    /// `FileTransiting.maximumMessageSize`.
    package var maximumMessageSize: Int { files.maximumMessageSize }

    let files: MessageFiles

    /// A transiting storing messages in `<container>/<directory>/`, refusing messages over
    /// `maximumMessageSize` bytes (a negative limit counts as 0). Does not touch the disk.
    package init(
        container: GroupContainer, directory: WormholeDirectoryName = .default,
        durability: FileTransiting.Durability = .atomic,
        maximumMessageSize: Int = FileTransiting.defaultMaximumMessageSize
    ) {
        files = MessageFiles(
            container: container, directory: directory, durability: durability, maximumMessageSize: maximumMessageSize)
    }

    /// Stores `data` as `<identifier>.json` while holding the identifier's exclusive lock, replacing
    /// the previous message atomically; creates the container and directory first if needed.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/unsafePath`` when the container, the
    ///   directory, the lock file or an existing message file is unsafe; ``WormholeError/Code/io`` when a
    ///   file-system call fails.
    package func writeMessage(_ data: Data, identifier: MessageIdentifier) throws {
        try files.checkSize(data.count, identifier: identifier)
        let directory = try files.openOrCreateDirectory()
        try withLock(identifier, in: directory, exclusive: true) {
            try files.write(data, identifier: identifier, in: directory)
        }
    }

    /// Replaces the message for `identifier` with `transform(current message)` while holding the
    /// identifier's exclusive lock, so that no other coordinated write or update comes in between.
    /// `transform` receives nil when no message is stored. Returns what was stored.
    ///
    /// ```swift
    /// try transiting.updateMessage(identifier: counter) { old in
    ///     let n = old.flatMap { try? JSONDecoder().decode(Int.self, from: $0) } ?? 0
    ///     return Data("\(n + 1)".utf8)
    /// }
    /// ```
    ///
    /// - Throws: what `transform` throws (nothing is stored then), or ``WormholeError`` as
    ///   ``writeMessage(_:identifier:)`` and ``messageData(identifier:)`` do.
    @discardableResult
    package func updateMessage(identifier: MessageIdentifier, _ transform: (Data?) throws -> Data) throws -> Data {
        let directory = try files.openOrCreateDirectory()
        return try withLock(identifier, in: directory, exclusive: true) {
            let new = try transform(try files.read(identifier: identifier, in: directory))
            try files.write(new, identifier: identifier, in: directory)
            return new
        }
    }

    /// The bytes of `<identifier>.json`, read while holding the identifier's shared lock, or nil when
    /// no message is stored.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/unsafePath`` when the container, the
    ///   directory, the lock file or the message file is unsafe; ``WormholeError/Code/io`` when a
    ///   file-system call fails; ``WormholeError/Code/messageTooLarge`` (from its size, before it is
    ///   read) when the file is over `maximumMessageSize`.
    package func messageData(identifier: MessageIdentifier) throws -> Data? {
        guard let directory = try files.openExistingDirectory() else { return nil }
        return try withLock(identifier, in: directory, exclusive: false) {
            try files.read(identifier: identifier, in: directory)
        }
    }

    /// Removes `<identifier>.json` while holding the identifier's exclusive lock; does nothing when no
    /// message is stored.
    ///
    /// - Throws: ``WormholeError`` when the container, directory or lock file is unsafe or a file-system
    ///   call fails.
    package func deleteMessage(identifier: MessageIdentifier) throws {
        guard let directory = try files.openExistingDirectory() else { return }
        try withLock(identifier, in: directory, exclusive: true) {
            try files.delete(identifier: identifier, in: directory)
        }
    }

    /// Removes every `<identifier>.json` in the directory, each while holding its exclusive lock, then
    /// the stale temporary files of killed writers (see `FileTransiting.removeStaleTemporaryFiles(olderThan:)`).
    /// A message written after its identifier was listed may remain. Lock files are left.
    ///
    /// - Throws: ``WormholeError`` when the container, directory or a lock file is unsafe or a
    ///   file-system call fails.
    package func deleteAllMessages() throws {
        guard let directory = try files.openExistingDirectory() else { return }
        for identifier in try files.identifiers(in: directory) {
            try withLock(identifier, in: directory, exclusive: true) {
                try files.delete(identifier: identifier, in: directory)
            }
        }
        try directory.removeStaleTemporaries(olderThan: FileTransiting.staleTemporaryAge.wholeNanoseconds)
    }

    /// Removes the temporary files that writers killed mid-write left in the directory; see
    /// `FileTransiting.removeStaleTemporaryFiles(olderThan:)`.
    @discardableResult
    package func removeStaleTemporaryFiles(olderThan age: Duration = FileTransiting.staleTemporaryAge) throws -> Int {
        try files.removeStaleTemporaries(olderThan: age)
    }

    /// The identifiers with a stored message, sorted. Listing takes no lock.
    ///
    /// - Throws: ``WormholeError`` when the container or directory is unsafe or cannot be read.
    package func storedIdentifiers() throws -> [MessageIdentifier] {
        guard let directory = try files.openExistingDirectory() else { return [] }
        return try files.identifiers(in: directory)
    }

    /// Runs `body` while holding the lock of `identifier`; the lock is released when `body` returns or
    /// throws (by closing the lock file).
    private func withLock<Result>(
        _ identifier: MessageIdentifier, in directory: OpenFile, exclusive: Bool, _ body: () throws -> Result
    ) throws -> Result {
        let lock = try directory.openOrCreateFile(MessageFiles.lockName(for: identifier))
        return try withExtendedLifetime(lock) {
            try lock.lock(exclusive: exclusive)
            return try body()
        }
    }
}

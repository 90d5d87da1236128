// SPDX-License-Identifier: Apache-2.0
public import FoundationEssentials

/// How a wormhole stores its messages: the equivalent of MMWormhole's `MMWormholeTransiting`, in bytes.
///
/// A message is one JSON document, stored under its ``MessageIdentifier`` as the last value sent
/// (a mailbox, not a queue). Transitings move the bytes and never parse them; encoding and decoding
/// is the wormhole's job. The library provides `FileTransiting` and `CoordinatedFileTransiting`.
public protocol WormholeTransiting: Sendable {
    /// Stores `data` as the message for `identifier`, replacing the previous one.
    ///
    /// - Throws: ``WormholeError`` when the message cannot be stored.
    func writeMessage(_ data: Data, identifier: MessageIdentifier) throws

    /// The message stored for `identifier`, or nil when none is stored.
    ///
    /// - Throws: ``WormholeError`` when a message exists but cannot be read safely (it is a symlink,
    ///   another user's file, writable by others) or a file-system call fails.
    func messageData(identifier: MessageIdentifier) throws -> Data?

    /// Removes the message stored for `identifier`; does nothing when none is stored.
    ///
    /// - Throws: ``WormholeError`` when a file-system call fails.
    func deleteMessage(identifier: MessageIdentifier) throws

    /// Removes every message stored in this wormhole.
    ///
    /// - Throws: ``WormholeError`` when a file-system call fails.
    func deleteAllMessages() throws

    /// The identifiers of the messages stored in this wormhole, sorted. Files whose names are not
    /// `<valid identifier>.json` (temporary files, lock files, anything else) are skipped.
    ///
    /// - Throws: ``WormholeError`` when the directory cannot be read.
    func storedIdentifiers() throws -> [MessageIdentifier]
}

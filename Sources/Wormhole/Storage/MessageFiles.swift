import FoundationEssentials
import WormholeSystem

/// The file layout and the atomic replace that `FileTransiting` and `CoordinatedFileTransiting`
/// share; no locking here.
struct MessageFiles: Sendable, Hashable {
    let container: GroupContainer
    let directory: WormholeDirectoryName
    let durability: FileTransiting.Durability
    /// The largest message read or written, in bytes (`FileTransiting.maximumMessageSize`).
    let maximumMessageSize: Int

    /// The messages in `<container>/<directory>/`, at most `maximumMessageSize` bytes each (a
    /// negative limit counts as 0).
    init(
        container: GroupContainer, directory: WormholeDirectoryName, durability: FileTransiting.Durability,
        maximumMessageSize: Int
    ) {
        self.container = container
        self.directory = directory
        self.durability = durability
        self.maximumMessageSize = max(0, maximumMessageSize)
    }

    /// The open, checked wormhole directory; nil when it (or the container) does not exist.
    func openExistingDirectory() throws(WormholeError) -> OpenFile? {
        try container.openDirectory(directory, create: false)
    }

    /// The open, checked wormhole directory, created (with the container) when missing.
    func openOrCreateDirectory() throws(WormholeError) -> OpenFile {
        guard let opened = try container.openDirectory(directory, create: true) else {
            // openDirectory(create: true) throws rather than return nil; this is only a guard.
            let path = container.directoryPath(directory)
            throw WormholeError(.io, value: path, "cannot create '\(path)': it was removed while being created")
        }
        return opened
    }

    /// Writes `data` to a new temporary file in `directory`, then renames it over `<identifier>.json`.
    func write(_ data: Data, identifier: MessageIdentifier, in directory: OpenFile) throws(WormholeError) {
        try checkSize(data.count, identifier: identifier)
        try directory.replaceAtomically(
            identifier.fileName, with: data, temporaryName: Self.temporaryName(for: identifier), durability: durability)
        WormholeRuntime.shared.sweptDirectories.onFirstWrite(
            in: directory, olderThan: FileTransiting.staleTemporaryAge.wholeNanoseconds)
    }

    /// Removes the temporaries of killed writers older than `age` (see `FileTransiting.removeStaleTemporaryFiles(olderThan:)`).
    func removeStaleTemporaries(olderThan age: Duration) throws(WormholeError) -> Int {
        guard let directory = try openExistingDirectory() else { return 0 }
        return try directory.removeStaleTemporaries(olderThan: age.wholeNanoseconds)
    }

    func read(identifier: MessageIdentifier, in directory: OpenFile) throws(WormholeError) -> Data? {
        guard let file = try directory.openFile(identifier.fileName) else { return nil }
        return try file.readToEnd(limit: maximumMessageSize) { size in
            Self.tooLarge(identifier, size: size, limit: maximumMessageSize, path: file.path)
        }
    }

    /// Throws ``WormholeError/Code/messageTooLarge`` when a message of `size` bytes is over the limit.
    /// Called before anything is written.
    func checkSize(_ size: Int, identifier: MessageIdentifier) throws(WormholeError) {
        if size > maximumMessageSize {
            throw Self.tooLarge(identifier, size: size, limit: maximumMessageSize, path: nil)
        }
    }

    static func tooLarge(_ identifier: MessageIdentifier, size: Int, limit: Int, path: String?) -> WormholeError {
        let place = path.map { " ('\($0)')" } ?? ""
        return WormholeError(
            .messageTooLarge, value: identifier.rawValue,
            "message '\(identifier)'\(place) is \(size) bytes, over the limit of \(limit) bytes; "
                + "raise the wormhole's maximum message size (--max-size of the wormholectl tool) to pass it")
    }

    func delete(identifier: MessageIdentifier, in directory: OpenFile) throws(WormholeError) {
        if try directory.remove(identifier.fileName), durability == .synchronized {
            try directory.synchronize()
        }
    }

    func identifiers(in directory: OpenFile) throws(WormholeError) -> [MessageIdentifier] {
        try directory.names().compactMap { MessageIdentifier(fileName: $0) }.sorted { $0.rawValue < $1.rawValue }
    }

    /// `.<identifier>.<pid>-<random>.tmp`: hidden (so never taken for a message), unique per writer,
    /// and at most 1 + 200 + 1 + 10 + 1 + 16 + 4 = 233 bytes, within the 255-byte limit.
    static func temporaryName(for identifier: MessageIdentifier) -> String {
        let random = String(UInt64.random(in: .min ... .max), radix: 16)
        return ".\(identifier.rawValue).\(Syscall.processID())-\(random).tmp"
    }

    /// `.<identifier>.lock`, the lock file of `CoordinatedFileTransiting`.
    static func lockName(for identifier: MessageIdentifier) -> String {
        ".\(identifier.rawValue).lock"
    }
}

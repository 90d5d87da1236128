// Read-only views of a group container for the diagnostic commands (`wormholectl doctor`,
// `wormholectl monitor`): the same safe, descriptor-relative opens the transitings use, so a
// diagnosis never follows a symlink or reads through an unsafe directory either.

import FoundationEssentials
import Glibc
import SystemPackage
import WormholeSystem

/// What `wormholectl doctor` and `wormholectl monitor` read from a container. Not API: shared
/// between our own modules only.
package enum ContainerInspection {
    /// A directory that exists and passed the safety checks.
    package struct Directory: Sendable, Hashable {
        /// Its path.
        package var path: String
        /// Its permission bits (`0o700`).
        package var mode: UInt32
        /// Its owner's user id.
        package var owner: UInt32
    }

    /// One stored message file, `<identifier>.json`.
    package struct StoredMessage: Sendable, Hashable {
        /// The message identifier.
        package var identifier: String
        /// The file's size in bytes (nil when it could not be opened).
        package var size: Int?
        /// The file's modification time, nanoseconds since 1970 (nil when it could not be opened).
        package var modified: UInt64?
        /// Why the file is not one JSON text, or why it could not be read; nil when it is fine.
        package var problem: String?
    }

    /// The container root, or nil when it does not exist.
    package static func root(_ path: String) throws(WormholeError) -> Directory? {
        guard let root = try ContainerRoot.open(path, create: false) else { return nil }
        return try describe(root)
    }

    /// The container, checked as every use of it is; nil when it does not exist.
    package static func container(_ container: GroupContainer) throws(WormholeError) -> Directory? {
        guard let opened = try container.openContainer(create: false) else { return nil }
        return try describe(opened)
    }

    /// The directory `name` of the container (a wormhole directory or `Preferences`), checked;
    /// nil when it (or the container) does not exist.
    package static func directory(_ container: GroupContainer, named name: String) throws(WormholeError) -> Directory? {
        guard let opened = try container.openDirectory(named: name, create: false) else { return nil }
        return try describe(opened)
    }

    /// Every stored message of the wormhole directory `name` (sorted by identifier), each
    /// opened safely and checked as JSON; an empty list when the directory does not exist.
    package static func storedMessages(_ container: GroupContainer, directory name: String) throws(WormholeError)
        -> [StoredMessage]
    {
        guard let directory = try container.openDirectory(named: name, create: false) else { return [] }
        let identifiers = try directory.names().compactMap { MessageIdentifier(fileName: $0) }
        return identifiers.sorted { $0.rawValue < $1.rawValue }.map { identifier in
            inspect(identifier, in: directory)
        }
    }

    /// The stored message of one identifier; nil when there is none (or no directory).
    package static func storedMessage(_ container: GroupContainer, directory name: String, identifier: String)
        throws(WormholeError) -> StoredMessage?
    {
        guard let identifier = try? MessageIdentifier(identifier),
            let directory = try container.openDirectory(named: name, create: false)
        else { return nil }
        let found = inspect(identifier, in: directory)
        return found.size == nil && found.problem == nil ? nil : found
    }

    /// The names of the writers' temporary files left in the wormhole directory `name`
    /// (`.<identifier>.<pid>-<random>.tmp`: a writer killed between its write and its rename).
    package static func temporaryFiles(_ container: GroupContainer, directory name: String) throws(WormholeError)
        -> [String]
    {
        guard let directory = try container.openDirectory(named: name, create: false) else { return [] }
        return try directory.names().filter { $0.hasPrefix(".") && $0.hasSuffix(".tmp") }.sorted()
    }

    /// The bytes and modification time (ns since 1970) of the file `file` in the directory
    /// `name` of the container; nil when it does not exist.
    package static func read(_ container: GroupContainer, directory name: String, file: String) throws(WormholeError)
        -> (data: [UInt8], modified: UInt64)?
    {
        guard let directory = try container.openDirectory(named: name, create: false),
            let opened = try directory.openFile(file)
        else { return nil }
        let status = try status(of: opened)
        return ([UInt8](try opened.readToEnd()), modificationTime(status))
    }

    /// Why `data` is not one JSON text (contract §3), or nil when it is.
    package static func jsonProblem(_ data: [UInt8]) -> String? {
        data.withUnsafeBytes { JSONSyntax.check($0).map(\.description) }
    }

    /// The stored JSON of `key` in the bytes of a suite file (contract §5), compact, or nil when
    /// the suite has no such key.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/corruptSuite`` when the bytes are not
    ///   one JSON object.
    package static func suiteValueJSON(_ data: [UInt8], forKey key: String) throws(WormholeError) -> String? {
        do throws(SuiteJSON.ParseError) {
            return try SuiteJSON.decodeSuite(Data(data)).jsonBytes(forKey: key).map {
                String(decoding: $0, as: UTF8.self)
            }
        } catch {
            throw WormholeError(.corruptSuite, value: key, "the suite is not one JSON object: \(error)")
        }
    }

    // MARK: Internals

    private static func inspect(_ identifier: MessageIdentifier, in directory: OpenFile) -> StoredMessage {
        var found = StoredMessage(identifier: identifier.rawValue)
        do throws(WormholeError) {
            guard let file = try directory.openFile(identifier.fileName) else { return found }
            let status = try status(of: file)
            found.size = Int(status.st_size)
            found.modified = modificationTime(status)
            found.problem = jsonProblem([UInt8](try file.readToEnd()))
        } catch {
            found.problem = error.message
        }
        return found
    }

    private static func describe(_ directory: OpenFile) throws(WormholeError) -> Directory {
        let status = try status(of: directory)
        return Directory(path: directory.path, mode: UInt32(status.st_mode & 0o7777), owner: UInt32(status.st_uid))
    }

    private static func status(of file: OpenFile) throws(WormholeError) -> stat {
        do throws(Errno) {
            return try Syscall.fstat(file.descriptor)
        } catch {
            throw ioError(error, "inspect", file.path)
        }
    }

    private static func modificationTime(_ status: stat) -> UInt64 {
        UInt64(max(0, status.st_mtim.tv_sec)) * 1_000_000_000 + UInt64(max(0, status.st_mtim.tv_nsec))
    }
}

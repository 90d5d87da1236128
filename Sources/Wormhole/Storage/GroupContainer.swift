// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The shared directory of an application group, `<root>/<group>/` (contract §2): the Linux
/// equivalent of Apple's `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`.
///
/// Every process of the same user that names the same group gets the same directory. The root is
/// `$WORMHOLE_CONTAINER_ROOT`, else `$XDG_DATA_HOME/group-containers`, else
/// `$HOME/.local/share/group-containers` (see `rootDirectory(environment:inFlatpakSandbox:)`).
///
/// Making a `GroupContainer` does not touch the disk. The container is created, with mode 0700, on
/// first use (`create()`, ``createDirectory(_:)`` or a first write through a transiting). The
/// container and everything the library opens inside it must be a real directory or file (not a
/// symlink), owned by the effective user and not writable by group or others; anything else is
/// refused with ``WormholeError/Code/unsafePath`` and nothing is read or written through it. Paths
/// inside the container are never followed: directories are opened with `O_NOFOLLOW` and the work
/// is done relative to their descriptors, so a symlink swapped in midway is refused, not followed.
/// The root's own path is followed as given (it is the user's choice, like `$HOME`).
///
/// ```swift
/// let container = try GroupContainer(group: GroupIdentifier("group.com.example.lines"))
/// let photos = try container.createDirectory(WormholeDirectoryName("photos"))  // creates the container too
/// print(container.path)  // /home/me/.local/share/group-containers/group.com.example.lines
/// ```
public struct GroupContainer: Sendable, Hashable {
    /// How far a stored message or suite survives a crash (the `durability` of ``MessageCenter``
    /// and ``GroupDefaults``).
    public enum Durability: Sendable, Hashable {
        /// Rename without `fsync`. A write that returned survives the writer process crashing or being
        /// killed, and readers always see a whole document. After a power loss or kernel crash, the
        /// message may be the old one, the new one, or (depending on the file system) an empty file.
        /// This is the contract's guarantee, and the fast default.
        case atomic
        /// `fsync` the temporary file before the rename and the directory after it. A write that
        /// returned also survives a power loss or kernel crash: after a restart the message is the
        /// new document. Each write then waits for the disk, which is much slower (milliseconds).
        case synchronized
    }

    /// The group this container belongs to.
    public let group: GroupIdentifier
    /// The directory holding every group's container.
    package let root: String
    /// The container's path, `<root>/<group>`.
    public let path: String

    /// The directory that holds every group container, resolved from `environment`:
    /// `$WORMHOLE_CONTAINER_ROOT`, else `$XDG_DATA_HOME/group-containers`, else
    /// `$HOME/.local/share/group-containers`.
    ///
    /// Empty variables count as unset. A relative `$XDG_DATA_HOME` or `$HOME` is ignored, as the XDG
    /// Base Directory specification says; a relative `$WORMHOLE_CONTAINER_ROOT` is an error, because
    /// it was set on purpose and would mean a different directory in every working directory.
    ///
    /// Inside a Flatpak sandbox (`inFlatpakSandbox`: `/.flatpak-info` exists; contract §8), where
    /// `$XDG_DATA_HOME` is the app's own `~/.var/app/<APPID>/data`: `$WORMHOLE_CONTAINER_ROOT`,
    /// else the host's default root `$HOME/.local/share/group-containers` when that directory
    /// exists in the sandbox (the app was given `--filesystem=xdg-data/group-containers`, or one
    /// group of it), else `$XDG_DATA_HOME/group-containers` (shared by that app's processes only).
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/noContainerRoot`` when none applies.
    package static func rootDirectory(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        inFlatpakSandbox: Bool = AppIdentity.isFlatpakSandbox
    ) throws -> String {
        if let explicit = environment["WORMHOLE_CONTAINER_ROOT"], !explicit.isEmpty {
            return try absolute(explicit, source: "$WORMHOLE_CONTAINER_ROOT")
        }
        if inFlatpakSandbox, let home = environment["HOME"], home.hasPrefix("/") {
            let hostRoot = join(normalized(home), ".local/share/group-containers")
            if PathText.isDirectory(hostRoot) { return hostRoot }
        }
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return join(normalized(data), "group-containers")
        }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return join(normalized(home), ".local/share/group-containers")
        }
        throw WormholeError(
            .noContainerRoot,
            "cannot find the group container root: none of $WORMHOLE_CONTAINER_ROOT, $XDG_DATA_HOME and $HOME "
                + "is set to an absolute path; set WORMHOLE_CONTAINER_ROOT to a directory")
    }

    /// The container of `group` under `root`, or under `rootDirectory(environment:inFlatpakSandbox:)` of this
    /// process's environment when `root` is nil. Does not touch the disk.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/noContainerRoot`` when `root` is nil
    ///   and the environment names no root, or when `root` is not an absolute path.
    public init(group: GroupIdentifier, root: String? = nil) throws {
        let resolved: String
        if let root {
            resolved = try Self.absolute(root, source: "the container root")
        } else {
            resolved = try Self.rootDirectory()
        }
        self.group = group
        self.root = resolved
        path = Self.join(resolved, group.rawValue)
    }

    /// The path of the wormhole directory `directory` inside the container. Does not touch the disk.
    package func directoryPath(_ directory: WormholeDirectoryName) -> String {
        path + "/" + directory.rawValue
    }

    /// Creates the container with mode 0700 if it does not exist (and the root and its missing parents,
    /// also with mode 0700), then checks that it is safe to use.
    ///
    /// - Throws: ``WormholeError`` with code ``WormholeError/Code/unsafePath`` when the container is a
    ///   symlink, not a directory, owned by another user or writable by group or others;
    ///   ``WormholeError/Code/io`` when a file-system call fails.
    package func create() throws {
        _ = try openContainer(create: true)
    }

    /// Creates the wormhole directory `directory` inside the container with mode 0700 if it does not
    /// exist (creating the container first, as `create()` does), checks both are safe to use, and
    /// returns the directory's path.
    ///
    /// - Throws: ``WormholeError`` as `create()` does, for the container or the directory.
    @discardableResult
    public func createDirectory(_ directory: WormholeDirectoryName) throws -> String {
        _ = try openDirectory(directory, create: true)
        return directoryPath(directory)
    }

    // MARK: Internals used by the transitings

    /// The open, checked container; nil when it does not exist and `create` is false.
    func openContainer(create: Bool) throws(WormholeError) -> OpenFile? {
        guard let root = try ContainerRoot.open(root, create: create) else { return nil }
        return try root.openDirectory(group.rawValue, create: create)
    }

    /// The open, checked wormhole directory; nil when it (or the container) does not exist and `create`
    /// is false.
    func openDirectory(_ directory: WormholeDirectoryName, create: Bool) throws(WormholeError) -> OpenFile? {
        try openDirectory(named: directory.rawValue, create: create)
    }

    /// The open, checked directory `name` of the container (a wormhole directory, or `Preferences`);
    /// nil when it (or the container) does not exist and `create` is false.
    func openDirectory(named name: String, create: Bool) throws(WormholeError) -> OpenFile? {
        guard let container = try openContainer(create: create) else { return nil }
        return try container.openDirectory(name, create: create)
    }

    private static func absolute(_ path: String, source: String) throws(WormholeError) -> String {
        guard path.hasPrefix("/") else {
            throw WormholeError(
                .noContainerRoot, value: path,
                "\(source) '\(path)' is not an absolute path; give a path starting with '/'")
        }
        return normalized(path)
    }

    /// `directory/name`, without a doubled slash when `directory` is `/`.
    private static func join(_ directory: String, _ name: String) -> String {
        directory == "/" ? "/" + name : directory + "/" + name
    }

    /// `path` without trailing slashes (but `/` stays `/`).
    private static func normalized(_ path: String) -> String {
        var result = Substring(path)
        while result.count > 1 && result.hasSuffix("/") { result = result.dropLast() }
        return String(result)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Glibc
import Synchronization
import WormholeSystem

/// The ringing side's view of who is registered under the doorbell directory
/// (`$XDG_RUNTIME_DIR/wormhole/doorbell`): the directory and its registration directories opened
/// once, and their listings kept while their `fstat` says they are unchanged, so a post to a name
/// nobody observes costs one `fstat`, and one to an observed name one more per registration
/// directory before its `sendto`s.
final class RegistrationLookup: Sendable {
    /// The doorbell directory.
    let root: String
    /// The doorbell directory opened (a directory descriptor; -1 until it exists).
    private let rootDescriptor = Atomic<Int32>(-1)

    init(root: String) { self.root = root }

    /// An endpoint to ring: its ID and its socket address, made once per listing.
    struct Endpoint {
        var id: String
        var address: DoorbellSocket.Address
    }

    /// A registration directory as last listed: open (its `fstat` says whether it changed; a
    /// removed one has no links left), and the endpoints it named then.
    private struct RegistrationListing {
        var descriptor: Int32
        var version: FileVersion
        var endpoints: [Endpoint]
    }

    /// The registration directories listed, by hash. A directory's entry is made or removed by
    /// `open`/`unlink` in it, which changes its modification time and size.
    private let registrationListings = Locked<[UInt64: RegistrationListing]>([:])

    /// The endpoints registered under `n<hash>`: the last listing while the directory's `fstat`
    /// is unchanged, else listed again (`openat`, `getdents64`), and that listing kept once it is
    /// settled. Nil when the directory is gone.
    func registrations(of hash: UInt64, in rootFD: Int32) -> [Endpoint]? {
        let held = registrationListings.withLock { listings -> [Endpoint]? in
            guard let held = listings[hash] else { return nil }
            if let info = try? Syscall.fstat(held.descriptor), held.version == FileVersion(info) {
                return held.endpoints
            }
            Syscall.close(held.descriptor)
            listings[hash] = nil
            return nil
        }
        if let held { return held }
        guard
            let fd = try? Syscall.openat(
                rootFD, "n" + Doorbell.hex(hash), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        else { return nil }
        // The state before the listing: a change after it makes the version differ.
        guard let info = try? Syscall.fstat(fd) else {
            Syscall.close(fd)
            return nil
        }
        let version = FileVersion(info)
        // `names(consuming:)` closes what it reads; the descriptor kept is the one opened.
        let reading = try? Syscall.duplicate(fd)
        let endpoints: [Endpoint] =
            reading.map { reading in
                Self.names(consuming: reading).compactMap { id in
                    guard id.utf8.count == 16, let address = DoorbellSocket.address(root + "/e" + id) else {
                        return nil
                    }
                    return Endpoint(id: id, address: address)
                }
            } ?? []
        guard reading != nil, version.isSettled else {
            Syscall.close(fd)
            return endpoints
        }
        registrationListings.withLock { listings in
            // Each kept listing holds a descriptor: at most `keptListingLimit` of them, so a process
            // that posts to many observed names keeps its descriptors for its own files.
            if listings[hash] == nil, listings.count >= Self.keptListingLimit, let evicted = listings.first {
                Syscall.close(evicted.value.descriptor)
                listings[evicted.key] = nil
            }
            if let replaced = listings.updateValue(
                RegistrationListing(descriptor: fd, version: version, endpoints: endpoints), forKey: hash)
            {
                Syscall.close(replaced.descriptor)
            }
        }
        return endpoints
    }

    /// The most registration listings (open directories) a process keeps: 64. A post to a name
    /// beyond them lists its directory again (what that costs: docs/performance.md, *Figures
    /// behind the design*).
    static let keptListingLimit = 64

    /// How many registration listings are kept now (tests).
    var keptCount: Int { registrationListings.withLock { $0.count } }

    /// Closes the listings of registration directories that are no longer in the doorbell
    /// directory.
    private func forgetRegistrationListings(except directories: Set<UInt64>) {
        registrationListings.withLock { listings in
            for (hash, listing) in listings where !directories.contains(hash) {
                Syscall.close(listing.descriptor)
                listings[hash] = nil
            }
        }
    }

    /// The doorbell directory's registration directories (their hashes) as last listed, and
    /// its version then.
    private struct Listing {
        var version: FileVersion
        var directories: Set<UInt64>
    }

    private let listing = Locked<Listing?>(nil)

    /// Forgets the doorbell directory's listing: a registration directory it named is gone.
    func forgetListing() { listing.withLock { $0 = nil } }
    /// The parent's `fstat` when the doorbell directory was found missing.
    private let rootMissing = Locked<FileVersion?>(nil)
    /// `$XDG_RUNTIME_DIR/wormhole`, opened once it exists and is the user's (-1 before).
    private let parentDescriptor = Atomic<Int32>(-1)

    private func openParent() -> Int32? {
        let held = parentDescriptor.load(ordering: .acquiring)
        if held >= 0 { return held }
        let path = String(root.dropLast("/doorbell".count))
        guard let fd = try? Syscall.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else { return nil }
        return Self.keep(fd, checked: path, in: parentDescriptor)
    }

    /// Keeps `fd`, the directory at `path` opened, in `slot` once it is checked to be the user's
    /// and private; a descriptor another thread kept first wins (this one is closed).
    private static func keep(_ fd: Int32, checked path: String, in slot: borrowing Atomic<Int32>) -> Int32? {
        guard let info = try? Syscall.fstat(fd), (try? Doorbell.checkPrivate(info, path: path)) != nil else {
            Syscall.close(fd)
            return nil
        }
        let (exchanged, found) = slot.compareExchange(expected: -1, desired: fd, ordering: .acquiringAndReleasing)
        if exchanged { return fd }
        Syscall.close(fd)
        return found
    }

    /// The registration directories that exist (by hash), from the listing when the doorbell
    /// directory is unchanged, else listed again; nil when it cannot be said (then every
    /// candidate is opened).
    func registrationDirectories(_ rootFD: Int32) -> Set<UInt64>? {
        guard let info = try? Syscall.fstat(rootFD) else { return nil }
        let version = FileVersion(info)
        if let held = listing.withLock({ $0 }), held.version == version { return held.directories }
        guard let fd = try? Syscall.openat(rootFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) else { return nil }
        var directories = Set<UInt64>()
        for entry in Self.names(consuming: fd) where entry.utf8.count == 17 && entry.hasPrefix("n") {
            if let hash = UInt64(entry.dropFirst(), radix: 16) { directories.insert(hash) }
        }
        listing.withLock { $0 = version.isSettled ? Listing(version: version, directories: directories) : nil }
        forgetRegistrationListings(except: directories)
        return directories
    }

    /// The names in the directory at `path` (not followed if a link), without `.` and `..`; none
    /// when it cannot be opened.
    static func names(at path: String) -> [String] {
        guard let fd = try? Syscall.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else { return [] }
        return names(consuming: fd)
    }

    /// The names in the directory open at `fd` (which this call closes), without `.` and `..`;
    /// what a failed read leaves out is listed again after the next change.
    private static func names(consuming fd: Int32) -> [String] {
        let entries = (try? Syscall.readDirectory(consuming: fd)) ?? []
        return entries.map(\.name).filter { $0 != "." && $0 != ".." }
    }

    /// The root for ringing, opened once it exists and checked to be the user's.
    /// Without a doorbell directory, a post costs one `fstat` of its parent
    /// (`$XDG_RUNTIME_DIR/wormhole`, which the shared state table makes), as long as the parent
    /// is unchanged since the doorbell directory was found missing (making it adds a link).
    func openRoot() -> Int32? {
        let held = rootDescriptor.load(ordering: .acquiring)
        if held >= 0 { return held }
        let parent = openParent()
        let parentVersion = parent.flatMap { try? Syscall.fstat($0) }.map(FileVersion.init)
        if let parentVersion, let missing = rootMissing.withLock({ $0 }), missing == parentVersion { return nil }
        let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        let opened =
            if let parent { try? Syscall.openat(parent, "doorbell", flags) } else { try? Syscall.open(root, flags) }
        guard let fd = opened else {
            if let parentVersion { rootMissing.withLock { $0 = parentVersion.isSettled ? parentVersion : nil } }
            return nil
        }
        return Self.keep(fd, checked: root, in: rootDescriptor)
    }
}

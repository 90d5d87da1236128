// SPDX-License-Identifier: Apache-2.0
import Atomics
import FoundationEssentials
import Glibc
import SystemPackage
import WormholeSystem

/// A table of per-name generation counters and states in shared memory, so a check token
/// answers "posted since my last check?" with one memory load: no system call, no bus traffic.
///
/// The file is `$XDG_RUNTIME_DIR/wormhole/notify-state-v1` (or, without
/// `XDG_RUNTIME_DIR`, `/tmp/wormhole-<uid>/notify-state-v1`), mode 0600 in a 0700
/// directory owned by the user, mapped `MAP_SHARED` by every process of the user.
///
/// Layout (native byte order): a 64-byte header (`magic`, `version`, `slotCount`), then
/// `slotCount` slots of four 64-bit words: `key` (FNV-1a-64 of the name with the low bit
/// set, 0 = free), `generation`, `state`, `flags` (bit 0: a state was posted). A name's
/// slot is found by linear probing from `key % slotCount` (at most 64 probes) and claimed
/// with compare-and-swap; slots are never freed. Names that find no slot share the last
/// slot, the overflow slot, whose generation every such post bumps: more false positives,
/// never a false negative. Two names whose 64-bit keys collide share a slot the same way.
///
/// `@unchecked Sendable`: the mapping is immutable after init and only touched atomically.
final class SharedStateTable: @unchecked Sendable {
    static let magic: UInt64 = 0x5748_4E4F_5449_4631  // "WHNOTIF1"
    static let version: UInt64 = 1
    static let slotCount = 16_384
    static let maximumProbes = 64
    static let headerWords = 8
    static let slotWords = 4

    let path: String
    private let base: UnsafeMutablePointer<UInt64.AtomicRepresentation>
    private let length: Int

    /// A name's place in the table.
    struct Slot: @unchecked Sendable {
        // @unchecked: points into the shared mapping, which lives as long as the table and is
        // only accessed through atomic operations.
        fileprivate let words: UnsafeMutablePointer<UInt64.AtomicRepresentation>
        fileprivate var generation: UnsafeAtomic<UInt64> { UnsafeAtomic(at: words + 1) }
        fileprivate var state: UnsafeAtomic<UInt64> { UnsafeAtomic(at: words + 2) }
        fileprivate var flags: UnsafeAtomic<UInt64> { UnsafeAtomic(at: words + 3) }
    }

    /// The default location of the table file.
    static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return runtime + "/wormhole"
        }
        return "/tmp/wormhole-\(Syscall.effectiveUserID())"
    }

    /// Opens (creating if needed) the table in `directory`.
    init(directory: String) throws {
        try Self.checked("create", directory) { () throws(Errno) in try Syscall.mkdirUnlessPresent(directory, 0o700) }
        try Self.checkSafe(path: directory, isDirectory: true)
        path = directory + "/notify-state-v1"
        let path = path
        let fd = try Self.openTable(path)
        defer { Syscall.close(fd) }
        let info = try Self.checked("inspect", path) { () throws(Errno) in try Syscall.fstat(fd) }
        try Self.checkSafe(info, path: path)
        length = (Self.headerWords + Self.slotCount * Self.slotWords) * 8
        let length = length
        if Int(info.st_size) < length {
            try Self.checked("size", path) { () throws(Errno) in try Syscall.ftruncate(fd, length) }
        }
        let mapping = try Self.checked("map", path) { () throws(Errno) in
            try Syscall.mapShared(fd, length: length, writable: true)
        }
        base = mapping.bindMemory(to: UInt64.AtomicRepresentation.self, capacity: length / 8)
        let magic = UnsafeAtomic<UInt64>(at: base)
        let (exchanged, found) = magic.compareExchange(
            expected: 0, desired: Self.magic, ordering: .acquiringAndReleasing)
        if exchanged {
            UnsafeAtomic<UInt64>(at: base + 1).store(Self.version, ordering: .releasing)
            UnsafeAtomic<UInt64>(at: base + 2).store(UInt64(Self.slotCount), ordering: .releasing)
        } else if found != Self.magic {
            Syscall.unmap(mapping, length: length)
            throw WormholeError(.io, value: path, "\(path) is not a Wormhole notification table (bad magic)")
        }
    }

    deinit { Syscall.unmap(UnsafeMutableRawPointer(base), length: length) }

    /// Runs `call`; its failure becomes an `io` error saying what could not be done to `path`.
    private static func checked<T>(_ action: String, _ path: String, _ call: () throws(Errno) -> T)
        throws(WormholeError) -> T
    {
        switch Result(catching: call) {
        case .success(let value): return value
        case .failure(let error): throw ioError(error, action, path)
        }
    }

    /// Opens (creating) the table file, refusing a symlink.
    private static func openTable(_ path: String) throws(WormholeError) -> Int32 {
        switch Result(catching: { () throws(Errno) in
            try Syscall.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        }) {
        case .success(let fd): return fd
        case .failure(let error) where error == .tooManySymbolicLinkLevels:
            throw WormholeError(.unsafePath, value: path, "cannot open \(path): it is a symlink")
        case .failure(let error): throw ioError(error, "open", path)
        }
    }

    private static func checkSafe(path: String, isDirectory: Bool) throws {
        try checkSafe(checked("inspect", path) { () throws(Errno) in try Syscall.lstat(path) }, path: path)
    }

    private static func checkSafe(_ info: stat, path: String) throws {
        if info.st_mode & S_IFMT == S_IFLNK {
            throw WormholeError(.unsafePath, value: path, "\(path) is a symlink; refusing to follow it")
        }
        if info.st_uid != Syscall.effectiveUserID() {
            throw WormholeError(
                .unsafePath, value: path,
                "\(path) is owned by uid \(info.st_uid), not by this user (\(Syscall.effectiveUserID()))")
        }
        if info.st_mode & 0o022 != 0 {
            throw WormholeError(
                .unsafePath, value: path,
                "\(path) is writable by group or others (mode \(String(info.st_mode & 0o777, radix: 8)))")
        }
    }

    /// Finds or claims the slot of `name`; the overflow slot when the table is crowded there.
    func slot(for name: String) -> Slot {
        let key = NotifyContract.fnv1a64(name.utf8) | 1
        let usable = UInt64(Self.slotCount - 1)
        for probe in 0..<UInt64(Self.maximumProbes) {
            let index = Int((key &+ probe) % usable)
            let words = base + Self.headerWords + index * Self.slotWords
            let keyWord = UnsafeAtomic<UInt64>(at: words)
            let current = keyWord.load(ordering: .acquiring)
            if current == key { return Slot(words: words) }
            if current == 0 {
                let (exchanged, found) = keyWord.compareExchange(
                    expected: 0, desired: key, ordering: .acquiringAndReleasing)
                if exchanged || found == key { return Slot(words: words) }
            }
        }
        return Slot(words: base + Self.headerWords + (Self.slotCount - 1) * Self.slotWords)
    }

    /// Records a post: sets the state (when given) and bumps the generation, in that order,
    /// so a checker that sees the new generation also sees the new state.
    func recordPost(_ slot: Slot, state: UInt64?) {
        if let state {
            slot.state.store(state, ordering: .relaxed)
            slot.flags.store(1, ordering: .relaxed)
        }
        slot.generation.wrappingIncrement(ordering: .releasing)
    }

    /// The generation of a slot: it changes with every post of a name that uses the slot.
    func generation(_ slot: Slot) -> UInt64 { slot.generation.load(ordering: .acquiring) }

    /// The last state posted for the slot's name, or `nil` if no post carried one.
    func state(_ slot: Slot) -> UInt64? {
        slot.flags.load(ordering: .acquiring) & 1 == 1 ? slot.state.load(ordering: .acquiring) : nil
    }
}

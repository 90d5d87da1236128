// SPDX-License-Identifier: Apache-2.0
import Atomics
import Glibc
import SystemPackage
import WormholeSystem

/// The change counter of one suite, `<root>/<group>/Preferences/<suite>.json.changes`
/// (contract section 5, docs/shared-defaults.md): 8 bytes, an unsigned 64-bit little-endian count that
/// every Wormhole writer of the suite increments under the suite's lock, after its rename. A
/// reader maps it once and compares it with the count its cache was read at: one load from
/// shared memory, no system call (what `notify_check` does with notifyd's shared page).
///
/// The file is created (mode 0600, 8 zero bytes) by the first writer that needs it, and never
/// truncated, replaced or removed by the library: a mapped file that shrinks would fault its
/// readers (`SIGBUS`), and a replaced one would leave them watching the old count.
///
/// `@unchecked Sendable`: the mapping is immutable after init, lives as long as the object and is
/// only touched through atomic operations.
final class SuiteChangeCounter: @unchecked Sendable {
    static let length = 8

    let path: String
    /// Whether this mapping may increment (a writer's); a reader's is read-only.
    let writable: Bool
    private let mapping: UnsafeMutableRawPointer
    private var word: UnsafeAtomic<UInt64> {
        UnsafeAtomic(at: mapping.assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }

    /// Maps the counter file open at `file`. A writer (`writable`) sizes a new, empty file to 8
    /// zero bytes first; a reader gets nil for a file shorter than 8 bytes (a writer is creating
    /// it: the reader checks the suite file's status meanwhile).
    init?(_ file: OpenFile, writable: Bool) throws(WormholeError) {
        path = file.path
        self.writable = writable
        let status: stat
        do throws(Errno) {
            status = try Syscall.fstat(file.descriptor)
            if Int(status.st_size) < Self.length {
                guard writable else { return nil }
                try Syscall.ftruncate(file.descriptor, Self.length)
            }
            mapping = try Syscall.mapShared(file.descriptor, length: Self.length, writable: writable)
        } catch {
            throw ioError(error, "map the change counter", file.path)
        }
    }

    deinit { Syscall.unmap(mapping, length: Self.length) }

    /// The count as stored (compared for equality only, so the byte order does not matter here).
    var value: UInt64 { word.load(ordering: .acquiring) }

    /// Adds one, and returns the new stored word. Only under the suite's lock: writers take turns,
    /// so a load and a store are an increment.
    func increment() -> UInt64 {
        precondition(writable, "the change counter was mapped read-only")
        let next = (UInt64(littleEndian: word.load(ordering: .acquiring)) &+ 1).littleEndian
        word.store(next, ordering: .releasing)
        return next
    }
}

// SPDX-License-Identifier: Apache-2.0
internal import CWormholeSystem  // the CPU a mark is taken on (cwormhole_current_cpu)
import Glibc
import Synchronization

/// A diagnostic timeline of the doorbell's hop, off unless `WORMHOLE_HOP_TRACE` names a file
/// prefix: then every ``mark(_:)`` stores a `CLOCK_MONOTONIC` time stamp and its point in a
/// preallocated buffer with the CPU it ran on (no allocation, no lock, no system call: the clock
/// and `sched_getcpu` are read from the vDSO), and a normal exit writes them as text lines
/// `NANOSECONDS POINT CPU` to `<prefix>.<pid>`
/// (`scripts/hop-timeline.py` merges the files of the two processes of a ping-pong into per-step
/// figures). Turned off, a mark costs one load and a branch. Not for the normal path: for the
/// bench's helpers, by hand (docs/performance.md, *The doorbell*).
package enum HopTrace {
    /// Where a time stamp is taken, in the order a hop passes them.
    package enum Point: UInt8, CaseIterable, Sendable {
        /// The loop's `epoll_wait` returned.
        case epollReturned = 1
        /// The endpoint's rings were read (`recvmsg` until `EAGAIN`).
        case ringRead
        /// A ring was decoded and is handed to the observers it names.
        case ringDecoded
        /// An observer's handler is about to be called.
        case handlerEntered
        /// `post()` was entered.
        case postEntered
        /// The ringing side knows whom to ring (the registration directories looked up).
        case lookupDone
        /// A ring's `sendto` returned.
        case ringSent
        /// The bus signal was built and is handed to the connection.
        case emitEntered
        /// The bus signal was handed to libdbus (written, when the socket took it).
        case signalWritten
        /// The bus connection's descriptor was ready.
        case busReady
        /// A duplicate bus signal was dropped in the filter.
        case duplicateDropped
        /// The loop's iteration ended.
        case iterationEnded
        /// The ringing side starts its lookup.
        case ringEntered
        /// The doorbell directory's listing is known (from its cache or listed again).
        case listingDone
        /// The bus message is built (libdbus), before it is sent.
        case messageBuilt
        /// libdbus's filter looks at a signal that may be a duplicate (it was read and parsed).
        case duplicateChecked
        /// `post()` returns to its caller.
        case postReturned
        /// The connection took the bus signal (queued or about to be written): the ring may go.
        case signalAccepted
    }

    private static let capacity = 1 << 21

    private struct Storage: @unchecked Sendable {
        // @unchecked: written only through a slot claimed by an atomic increment, read at exit.
        let entries: UnsafeMutablePointer<UInt64>
        let path: String
    }

    private static let storage: Storage? = {
        guard let prefix = Syscall.environment("WORMHOLE_HOP_TRACE"), !prefix.isEmpty else {
            return nil
        }
        // Two words a mark: the time, then the CPU and the point.
        let entries = UnsafeMutablePointer<UInt64>.allocate(capacity: 2 * capacity)
        // Touch every page now, so that no mark takes a page fault.
        entries.initialize(repeating: 0, count: 2 * capacity)
        atexit { HopTrace.write() }
        return Storage(entries: entries, path: prefix + "." + String(Syscall.processID()))
    }()

    private static let next = Atomic<Int>(0)

    /// Whether marks are recorded in this process.
    package static var isEnabled: Bool { storage != nil }

    /// Records the time at `point` (when enabled).
    @inline(__always)
    package static func mark(_ point: Point) {
        guard let storage else { return }
        record(point, storage)
    }

    private static func record(_ point: Point, _ storage: Storage) {
        let now = Syscall.monotonicNanoseconds()
        let slot = next.wrappingAdd(1, ordering: .relaxed).oldValue
        guard slot < capacity else { return }
        storage.entries[2 * slot] = now
        storage.entries[2 * slot + 1] =
            UInt64(UInt32(bitPattern: cwormhole_current_cpu())) << 8 | UInt64(point.rawValue)
    }

    /// At exit: the marks as text, in the order they were taken.
    private static func write() {
        guard let storage else { return }
        let count = min(next.load(ordering: .relaxed), capacity)
        guard let file = fopen(storage.path, "w") else { return }
        for index in 0..<count {
            let (time, entry) = (storage.entries[2 * index], storage.entries[2 * index + 1])
            guard time != 0, let point = Point(rawValue: UInt8(entry & 0xFF)) else { continue }
            fputs("\(time) \(point) \(entry >> 8)\n", file)
        }
        fclose(file)
    }
}

// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// One connection's libdbus watches and timeouts, as the process's loop sees them: which
/// descriptors to wait on for what, and which timeouts are due. Owner-confined, like the
/// connection (``BusIO``) that holds it; it calls no libdbus function of its own but a due
/// timeout's handler and a ready watch's.
struct LibDBusWatches {
    /// A timeout libdbus asked for, and when it is next due (monotonic milliseconds).
    private struct Record {
        var intervalMilliseconds: Int
        var enabled: Bool
        var deadline: UInt64
    }

    private var watches: [Int32: [LibDBus.Watch]] = [:]
    private var timeouts: [LibDBus.Timeout: Record] = [:]
    /// No enabled timeout is due before this (it may be earlier than the true next deadline, never
    /// later: removing a timeout leaves it as it was). Keeps each loop iteration O(1) however many
    /// replies are awaited (one per pending `AddMatch` when thousands are sent at once); the
    /// timeouts are scanned only when it passes.
    private var earliestDeadline = UInt64.max

    /// Whether libdbus has no timeout now.
    var hasNoTimeouts: Bool { timeouts.isEmpty }

    /// The earliest time an enabled timeout may be due, `UInt64.max` for none.
    mutating func nextDeadline() -> UInt64 {
        if timeouts.isEmpty { earliestDeadline = .max }
        return earliestDeadline
    }

    /// Forgets every watch and timeout (the libdbus connection is gone).
    mutating func removeAll() {
        watches = [:]
        timeouts = [:]
        earliestDeadline = .max
    }

    /// What the loop waits for on `fd`: the union of its enabled watches' wishes.
    func interest(in fd: Int32) -> Interest {
        var interest = Interest()
        for watch in watches[fd] ?? [] where watch.isEnabled {
            if watch.wantsReadable { interest.readable = true }
            if watch.wantsWritable { interest.writable = true }
        }
        return interest
    }

    /// Adds `watch`; returns its descriptor, whose interest changed.
    mutating func add(_ watch: LibDBus.Watch) -> Int32 {
        watches[watch.fd, default: []].append(watch)
        return watch.fd
    }

    /// Removes `watch`; returns the descriptors whose interest changed.
    mutating func remove(_ watch: LibDBus.Watch) -> [Int32] {
        var changed: [Int32] = []
        for (fd, list) in watches where list.contains(watch) {
            let rest = list.filter { $0 != watch }
            watches[fd] = rest.isEmpty ? nil : rest
            changed.append(fd)
        }
        return changed
    }

    /// The descriptors of `watch`, whose interest changed when it was enabled or disabled.
    func descriptors(of watch: LibDBus.Watch) -> [Int32] {
        watches.compactMap { fd, list in list.contains(watch) ? fd : nil }
    }

    /// The watches on `fd` now.
    func watches(on fd: Int32) -> [LibDBus.Watch] { watches[fd] ?? [] }

    /// Records that libdbus added, changed or removed `timeout`.
    mutating func change(_ timeout: LibDBus.Timeout, removed: Bool, now: UInt64) {
        if removed {
            timeouts[timeout] = nil
        } else {
            let interval = timeout.intervalMilliseconds
            let record = Record(
                intervalMilliseconds: interval, enabled: timeout.isEnabled, deadline: now + UInt64(max(0, interval)))
            timeouts[timeout] = record
            if record.enabled { earliestDeadline = min(earliestDeadline, record.deadline) }
        }
    }

    /// The timeouts due at `now`, each given its next deadline (libdbus's timeouts repeat until
    /// it removes them). The caller handles each, checking ``isPresent(_:)`` first: handling one
    /// may remove others.
    mutating func takeDue(now: UInt64) -> [LibDBus.Timeout] {
        // Most iterations have no libdbus timeout at all (they exist only while a reply is awaited).
        if timeouts.isEmpty {
            earliestDeadline = .max
            return []
        }
        guard earliestDeadline <= now else { return [] }
        let due = timeouts.filter { $0.value.enabled && $0.value.deadline <= now }.map(\.key)
        for timeout in due {
            guard var record = timeouts[timeout] else { continue }
            record.deadline = now + UInt64(max(0, record.intervalMilliseconds))
            timeouts[timeout] = record
        }
        return due
    }

    /// Whether libdbus still has `timeout`.
    func isPresent(_ timeout: LibDBus.Timeout) -> Bool { timeouts[timeout] != nil }

    /// After the due timeouts were handled: the next deadline, from what is left.
    mutating func settle() {
        earliestDeadline = timeouts.values.lazy.filter(\.enabled).map(\.deadline).min() ?? .max
    }
}

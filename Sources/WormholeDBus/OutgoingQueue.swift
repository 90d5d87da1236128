// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// The signals a connection accepted and has not handed to libdbus yet, bounded by bytes, in
/// the order they were accepted, with the marks of the loop jobs queued among them.
///
/// - Bytes: the queue holds at most `limit` bytes (a message's size as libdbus will write it,
///   estimated from its arguments). What does not fit is refused at the call; a caller may
///   wait (bounded) for room.
/// - Replacing: a message with a `key` (a `Posted` signal's interface and name) replaces the
///   queued message with the same key, in place: a stateless wake-up storm toward a stalled
///   bus costs one entry per name.
/// - Order: a job queued on the loop while messages wait carries a mark (the sequence number
///   of the next message); the messages before it are written before the job runs, those
///   after it only once it ran (``EventLoop`` runs jobs and a connection's writes at different
///   points of an iteration, so without the marks a signal could overtake a `RemoveMatch`).
///
/// A value type behind the connection's lock; not thread-safe itself.
struct OutgoingQueue<Message> {
    struct Entry {
        var message: Message
        var bytes: Int
        var key: String?
    }

    /// The entries; those before `head` were taken.
    private var entries: [Entry?] = []
    private var head = 0
    /// The sequence number of `entries[0]`.
    private var base: UInt64 = 0
    /// Where each queued message with a key is, by key (a sequence number).
    private var keyed: [String: UInt64] = [:]
    /// The marks of the jobs not yet run, oldest first.
    private var marks: [UInt64] = []
    private var markHead = 0

    /// Bytes queued.
    private(set) var bytes = 0
    /// How many messages a newer one with the same key replaced, ever.
    private(set) var replaced: UInt64 = 0
    /// The most bytes the queue holds.
    let limit: Int

    init(limit: Int) { self.limit = max(1, limit) }

    /// The sequence number the next message gets.
    private var next: UInt64 { base + UInt64(entries.count) }

    var isEmpty: Bool { head == entries.count }
    var count: Int { entries.count - head }
    /// Whether jobs queued on the loop have not run yet.
    var hasPendingJobs: Bool { markHead < marks.count }

    /// Whether a message of `size` bytes fits now (replacing the queued message with `key`
    /// when `replacing`).
    func fits(_ size: Int, key: String?, replacing: Bool = true) -> Bool {
        if replacing, let key, let sequence = keyed[key], let old = entries[Int(sequence - base)] {
            return bytes - old.bytes + size <= limit
        }
        return bytes + size <= limit || isEmpty
    }

    /// Appends a message, or, when `replacing`, replaces the queued one with the same key.
    /// Returns false (and queues nothing) when it does not fit. An empty queue always takes one
    /// message, so a message larger than the limit is not refused forever. A message appended
    /// with a key is the one a later replacement of that key replaces (the newest).
    mutating func append(_ message: Message, bytes size: Int, key: String?, replacing: Bool = true) -> Bool {
        guard fits(size, key: key, replacing: replacing) else { return false }
        if replacing, let key, let sequence = keyed[key], let old = entries[Int(sequence - base)] {
            entries[Int(sequence - base)] = Entry(message: message, bytes: size, key: key)
            bytes += size - old.bytes
            replaced += 1
            return true
        }
        if let key {
            // An older entry with the key stays, no longer the one to replace.
            if let sequence = keyed[key] { entries[Int(sequence - base)]?.key = nil }
            keyed[key] = next
        }
        entries.append(Entry(message: message, bytes: size, key: key))
        bytes += size
        return true
    }

    /// Records a job queued now: the messages queued so far go before it.
    mutating func markJob() {
        marks.append(next)
    }

    /// Forgets the mark just made: the job was not queued after all.
    mutating func unmarkLastJob() {
        if marks.count > markHead { marks.removeLast() }
    }

    /// The job queued first is about to run: takes the messages queued before it (all of them
    /// must be written before the job).
    mutating func takeBeforeJob() -> [Message] {
        guard markHead < marks.count else { return [] }
        let mark = marks[markHead]
        markHead += 1
        if markHead > 64 && markHead * 2 > marks.count {
            marks.removeFirst(markHead)
            markHead = 0
        }
        return take(upTo: mark, maximumBytes: .max)
    }

    /// Takes messages from the front, oldest first, up to `maximumBytes` (at least one when any
    /// may go), but none queued after a job that has not run.
    mutating func take(maximumBytes: Int) -> [Message] {
        take(upTo: markHead < marks.count ? marks[markHead] : .max, maximumBytes: maximumBytes)
    }

    private mutating func take(upTo mark: UInt64, maximumBytes: Int) -> [Message] {
        var taken: [Message] = []
        var size = 0
        while head < entries.count, base + UInt64(head) < mark {
            guard let entry = entries[head] else {
                head += 1
                continue
            }
            if !taken.isEmpty && size + entry.bytes > maximumBytes { break }
            taken.append(entry.message)
            size += entry.bytes
            bytes -= entry.bytes
            if let key = entry.key { keyed[key] = nil }
            entries[head] = nil
            head += 1
        }
        compact()
        return taken
    }

    /// Drops every message (the connection went away); returns how many there were. Jobs keep
    /// their marks (they still run, in order).
    mutating func removeAll() -> Int {
        let dropped = count
        base = next
        entries = []
        head = 0
        keyed = [:]
        bytes = 0
        return dropped
    }

    private mutating func compact() {
        if head == entries.count {
            base = next
            entries.removeAll(keepingCapacity: entries.count < 4096)
            head = 0
        } else if head > 1024 && head * 2 > entries.count {
            entries.removeFirst(head)
            base += UInt64(head)
            head = 0
        }
    }
}

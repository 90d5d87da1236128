// SPDX-License-Identifier: Apache-2.0
/// One observer's merge of the two ways a Wormhole post reaches it, its ring and its bus signal
/// (contract §1 v1.3 and §9): each post delivered at most once, whichever comes first, and the
/// posts of one sender's name in the order that sender made them.
///
/// Every post of a process with a doorbell carries a serial from one increasing sequence (its
/// signal's header serial, and its ring), and its ring also carries the serial of the sender's
/// previous post of the same name on the same connection (``Ring/previous``). Signals of one
/// sender arrive in the order it sent them (the bus keeps a connection's order), and so the rule
/// is, per (sender, name):
/// - a signal or ring whose serial is not above the highest delivered is a duplicate (or a post
///   that a newer one already stands for), and is dropped;
/// - a signal above it is delivered;
/// - a ring above it is delivered only when its previous post is known to be delivered (or it
///   has none); otherwise it waits ("held") until the signal of that previous post, or a later
///   one, has come: a ring never overtakes a post that is still on its way through the bus.
///
/// Every numbered signal and every ring makes or updates an entry for its (sender, name), so a
/// ring that comes after its signal is known as a duplicate. Memory is bounded: an entry that
/// waits for nothing may be forgotten, and then its sender's *floor* rises to the serial it had
/// delivered: a ring without an entry is delivered only above its sender's floor (and a ring at
/// or below it waits for its signal instead). When too many senders have a floor, the oldest
/// connections' floors are forgotten too, and a ring from any connection numbered at or below
/// them (the bus numbers unique names `:1.N` in increasing order) needs an entry made by a
/// signal first. Every bound drops or holds a ring, never a signal: a ring not delivered costs
/// latency (its signal delivers it), never a delivery and never a duplicate. Entries that wait
/// (a ring delivered whose signal has not come, or a ring held) are never forgotten.
package struct PostOrder {
    /// A ring as this merge sees it.
    package struct Ring: Equatable, Sendable {
        package var sender: String
        package var name: String
        package var serial: UInt32
        /// The serial of the sender's previous post of `name` on its connection: 0 when it made
        /// none, nil when it does not know (it forgot, past its own bound).
        package var previous: UInt32?
        package var state: UInt64

        package init(sender: String, name: String, serial: UInt32, previous: UInt32?, state: UInt64) {
            (self.sender, self.name, self.serial, self.previous, self.state) = (sender, name, serial, previous, state)
        }
    }

    package init() {}

    private struct Key: Hashable {
        var sender: String
        var name: String
    }

    private struct Entry {
        /// The highest serial delivered, by ring or signal; nil until known (an entry made by a
        /// ring that had to wait).
        var delivered: UInt32?
        /// Serials delivered by a ring whose signal has not come (increasing).
        var rung: [UInt32] = []
        /// Rings waiting for an earlier post's signal (increasing serials).
        var held: [Ring] = []

        var isIdle: Bool { rung.isEmpty && held.isEmpty }
    }

    /// The most rings delivered ahead of their signals, over every entry: past it, rings are
    /// dropped until the bus catches up (an observer that was stopped while a storm was posted:
    /// the daemon keeps its signals while the rings keep coming).
    package static let rungLimit = 8_192
    /// The most rings waiting for an earlier signal, over every entry.
    package static let heldLimit = 4_096
    /// The most entries; past it an entry that waits for nothing is forgotten, or the ring is
    /// dropped when none can be.
    package static let entryLimit = 4_096

    /// The most senders with a floor; past it the lowest-numbered are forgotten.
    package static let floorLimit = 1_024

    private var entries: [Key: Entry] = [:]
    /// Per sender: the highest serial an entry forgot (``PostOrder``).
    private var floors: [String: UInt32] = [:]
    /// Connections numbered at or below this one (`:1.N`) may have had a floor that was forgotten.
    private var forgottenSenders: UInt64?
    /// A floor of a sender whose unique name has no number was forgotten.
    private var forgotUnnumbered = false
    package private(set) var rungCount = 0
    package private(set) var heldCount = 0

    /// Whether nothing was ever taken in (a signal then needs no lookup while no ring came).
    package var isEmpty: Bool { entries.isEmpty && floors.isEmpty }

    /// A ring came: the rings to deliver now, in order (none, this one, or this one and rings
    /// that waited behind it).
    package mutating func ring(_ ring: Ring) -> [Ring] {
        let key = Key(sender: ring.sender, name: ring.name)
        var made = false
        if entries[key] == nil {
            // Without an entry, only a ring above its sender's floor cannot have been delivered.
            guard isAboveFloor(ring.sender, ring.serial), let entry = newEntry() else { return [] }
            entries[key] = entry
            made = true
        }
        var entry = entries[key]!
        defer { entries[key] = entry }
        if let delivered = entry.delivered, !Self.isAfter(ring.serial, delivered) { return [] }
        if let previous = ring.previous, previous == 0 || (entry.delivered.map { !Self.isAfter(previous, $0) } ?? false)
        {
            guard rungCount < Self.rungLimit else { return [] }
            var out = [take(ring, into: &entry)]
            release(&entry, into: &out)
            return out
        }
        // An earlier post of this name may still be on its way: wait for its signal.
        guard heldCount < Self.heldLimit else {
            if made { raiseFloor(ring.sender, to: ring.serial) }
            return []
        }
        let index = entry.held.firstIndex { !Self.isAfter(ring.serial, $0.serial) } ?? entry.held.endIndex
        if index < entry.held.endIndex && entry.held[index].serial == ring.serial { return [] }
        entry.held.insert(ring, at: index)
        heldCount += 1
        return []
    }

    /// A numbered signal from `sender` for `name` with `serial` came: whether to deliver it, and
    /// the rings that waited for it, to deliver after it.
    package mutating func signal(sender: String, name: String, serial: UInt32) -> (deliver: Bool, then: [Ring]) {
        let key = Key(sender: sender, name: name)
        guard var entry = entries[key] else {
            // Not rung for this post (no entry, so no ring delivered it): delivered, and kept so
            // that its ring, if it comes later, is not.
            if let entry = newEntry() {
                entries[key] = entry
                entries[key]?.delivered = serial
            } else {
                raiseFloor(sender, to: serial)
            }
            return (true, [])
        }
        defer { entries[key] = entry }
        // Every signal of this sender's name before this one has come (the bus keeps a
        // connection's order): what was rung up to here is settled, and no waiting ring at or
        // below it has a signal to come.
        let settled = entry.rung.prefix { !Self.isAfter($0, serial) }.count
        entry.rung.removeFirst(settled)
        rungCount -= settled
        let passed = entry.held.prefix { !Self.isAfter($0.serial, serial) }.count
        entry.held.removeFirst(passed)
        heldCount -= passed
        if let delivered = entry.delivered, !Self.isAfter(serial, delivered) { return (false, []) }
        entry.delivered = serial
        var out: [Ring] = []
        release(&entry, into: &out)
        return (true, out)
    }

    /// A signal that the connection dropped undecoded because this observer's ring delivered it.
    package mutating func absorbed(sender: String, name: String, serial: UInt32) {
        _ = signal(sender: sender, name: name, serial: serial)
    }

    /// Forgets everything (the observer's connection is new: no signal of before will come).
    package mutating func reset() {
        entries = [:]
        floors = [:]
        forgottenSenders = nil
        forgotUnnumbered = false
        rungCount = 0
        heldCount = 0
    }

    /// Whether serial `a` comes after `b` in a sender's sequence. Serials count in their low 31
    /// bits (the high bit is always set) and wrap after 2^31 posts, so they are compared as
    /// serial numbers are (RFC 1982): `a` is later when it is less than 2^30 steps ahead.
    package static func isAfter(_ a: UInt32, _ b: UInt32) -> Bool {
        let distance = (a &- b) & 0x7FFF_FFFF
        return distance != 0 && distance < 0x4000_0000
    }

    private mutating func take(_ ring: Ring, into entry: inout Entry) -> Ring {
        entry.delivered = ring.serial
        entry.rung.append(ring.serial)
        rungCount += 1
        return ring
    }

    /// Moves the waiting rings whose previous post is now delivered out, in order.
    private mutating func release(_ entry: inout Entry, into out: inout [Ring]) {
        while let first = entry.held.first, let delivered = entry.delivered {
            if !Self.isAfter(first.serial, delivered) {
                entry.held.removeFirst()
                heldCount -= 1
                continue
            }
            guard let previous = first.previous, previous == 0 || !Self.isAfter(previous, delivered),
                rungCount < Self.rungLimit
            else { return }
            entry.held.removeFirst()
            heldCount -= 1
            out.append(take(first, into: &entry))
        }
    }

    /// A new entry, making room when the table is full by forgetting one that waits for nothing
    /// (its sender's floor rises to what it delivered); nil when none can be forgotten.
    private mutating func newEntry() -> Entry? {
        if entries.count >= Self.entryLimit {
            guard let (key, idle) = entries.first(where: { $0.value.isIdle }) else { return nil }
            entries[key] = nil
            if let delivered = idle.delivered { raiseFloor(key.sender, to: delivered) }
        }
        return Entry()
    }

    /// No ring of `sender` at or below `serial` is delivered without an entry.
    private mutating func raiseFloor(_ sender: String, to serial: UInt32) {
        if let floor = floors[sender] {
            if Self.isAfter(serial, floor) { floors[sender] = serial }
            return
        }
        if floors.count >= Self.floorLimit {
            // The lowest-numbered connection's floor goes; every connection numbered at or
            // below it then needs a signal before its rings are delivered.
            let lowest = floors.keys.min { (Self.number($0) ?? 0) < (Self.number($1) ?? 0) }!
            floors[lowest] = nil
            if let number = Self.number(lowest) {
                forgottenSenders = max(forgottenSenders ?? 0, number)
            } else {
                forgotUnnumbered = true
            }
        }
        floors[sender] = serial
    }

    private func isAboveFloor(_ sender: String, _ serial: UInt32) -> Bool {
        if let floor = floors[sender] { return Self.isAfter(serial, floor) }
        guard let number = Self.number(sender) else { return !forgotUnnumbered }
        return forgottenSenders.map { number > $0 } ?? true
    }

    /// The number of a unique name `:1.N` (dbus-daemon's and dbus-broker's form), or nil.
    static func number(_ sender: String) -> UInt64? {
        guard sender.hasPrefix(":"), let dot = sender.lastIndex(of: ".") else { return nil }
        return UInt64(sender[sender.index(after: dot)...])
    }
}

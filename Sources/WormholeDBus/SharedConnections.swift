// SPDX-License-Identifier: Apache-2.0
import Logging
import WormholeSystem

/// A process's shared connections, one per bus and purpose (``BusConnection/shared(address:purpose:in:connectTimeout:logger:)``),
/// a field of `Wormhole`'s runtime object:
/// every facade of the layers above (notification centers, message centers, shared defaults,
/// journals) holds a handle of the same connection, so a process has one unique name, one I/O
/// thread and one epoll instance per bus, as a GDBus process has one session connection that
/// every proxy shares.
///
/// Entries are keyed by ``BusAddress/sharingKey``, so every spelling of one address (with or
/// without `guid=`, keys in another order) finds the same connection. An entry counts its
/// handles; the connection stops when the last one is released. A connection that could not be
/// made leaves no entry: the next caller tries again.
package final class SharedConnections: Sendable {
    /// One shared connection.
    final class Entry: Sendable {
        let key: String
        let io: BusIO

        init(key: String, io: BusIO) {
            self.key = key
            self.io = io
        }
    }

    /// Each bus's connection and how many handles hold it.
    private let table = Locked<[String: (entry: Entry, handles: Int)]>([:])

    package init() {}

    /// The outgoing limit of the shared connections: `WORMHOLE_OUTGOING_LIMIT` (bytes) from the
    /// environment when it is set, else ``BusConnection/defaultOutgoingLimit``.
    static let outgoingLimit: Int = {
        if let text = Syscall.environment("WORMHOLE_OUTGOING_LIMIT"), let value = Int(text), value > 0 {
            return value
        }
        return BusConnection.defaultOutgoingLimit
    }()

    /// A reference to the shared connection for `address`, connecting first when there is none.
    /// The connection is made outside the table's lock (a slow bus delays only its own callers);
    /// when two threads connect at once the first to finish wins and the other's connection is
    /// closed.
    func acquire(
        address: BusAddress, purpose: BusConnection.SharedPurpose, connectTimeout: Duration, logger: Logger
    ) throws(BusError) -> Entry {
        let key = purpose == .signals ? address.sharingKey : "\(purpose.rawValue) \(address.sharingKey)"
        if let entry = retain(key) { return entry }
        let io = try BusIO(
            address: address, automaticReconnect: true, connectTimeout: connectTimeout,
            outgoingLimit: Self.outgoingLimit, logger: logger)
        let (entry, lost) = table.withLock { table -> (Entry, Bool) in
            if let held = table[key] {
                table[key]?.handles += 1
                return (held.entry, true)
            }
            let entry = Entry(key: key, io: io)
            table[key] = (entry, 1)
            return (entry, false)
        }
        if lost { io.stop() }
        return entry
    }

    /// One more handle of the connection under `key`, if there is one.
    private func retain(_ key: String) -> Entry? {
        table.withLock { table -> Entry? in
            guard let held = table[key] else { return nil }
            table[key]?.handles += 1
            return held.entry
        }
    }

    /// Drops one handle's reference; the last one stops the connection.
    func release(_ entry: Entry) {
        let last = table.withLock { table -> Bool in
            guard let held = table[entry.key], held.entry === entry else { return false }
            if held.handles > 1 {
                table[entry.key]?.handles -= 1
                return false
            }
            table[entry.key] = nil
            return true
        }
        if last { entry.io.stop() }
    }
}

extension BusAddress {
    /// What identifies the bus an address names, whatever its spelling: each entry's transport
    /// and key-value pairs as libdbus parses them (unescaped), sorted by key, without `guid=`
    /// (one daemon's addresses are written with and without it). Two addresses with the same
    /// key reach the same bus; a process shares one connection per key.
    package var sharingKey: String {
        guard let entries = try? LibDBus.parseAddress(rawValue) else { return rawValue }
        return entries.map { entry in
            let pairs = entry.values.filter { $0.key != "guid" }.sorted { $0.key < $1.key }.map {
                "\($0.key)=\($0.value)"
            }
            return "\(entry.method):\(pairs.joined(separator: ","))"
        }.joined(separator: ";")
    }
}

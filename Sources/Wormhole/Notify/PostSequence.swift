// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// The serials of a process's posts, and each name's latest per connection (for the
/// `previous` of a ring, ``PostOrder``).
struct PostSequence {
    struct Key: Hashable {
        var busKey: UInt64
        var sender: String
        /// The connection's number (``BusConnection/identity``): a unique name may recur.
        var session: UInt64
        var name: String
    }

    private struct Sender: Hashable {
        var busKey: UInt64
        var sender: String
        var session: UInt64
    }

    /// The most names remembered; past it the table is emptied and the connections it held say
    /// "not known" for the names they posted before (their rings then wait for their signals).
    static let memory = 16_384

    /// The low 31 bits of the last serial given.
    private var last: UInt32 = 0
    private var latest: [Key: UInt32] = [:]
    private var forgetful: Set<Sender> = []

    /// The next serial: the high bit set, the low 31 bits counting up (and wrapping; receivers
    /// compare serials as serial numbers, ``PostOrder/isAfter(_:_:)``).
    mutating func nextSerial() -> UInt32 {
        last = (last &+ 1) & 0x7FFF_FFFF
        return last | DoorbellSocket.serialMark
    }

    /// Records `serial` as the latest post of `key`; returns the one before it.
    mutating func record(_ key: Key, serial: UInt32) -> UInt32? {
        if latest.count >= Self.memory && latest[key] == nil {
            for key in latest.keys {
                forgetful.insert(Sender(busKey: key.busKey, sender: key.sender, session: key.session))
            }
            latest = [:]
        }
        let previous = latest.updateValue(serial, forKey: key)
        if let previous { return previous }
        return forgetful.contains(Sender(busKey: key.busKey, sender: key.sender, session: key.session)) ? nil : 0
    }
}

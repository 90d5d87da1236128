// SPDX-License-Identifier: Apache-2.0
// The doorbell's merge of rings and signals (contract §1 v1.3, §9), as a pure rule: each post
// delivered once whichever way comes first, a sender's posts of a name in its order, and every
// bound drops or holds a ring, never a signal. The cross-process tests are in DoorbellTests.

import Testing
import Wormhole

@Suite("Doorbell: the merge of rings and signals (PostOrder)")
struct PostOrderTests {
    static let x = ":1.7"
    /// Serials as a sender numbers its posts: the high bit set.
    static func s(_ n: UInt32) -> UInt32 { 0x8000_0000 | n }

    static func ring(_ n: UInt32, previous: UInt32?, name: String = "n", sender: String = x) -> PostOrder.Ring {
        PostOrder.Ring(
            sender: sender, name: name, serial: s(n), previous: previous.map { $0 == 0 ? 0 : s($0) }, state: UInt64(n))
    }

    /// Feeds events and returns the serials delivered, in order (low 31 bits).
    static func deliveries(_ events: [Event]) -> [UInt32] {
        var order = PostOrder()
        var out: [UInt32] = []
        for event in events {
            switch event {
            case .ring(let ring): out += order.ring(ring).map { $0.serial & 0x7FFF_FFFF }
            case .signal(let n, let name, let sender):
                let (deliver, then) = order.signal(sender: sender, name: name, serial: s(n))
                if deliver { out.append(n) }
                out += then.map { $0.serial & 0x7FFF_FFFF }
            }
        }
        return out
    }

    enum Event {
        case ring(PostOrder.Ring)
        case signal(UInt32, name: String = "n", sender: String = x)
    }

    @Test("a ring first, then its signal: delivered once; a signal first, then its ring: delivered once")
    func onceEitherWay() {
        #expect(Self.deliveries([.ring(Self.ring(1, previous: 0)), .signal(1)]) == [1])
        #expect(Self.deliveries([.signal(1), .ring(Self.ring(1, previous: 0))]) == [1])
        // Two posts of one name and state are two deliveries.
        #expect(
            Self.deliveries([
                .ring(Self.ring(1, previous: 0)), .ring(Self.ring(2, previous: 1)), .signal(1), .signal(2),
            ])
                == [1, 2])
    }

    @Test("a dropped ring (a full queue): the next ring waits for the signal of the post before it, then follows it")
    func droppedRingKeepsOrder() {
        // Post 2's ring was dropped; post 3's ring comes before post 2's signal.
        let events: [Event] = [
            .ring(Self.ring(1, previous: 0)), .ring(Self.ring(3, previous: 2)), .signal(1), .signal(2), .signal(3),
        ]
        #expect(Self.deliveries(events) == [1, 2, 3])
    }

    @Test("a registration seen one post late: the first ring waits for the earlier post's signal")
    func registrationSeenLate() {
        // Post 1 rang nobody (the sender had not seen the registration); post 2 rings with it as previous.
        #expect(Self.deliveries([.ring(Self.ring(2, previous: 1)), .signal(1), .signal(2)]) == [1, 2])
        // Post 1 was made before the observer subscribed: its signal never comes; post 2's does.
        #expect(Self.deliveries([.ring(Self.ring(2, previous: 1)), .signal(2)]) == [2])
    }

    @Test("a sender that forgot the previous serial: its ring waits for a signal")
    func unknownPrevious() {
        #expect(Self.deliveries([.ring(Self.ring(5, previous: nil)), .signal(5)]) == [5])
        #expect(Self.deliveries([.ring(Self.ring(5, previous: nil)), .signal(4), .signal(5)]) == [4, 5])
    }

    @Test("rings of one sender that arrive out of order (two posting threads) are delivered in order")
    func ringsOutOfOrder() {
        #expect(
            Self.deliveries([
                .ring(Self.ring(1, previous: 0)), .ring(Self.ring(3, previous: 2)), .ring(Self.ring(2, previous: 1)),
            ])
                == [1, 2, 3])
    }

    @Test("names and senders are merged apart; a signal of a sender that never rang needs no lookup")
    func separateKeys() {
        let events: [Event] = [
            .ring(Self.ring(2, previous: 0, name: "a")), .ring(Self.ring(3, previous: 0, name: "b")),
            .signal(2, name: "a"), .signal(3, name: "b"), .signal(9, name: "a", sender: ":1.8"),
        ]
        #expect(Self.deliveries(events) == [2, 3, 9])
        var order = PostOrder()
        #expect(order.isEmpty)
        #expect(order.signal(sender: ":1.8", name: "a", serial: Self.s(1)).deliver)
    }

    @Test("past the bound of rings ahead of their signals, rings are dropped and the signals deliver, once each")
    func rungBound() {
        var order = PostOrder()
        var delivered = 0
        let count = UInt32(PostOrder.rungLimit + 10)
        for n in 1...count { delivered += order.ring(Self.ring(n, previous: n - 1)).count }
        #expect(delivered == PostOrder.rungLimit)
        for n in 1...count {
            // A signal, then the rings that waited for it (those dropped at the bound wait for nothing).
            let (deliver, then) = order.signal(sender: Self.x, name: "n", serial: Self.s(n))
            delivered += (deliver ? 1 : 0) + then.count
        }
        #expect(delivered == Int(count), "every post once")
        #expect(order.rungCount == 0 && order.heldCount == 0)
    }

    @Test("a forgotten entry raises its sender's floor: a late ring of a post already delivered is not delivered again")
    func forgottenEntries() {
        var order = PostOrder()
        // Fill the table with idle entries (signals first), one name each.
        for n in 1...UInt32(PostOrder.entryLimit) {
            #expect(order.signal(sender: Self.x, name: "n\(n)", serial: Self.s(n)).deliver)
        }
        // A new name forgets one of them; a late ring of any post delivered before is dropped.
        #expect(order.signal(sender: Self.x, name: "new", serial: Self.s(100_000)).deliver)
        var late = 0
        for n in 1...UInt32(PostOrder.entryLimit) {
            late += order.ring(Self.ring(n, previous: 0, name: "n\(n)")).count
        }
        #expect(late == 0, "no post delivered twice")
        // A later post of this sender still rings through.
        #expect(order.ring(Self.ring(100_001, previous: 0, name: "fresh")).count == 1)
    }

    @Test("after a reset (a new connection) nothing of before is remembered")
    func reset() {
        var order = PostOrder()
        _ = order.ring(Self.ring(1, previous: 0))
        order.reset()
        #expect(order.isEmpty && order.rungCount == 0)
    }

    @Test("serials compare as serial numbers across the wrap of 31 bits")
    func wrap() {
        #expect(PostOrder.isAfter(Self.s(1), Self.s(0x7FFF_FFFF)))
        #expect(!PostOrder.isAfter(Self.s(0x7FFF_FFFF), Self.s(1)))
        #expect(!PostOrder.isAfter(Self.s(5), Self.s(5)))
    }
}

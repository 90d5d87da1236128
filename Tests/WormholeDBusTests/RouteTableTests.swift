// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import WormholeDBus

/// The route table decides, once per signal and by index, which routes receive it.
@Suite("Route table (no bus)")
struct RouteTableTests {
    static let path = try! ObjectPath("/org/wormhole/Notify1")
    static let posted = try! MemberName("Posted")
    static let plain = try! InterfaceName("org.wormhole.Notify1")
    static let bucket = try! InterfaceName("org.wormhole.Notify1.B0001")

    static func posted(_ name: String, on interface: InterfaceName = plain, from sender: String? = ":1.7") -> Signal {
        var signal = Signal(path: path, interface: interface, member: posted, arguments: [.string(name), .uint64(1)])
        signal.sender = sender
        return signal
    }

    static func exact(_ name: String, _ interface: InterfaceName = plain) -> MatchRule {
        MatchRule(interface: interface, member: posted, arguments: [0: name])
    }

    static func prefix(_ value: String) -> MatchRule {
        MatchRule(member: posted, path: path, argumentPaths: [0: value])
    }

    static func table(_ routes: [UInt64: ([MatchRule], Bool)]) -> RouteTable<UInt64> {
        var table = RouteTable<UInt64>()
        for (id, (rules, strict)) in routes {
            table.insert(.init(rules: rules, strictArgumentPaths: strict, payload: id), id: id)
        }
        return table
    }

    static func receivers(_ table: RouteTable<UInt64>, _ signal: Signal) -> [UInt64] {
        table.routes(for: signal).map(\.payload).sorted()
    }

    @Test("an exact-name route with two rules receives a matching signal once, on either interface")
    func exactOnce() {
        let table = Self.table([
            1: ([Self.exact("a.b"), Self.exact("a.b", Self.bucket)], false), 2: ([Self.exact("a.c")], false),
        ])
        #expect(Self.receivers(table, Self.posted("a.b")) == [1])
        #expect(Self.receivers(table, Self.posted("a.b", on: Self.bucket)) == [1])
        #expect(Self.receivers(table, Self.posted("a.c", on: Self.bucket)) == [], "interface checked after the lookup")
        #expect(Self.receivers(table, Self.posted("a.d")) == [])
    }

    @Test("arg0path routes: below the prefix always; parents of it only for non-strict routes")
    func prefixes() {
        let table = Self.table([
            1: ([Self.prefix("g/w/")], false), 2: ([Self.prefix("g/w/")], true), 3: ([Self.prefix("g/")], true),
        ])
        #expect(Self.receivers(table, Self.posted("g/w/id")) == [1, 2, 3])
        #expect(Self.receivers(table, Self.posted("g/w/")) == [1, 2, 3])
        #expect(
            Self.receivers(table, Self.posted("g/")) == [1, 3], "the daemon sends parents; a strict route skips them")
        #expect(Self.receivers(table, Self.posted("/")) == [], "'/' is no prefix of 'g/w/'")
        for name in ["g/w/id", "g/w/", "g/", "/", "g/x", "h/w/id", "g", "g/w"] {
            // The table agrees with the rule-by-rule definition (the bus daemon's) for non-strict routes.
            let oracle = Self.prefix("g/w/").matches(Self.posted(name))
            #expect(
                Self.receivers(Self.table([1: ([Self.prefix("g/w/")], false)]), Self.posted(name))
                    == (oracle ? [1] : []), "\(name)")
        }
        #expect(Self.receivers(table, Self.posted("g/x")) == [3])
        #expect(Self.receivers(table, Self.posted("h/w/id")) == [])
    }

    @Test("rules without an argument are checked for every signal; removal unindexes a route")
    func othersAndRemoval() {
        var table = Self.table([1: ([MatchRule(interface: Self.plain)], false), 2: ([Self.exact("n")], false)])
        #expect(Self.receivers(table, Self.posted("n")) == [1, 2])
        #expect(table.remove(id: 2)?.payload == 2)
        #expect(Self.receivers(table, Self.posted("n")) == [1])
        #expect(table.remove(id: 1) != nil)
        #expect(table.isEmpty)
        #expect(Self.receivers(table, Self.posted("n")) == [])
    }

    @Test("a well-known sender matches the signals of the name's current owner only")
    func wellKnownSender() {
        var table = Self.table([1: ([MatchRule(sender: "org.example.Owner", interface: Self.plain)], false)])
        #expect(Self.receivers(table, Self.posted("n", from: ":1.5")) == [], "owner unknown")
        table.owners["org.example.Owner"] = ":1.5"
        #expect(Self.receivers(table, Self.posted("n", from: ":1.5")) == [1])
        #expect(Self.receivers(table, Self.posted("n", from: ":1.6")) == [])
        let unique = Self.table([2: ([MatchRule(sender: ":1.6", interface: Self.plain)], false)])
        #expect(Self.receivers(unique, Self.posted("n", from: ":1.6")) == [2])
    }

    @Test("ten thousand exact-name routes: a signal reaches only its own")
    func manyRoutes() {
        var table = RouteTable<UInt64>()
        for id in 0..<10_000 as Range<UInt64> {
            table.insert(
                .init(
                    rules: [Self.exact("name.\(id)"), Self.exact("name.\(id)", Self.bucket)],
                    strictArgumentPaths: false, payload: id), id: id)
        }
        #expect(table.count == 10_000)
        #expect(Self.receivers(table, Self.posted("name.4242")) == [4242])
        #expect(Self.receivers(table, Self.posted("name.10000")) == [])
    }
}

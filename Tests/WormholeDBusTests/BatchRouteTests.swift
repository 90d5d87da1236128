// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Synchronization
import Testing
import WormholeDBus
import WormholeTestSupport

/// The tests share the suite's bus, each on interfaces of its own; the one that kills the bus,
/// and the one that needs a lower limit, have a bus of their own.
@Suite("Many routes added at once (AddMatch pipelined)", .sharedBus)
struct BatchRouteTests {
    let bus: TestBus
    /// This test's interface, which no other test of the suite emits on.
    let interface: InterfaceName
    init() throws {
        bus = try TestBus.shared()
        interface = try InterfaceName(uniqueName(testInterface.rawValue))
    }

    /// A `Said` signal on this test's interface.
    func signal(_ arguments: DBusValue...) -> Signal {
        Signal(path: testPath, interface: interface, member: said, arguments: arguments)
    }

    @Test("each route reports its own outcome; the ones that succeed are active on return")
    func perRouteOutcomes() async throws {
        let receiver = try BusConnection(address: bus.address)
        let sender = try BusConnection(address: bus.address)
        let (delivered, continuation) = AsyncStream<String>.makeStream()
        func route(_ rule: MatchRule, _ label: String) -> BusConnection.RouteRequest {
            BusConnection.RouteRequest(rules: [rule]) { signal in
                if case .string(let value)? = signal.arguments.first { continuation.yield("\(label):\(value)") }
            }
        }
        let count = 500
        var requests = (0..<count).map { route(MatchRule(interface: interface, arguments: [0: "n\($0)"]), "ok") }
        // Refused by the daemon (path and path_namespace together), and by our own check (too long).
        let refusedByBus = MatchRule(interface: interface, path: testPath, pathNamespace: testPath)
        let tooLong = MatchRule(interface: interface, arguments: [0: String(repeating: "x", count: 1100)])
        requests.insert(route(refusedByBus, "bus"), at: 200)
        requests.insert(route(tooLong, "long"), at: 400)
        let results = receiver.addRoutes(requests)
        #expect(results.count == count + 2)
        guard case .failure(let busError) = results[200] else {
            Issue.record("the bus accepted \(refusedByBus)")
            return
        }
        #expect(busError.code == .requestFailed)
        #expect(busError.value == refusedByBus.description)
        guard case .failure(let lengthError) = results[400] else {
            Issue.record("a rule over 1024 bytes passed")
            return
        }
        #expect(lengthError.code == .invalidMatchRule)
        let succeeded = results.indices.filter { if case .success = results[$0] { true } else { false } }
        #expect(succeeded.count == count)
        // Active on return: signals sent now arrive, first and last alike.
        for value in ["n0", "n499"] { try sender.emit(signal(.string(value))) }
        let got = try await next(2, from: delivered, "the signals for the first and last routes")
        #expect(Set(got) == ["ok:n0", "ok:n499"])
    }

    @Test(
        "10,000 routes in one batch: each rule is active on return and delivers; the daemon holds exactly those rules")
    func tenThousandRoutesAllDeliver() async throws {
        let receiver = try BusConnection(address: bus.address)
        let sender = try BusConnection(address: bus.address)
        let (delivered, continuation) = AsyncStream<Int>.makeStream()
        let count = 10_000
        // One interface per route: the daemon indexes rules by interface, so each signal costs
        // one rule check there (with one shared interface it would scan 10,000 arg0 filters).
        let interfaces = try (0..<count).map { try InterfaceName("org.wormhole.Test.I\($0)") }
        let requests = (0..<count).map { index in
            BusConnection.RouteRequest(rules: [MatchRule(interface: interfaces[index], arguments: [0: "n\(index)"])]) {
                _ in
                continuation.yield(index)
            }
        }
        #expect(receiver.batchesAddMatchWithoutReplies == nil)
        let results = receiver.addRoutes(requests)
        #expect(results.allSatisfy { if case .success = $0 { true } else { false } })
        // dbus-daemon reports a refused AddMatch sent without reply, so the batch went out that
        // way (one GetId answered for 10,000 rules); dbus-broker (33) stays silent, as the D-Bus
        // specification allows, so there the connection asks for one reply per rule.
        #expect(receiver.batchesAddMatchWithoutReplies == !TestBusDaemon.isBroker)
        for index in 0..<count {
            try sender.emit(
                Signal(path: testPath, interface: interfaces[index], member: said, arguments: [.string("n\(index)")]))
        }
        sender.flush()
        let got = try await next(count, from: delivered, "deliveries, one per route")
        #expect(Set(got).count == count)
        if !TestBusDaemon.isBroker {
            // The rules are on the bus as sent; the probe that asked whether the daemon reports
            // refusals of calls sent without reply (a rule it refuses) left nothing behind.
            let rules = try #require(try await sender.matchRulesOnBus()[receiver.uniqueName])
            #expect(rules.count == count)
            #expect(!rules.contains { $0.contains("wormhole-probe") })
        }
    }

    @Test(
        "rules refused mid-batch (the daemon's per-connection limit) each fail naming their rule; the others are active",
        .disabled(if: TestBusDaemon.isBroker, "dbus-broker counts match rules per user, not by this limit"))
    func refusedByTheLimitMidBatch() async throws {
        let config = try TemporaryDirectory("limit-config")
        let original = try String(contentsOfFile: repositoryRoot.path + "/dbus/wormhole-session.conf", encoding: .utf8)
        let limited = original.replacingOccurrences(
            of: #"<limit name="max_match_rules_per_connection">50000</limit>"#,
            with: #"<limit name="max_match_rules_per_connection">100</limit>"#)
        #expect(limited != original)
        try limited.write(toFile: config.path + "/limited.conf", atomically: true, encoding: .utf8)
        let limitedBus = try TestBus(configFile: config.path + "/limited.conf")
        let receiver = try BusConnection(address: limitedBus.address)
        let sender = try BusConnection(address: limitedBus.address)
        let (delivered, continuation) = AsyncStream<String>.makeStream()
        let rules = (0..<120).map { MatchRule(interface: interface, arguments: [0: "n\($0)"]) }
        let results = receiver.addRoutes(
            rules.map { rule in
                BusConnection.RouteRequest(rules: [rule]) { signal in
                    if case .string(let value)? = signal.arguments.first { continuation.yield(value) }
                }
            })
        for index in 0..<100 {
            guard case .success = results[index] else {
                Issue.record("rule \(index) was refused: \(results[index])")
                return
            }
        }
        for index in 100..<120 {
            guard case .failure(let error) = results[index] else {
                Issue.record("rule \(index) passed the limit")
                continue
            }
            #expect(error.code == .requestFailed)
            #expect(error.dbusName == "org.freedesktop.DBus.Error.LimitsExceeded")
            #expect(error.value == rules[index].description)
            #expect(error.message.contains(rules[index].description))
        }
        for value in ["n0", "n99", "n100"] { try sender.emit(signal(.string(value))) }
        try sender.emit(signal(.string("n1")))
        let got = try await next(3, from: delivered, "signals for the accepted routes n0, n99, n1")
        #expect(got == ["n0", "n99", "n1"])
    }

    @Test("a batch on a connection whose bus is gone fails every route, at once")
    func batchAfterTheBusWentAway() async throws {
        // It kills the bus: a bus of its own, not the suite's.
        let bus = try TestBus()
        let receiver = try BusConnection(address: bus.address)
        bus.kill()
        let requests = (0..<50).map { index in
            BusConnection.RouteRequest(rules: [MatchRule(interface: interface, arguments: [0: "n\(index)"])]) { _ in }
        }
        let results = try await race("addRoutes on a dead bus") { receiver.addRoutes(requests) }
        #expect(results.count == 50)
        #expect(results.allSatisfy { if case .failure = $0 { true } else { false } })
    }
}

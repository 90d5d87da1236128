import Foundation
import Testing
import WormholeDBus
import WormholeTestSupport

/// `matchRulesOnBus` (the daemon's `Debug.Stats.GetAllMatchRules`), used by `wormholectl doctor`.
@Suite("The daemon's statistics: every match rule on the bus", .sharedBus)
struct DaemonStatsTests {
    @Test(
        "the rules another connection added are listed under its unique name, as the daemon writes them",
        .disabled(if: TestBusDaemon.isBroker, "dbus-broker does not implement Debug.Stats"))
    func rulesOfAnotherConnection() async throws {
        let bus = try TestBus.shared()
        let listener = try BusConnection(address: bus.address)
        let rule = MatchRule(
            interface: try InterfaceName("org.wormhole.Notify1"), member: try MemberName("Posted"),
            arguments: [0: "group.x/wormhole/it's"])
        try await listener.addMatch(rule)
        let asker = try BusConnection(address: bus.address)
        let rules = try await asker.matchRulesOnBus()
        let listed = try #require(rules[listener.uniqueName])
        #expect(listed == [rule.description])
        #expect(rules[asker.uniqueName] == [])
    }

    @Test(
        "a daemon whose policy denies Debug.Stats: a requestFailed error with its D-Bus name",
        .disabled(if: TestBusDaemon.isBroker, "dbus-broker does not implement Debug.Stats: nothing to deny"))
    func denied() async throws {
        let config = try TemporaryDirectory("stats-config")
        let original = try String(contentsOfFile: repositoryRoot.path + "/dbus/wormhole-session.conf", encoding: .utf8)
        let denying = original.replacingOccurrences(
            of: "    <allow own=\"*\"/>\n  </policy>",
            with: "    <allow own=\"*\"/>\n    <deny send_interface=\"org.freedesktop.DBus.Debug.Stats\"/>\n  </policy>"
        )
        try denying.write(toFile: config.path + "/deny.conf", atomically: true, encoding: .utf8)
        let bus = try TestBus(configFile: config.path + "/deny.conf")
        let asker = try BusConnection(address: bus.address)
        do {
            _ = try await asker.matchRulesOnBus()
            Issue.record("the denied call succeeded")
        } catch let error as BusError {
            #expect(error.code == .requestFailed)
            #expect(error.dbusName == "org.freedesktop.DBus.Error.AccessDenied")
        }
    }

    @Test(
        "dbus-broker has no Debug.Stats: a requestFailed error naming the call and the broker's D-Bus error",
        .enabled(if: TestBusDaemon.isBroker, "dbus-broker only"))
    func brokerHasNoStats() async throws {
        let bus = try TestBus.shared()
        let asker = try BusConnection(address: bus.address)
        do {
            _ = try await asker.matchRulesOnBus()
            Issue.record("dbus-broker answered GetAllMatchRules")
        } catch let error as BusError {
            #expect(error.code == .requestFailed)
            #expect(error.message.contains("GetAllMatchRules"))
            #expect(error.dbusName?.hasPrefix("org.freedesktop.DBus.Error.") == true, "\(error.dbusName ?? "no name")")
        }
    }
}

import Dispatch
import Foundation
import Synchronization
import Testing
import WormholeDBus
import WormholeTestSupport

@Suite("Many routes added at once (AddMatch pipelined)")
struct BatchRouteTests {
    let bus: TestBus
    init() throws { bus = try TestBus() }

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
        var requests = (0..<count).map { route(MatchRule(interface: testInterface, arguments: [0: "n\($0)"]), "ok") }
        // Refused by the daemon (path and path_namespace together), and by our own check (too long).
        let refusedByBus = MatchRule(interface: testInterface, path: testPath, pathNamespace: testPath)
        let tooLong = MatchRule(interface: testInterface, arguments: [0: String(repeating: "x", count: 1100)])
        requests.insert(route(refusedByBus, "bus"), at: 200)
        requests.insert(route(tooLong, "long"), at: 400)
        let results = receiver.addRoutes(requests)
        #expect(results.count == count + 2)
        guard case .failure(let busError) = results[200] else { Issue.record("the bus accepted \(refusedByBus)"); return }
        #expect(busError.code == .requestFailed)
        #expect(busError.value == refusedByBus.description)
        guard case .failure(let lengthError) = results[400] else { Issue.record("a rule over 1024 bytes passed"); return }
        #expect(lengthError.code == .invalidMatchRule)
        let succeeded = results.indices.filter { if case .success = results[$0] { true } else { false } }
        #expect(succeeded.count == count)
        // Active on return: signals sent now arrive, first and last alike.
        for value in ["n0", "n499"] { try sender.emit(said(.string(value))) }
        let got = try await next(2, from: delivered, "the signals for the first and last routes")
        #expect(Set(got) == ["ok:n0", "ok:n499"])
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Testing
import WormholeDBus
import WormholeTestSupport

/// Connecting has a deadline; reconnecting works with the addresses users are given.
@Suite("Connecting: deadlines and reconnection")
struct ConnectingTests {
    @Test("a bus that accepts and never answers is an error naming the address, not a hang")
    func silentBus() async throws {
        let silent = try SilentSocket()
        let address = try BusAddress("unix:path=\(silent.path)")
        let error = try await race("the connection attempt") { () -> BusError? in
            do {
                _ = try BusConnection(address: address, connectTimeout: .milliseconds(300))
                return nil
            } catch let error as BusError {
                return error
            }
        }
        #expect(error?.code == .connectionFailed)
        #expect(error?.value == address.rawValue)
        #expect(error?.message.contains("did not answer within") == true, "\(error?.message ?? "")")
    }

    @Test(
        "a stopped bus daemon: connecting fails within the deadline; a reconnecting connection comes back when it resumes"
    )
    func stoppedDaemon() async throws {
        let bus = try TestBus()
        // Its first Hello must be answered in time on a loaded machine under ThreadSanitizer (300 ms
        // was not, once, in CI's configuration with other builds running): 2 s, still short enough
        // for a reconnection's unanswered Hello to be retried within the test's waits.
        let survivor = try BusConnection(
            address: bus.address, reconnect: .automatic, connectTimeout: .seconds(2))
        let events = survivor.events()
        bus.pause()
        defer { bus.resume() }
        let error = try await race("the connection attempt") { () -> BusError? in
            do {
                _ = try BusConnection(address: bus.address, connectTimeout: .milliseconds(300))
                return nil
            } catch let error as BusError {
                return error
            }
        }
        #expect(error?.code == .connectionFailed)
        bus.resume()
        // The existing connection never noticed anything: it still works after the pause.
        let rule = MatchRule(interface: testInterface, member: said)
        let stream = try await survivor.signals(matching: rule)
        try survivor.emit(said(.uint64(5)))
        #expect(try await next(1, from: stream, "a signal after the pause").first?.uint64(at: 0) == 5)
        // A restart followed at once by a stop: the reconnection's Hello goes unanswered and is
        // retried after its deadline, until the daemon runs again.
        bus.kill()
        _ = try await until(events, "the disconnection") { $0 == .disconnected }
        try bus.start()
        bus.pause()
        bus.resume()
        _ = try await until(events, "the reconnection") { $0 == .reconnected }
        try survivor.emit(said(.uint64(6)))
        #expect(try await next(1, from: stream, "a signal after the restart").first?.uint64(at: 0) == 6)
    }

    @Test(
        "a send on the connection's loop while it greets the bus again is refused as not connected, not written before Hello"
    )
    func sendOnLoopWhileGreeting() async throws {
        let bus = try TestBus()
        let connection = try BusConnection(address: bus.address, reconnect: .automatic, connectTimeout: .seconds(30))
        defer { connection.close() }
        let events = connection.events()
        bus.kill()
        _ = try await until(events, "the disconnection") { $0 == .disconnected }
        // A "bus" at the same address that takes the reconnection and never answers: once its
        // authentication arrives, the connection is on the loop, greeting (not ready).
        let silent = try SilentSocket(path: bus.socketPath)
        try await race("the reconnection's authentication") { try silent.awaitClient() }
        let outcome = try await race("a send on the loop") {
            await withCheckedContinuation { (continuation: CheckedContinuation<BusError?, Never>) in
                let queued = connection.execute {
                    do {
                        try connection.emit(said(.uint64(1)))
                        continuation.resume(returning: nil)
                    } catch let error as BusError {
                        continuation.resume(returning: error)
                    } catch {
                        continuation.resume(returning: BusError(.connectionFailed, "\(error)"))
                    }
                }
                if !queued { continuation.resume(returning: BusError(.connectionFailed, "the connection closed")) }
            }
        }
        #expect(outcome?.code == .disconnected, "sent while greeting: \(String(describing: outcome))")
        #expect(outcome?.value == bus.address.rawValue)
    }

    @Test("an address with the daemon's guid (as --print-address gives it) reconnects to the restarted daemon")
    func guidAddress() async throws {
        let bus = try TestBus()
        let printed = try bus.printedAddress
        #expect(printed.rawValue.contains("guid="))
        let connection = try BusConnection(address: printed, reconnect: .automatic)
        let events = connection.events()
        let stream = try await connection.signals(matching: MatchRule(interface: testInterface, member: said))
        bus.kill()
        _ = try await until(events, "the disconnection") { $0 == .disconnected }
        try bus.start()
        #expect(try bus.printedAddress != printed, "a new daemon, a new guid")
        _ = try await until(events, "the reconnection") { $0 == .reconnected }
        try connection.emit(said(.uint64(7)))
        #expect(try await next(1, from: stream, "a signal after the restart").first?.uint64(at: 0) == 7)
    }
}

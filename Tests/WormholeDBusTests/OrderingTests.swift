// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import WormholeDBus
import WormholeTestSupport

/// What one thread does on a connection reaches the bus in the order it did it, whether the
/// work is a job on the loop (removing a rule) or a signal waiting in the outgoing queue.
@Suite("Order of jobs and queued signals", .sharedBus)
struct OrderingTests {
    let bus: TestBus
    let interface: InterfaceName
    init() throws {
        bus = try TestBus.shared()
        interface = try InterfaceName(uniqueName(testInterface.rawValue))
    }

    /// The loop is held busy by a handler on its own thread, so that the cancel (a job that
    /// sends `RemoveMatch`) and the emit after it (a signal in the outgoing queue) both wait for
    /// the same loop iteration. If the queued signal went out before the job, the daemon would
    /// still hold the rule and echo the signal back to the connection.
    @Test("a signal emitted after cancelling a subscription is not echoed by the removed rule")
    func signalAfterCancelFollowsRemoveMatch() throws {
        let connection = try BusConnection(address: bus.address)
        let other = try BusConnection(address: bus.address)
        let hold = try MemberName("Hold")
        let echo = try MemberName("Echo")
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = try connection.subscribe(MatchRule(interface: interface, member: hold), on: .ioThread) { _ in
            entered.signal()
            release.wait()
        }
        defer { holder.cancel() }
        let echoes = try connection.subscribe(MatchRule(interface: interface, member: echo)) { _ in }

        try other.emit(Signal(path: testPath, interface: interface, member: hold))
        #expect(entered.wait(timeout: .now() + 10) == .success, "the loop took the Hold signal")
        let before = connection.signalsReceived
        echoes.cancel()  // a job: RemoveMatch for the Echo rule, queued while the loop is busy
        try connection.emit(Signal(path: testPath, interface: interface, member: echo))  // queued after it
        release.signal()
        #expect(connection.flush(timeout: .seconds(10)) == nil)
        #expect(
            connection.signalsReceived == before,
            "the Echo signal reached the bus before the RemoveMatch queued ahead of it")
    }
}

import Dispatch
import Logging
import WormholeSystem

/// libdbus main-loop glue: the connection's watches and timeouts on the process's event loop,
/// and the handler calls the loop makes each iteration. Owner-confined; see <doc:Threading>.
extension BusIO {
    func ready(fd: Int32, _ readiness: Readiness) {
        loop.assertOwned()
        HopTrace.mark(.busReady)
        var index = 0
        while true {
            // Look the watch up again each time: handling one may remove the others (on this thread).
            let list = mainLoop.watches(on: fd)
            guard index < list.count else { return }
            let watch = list[index]
            index += 1
            guard watch.isEnabled else { continue }
            watch.handle(
                readable: readiness.readable && watch.wantsReadable,
                writable: readiness.writable && watch.wantsWritable,
                error: readiness.error, hangup: readiness.hangup)
        }
    }

    func timeoutMilliseconds() -> Int32 {
        loop.assertOwned()
        // Work left over from inside a libdbus call is done in the next iteration, at once.
        if greetingFailure != nil || disconnectPending { return 0 }
        if let greetingDeadline {
            let now = Self.now()
            if greetingDeadline <= now { return 0 }
            let untilGreeting = Int32(clamping: greetingDeadline - now)
            let earliest = mainLoop.nextDeadline()
            if earliest == .max { return untilGreeting }
            let next = earliest <= now ? 0 : Int32(clamping: earliest - now)
            return min(next, untilGreeting)
        }
        let next = mainLoop.nextDeadline()
        guard next != UInt64.max else { return -1 }
        let now = Self.now()
        return next <= now ? 0 : Int32(clamping: next - now)
    }

    func beforeJobs() {
        loop.assertInEventLoop()
        fireTimeouts()
        pumpOutgoing()
    }

    func iterationEnded() {
        loop.assertInEventLoop()
        // What was queued behind this iteration's jobs, or while they ran.
        pumpOutgoing()
        connection?.dispatchAll()
        if let deadline = greetingDeadline, Self.now() >= deadline {
            self.greetingDeadline = nil
            if case .greeting = phase, greetingFailure == nil {
                greetingFailure = greetingTimedOut()
            }
        }
        if let greetingFailure { abandonGreeting(greetingFailure) }
        if disconnectPending { handleDisconnect() }
    }

    func loopStopped() {
        loop.assertInEventLoop()
        defer {
            ProcessRuntime.shared.exitDrain.unregister(self)
            stoppedSignal.signal()
        }
        forgetUnconfirmed()
        reconnector?.stop()
        reconnector = nil
        connection?.closeAndRelease()
        connection = nil
        clearWatchesAndTimeouts()
        let dropped = shared.withLock { state -> Int in
            state.connected = false
            state.eventHandlers = [:]
            state.eventScopes = [:]
            return state.outgoing.removeAll()
        }
        wakeRoomWaiters()
        if dropped > 0 { logger.debug("dropped \(dropped) queued signal(s): the connection was closed") }
        for route in routes.removeAll() { route.payload.finish() }
        rules.trackedNames = [:]
        scopedRoutes = [:]
        rules.scopedRules = [:]
        rules.perform(rules.registry.closed())
        rules.forgetQuietAdds()
        failConfirmations()
    }

    func clearWatchesAndTimeouts() {
        loop.assertOwned()
        mainLoop.removeAll()
        loop.removeAllInterests(of: self)
    }

    func addWatch(_ watch: LibDBus.Watch) {
        loop.assertOwned()
        let fd = mainLoop.add(watch)
        loop.setInterest(fd: fd, mainLoop.interest(in: fd), for: self)
    }

    func removeWatch(_ watch: LibDBus.Watch) {
        loop.assertOwned()
        for fd in mainLoop.remove(watch) { loop.setInterest(fd: fd, mainLoop.interest(in: fd), for: self) }
    }

    func toggleWatch(_ watch: LibDBus.Watch) {
        loop.assertOwned()
        for fd in mainLoop.descriptors(of: watch) { loop.setInterest(fd: fd, mainLoop.interest(in: fd), for: self) }
    }

    func changeTimeout(_ timeout: LibDBus.Timeout, removed: Bool) {
        loop.assertOwned()
        mainLoop.change(timeout, removed: removed, now: Self.now())
    }

    func fireTimeouts() {
        loop.assertOwned()
        let due = mainLoop.takeDue(now: Self.now())
        guard !due.isEmpty else { return }
        // Handling one may remove others (on this thread): check before each.
        for timeout in due where mainLoop.isPresent(timeout) { timeout.handle() }
        mainLoop.settle()
    }

    static func now() -> UInt64 { EventLoop.nowMilliseconds() }
}

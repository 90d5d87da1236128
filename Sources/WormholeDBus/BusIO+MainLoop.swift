import Dispatch
import Logging
import WormholeSystem

/// libdbus main-loop glue: the connection's watches and timeouts on the process's event loop,
/// and the handler calls the loop makes each iteration. Owner-confined; see <doc:Threading>.
extension BusIO {
    func ready(fd: Int32, _ readiness: Readiness) {
        loop.preconditionOwned()
        HopTrace.mark(.busReady)
        var index = 0
        while true {
            // Look the watch up again each time: handling one may remove the others (on this thread).
            guard let list = watches[fd], index < list.count else { return }
            let watch = list[index]
            index += 1
            guard watch.isEnabled else { continue }
            watch.handle(
                readable: readiness.readable && watch.wantsReadable, writable: readiness.writable && watch.wantsWritable,
                error: readiness.error, hangup: readiness.hangup)
        }
    }

    func timeoutMilliseconds() -> Int32 {
        loop.preconditionOwned()
        // Work left over from inside a libdbus call is done in the next iteration, at once.
        if greetingFailure != nil || disconnectPending { return 0 }
        if let greetingDeadline {
            let now = Self.now()
            if greetingDeadline <= now { return 0 }
            let untilGreeting = Int32(clamping: greetingDeadline - now)
            if timeouts.isEmpty || earliestDeadline == .max { return untilGreeting }
            let next = earliestDeadline <= now ? 0 : Int32(clamping: earliestDeadline - now)
            return min(next, untilGreeting)
        }
        if timeouts.isEmpty { earliestDeadline = .max }
        let next = earliestDeadline
        guard next != UInt64.max else { return -1 }
        let now = Self.now()
        return next <= now ? 0 : Int32(clamping: next - now)
    }

    func beforeJobs() {
        loop.preconditionInEventLoop()
        fireTimeouts()
        pumpOutgoing()
    }

    func iterationEnded() {
        loop.preconditionInEventLoop()
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
        loop.preconditionInEventLoop()
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
        trackedNames = [:]
        scopedRoutes = [:]
        scopedRules = [:]
        perform(registry.closed())
        forgetQuietAdds()
        failConfirmations()
    }

    func clearWatchesAndTimeouts() {
        loop.preconditionOwned()
        watches = [:]
        timeouts = [:]
        earliestDeadline = .max
        loop.removeAllInterests(of: self)
    }

    func interest(in fd: Int32) -> Interest {
        var interest = Interest()
        for watch in watches[fd] ?? [] where watch.isEnabled {
            if watch.wantsReadable { interest.readable = true }
            if watch.wantsWritable { interest.writable = true }
        }
        return interest
    }

    func addWatch(_ watch: LibDBus.Watch) {
        loop.preconditionOwned()
        let fd = watch.fd
        watches[fd, default: []].append(watch)
        loop.setInterest(fd: fd, interest(in: fd), for: self)
    }

    func removeWatch(_ watch: LibDBus.Watch) {
        loop.preconditionOwned()
        for (fd, list) in watches where list.contains(watch) {
            let rest = list.filter { $0 != watch }
            watches[fd] = rest.isEmpty ? nil : rest
            loop.setInterest(fd: fd, interest(in: fd), for: self)
        }
    }

    func toggleWatch(_ watch: LibDBus.Watch) {
        loop.preconditionOwned()
        for (fd, list) in watches where list.contains(watch) {
            loop.setInterest(fd: fd, interest(in: fd), for: self)
        }
    }

    func changeTimeout(_ timeout: LibDBus.Timeout, removed: Bool) {
        loop.preconditionOwned()
        if removed {
            timeouts[timeout] = nil
        } else {
            let interval = timeout.intervalMilliseconds
            let record = TimeoutRecord(
                intervalMilliseconds: interval, enabled: timeout.isEnabled, deadline: Self.now() + UInt64(max(0, interval)))
            timeouts[timeout] = record
            if record.enabled { earliestDeadline = min(earliestDeadline, record.deadline) }
        }
    }

    func fireTimeouts() {
        loop.preconditionOwned()
        // Most iterations have no libdbus timeout at all (they exist only while a reply is awaited).
        if timeouts.isEmpty {
            earliestDeadline = .max
            return
        }
        let now = Self.now()
        guard earliestDeadline <= now else { return }
        let due = timeouts.filter { $0.value.enabled && $0.value.deadline <= now }.map(\.key)
        for timeout in due {
            // Handling one may remove others (on this thread): check before each.
            guard var record = timeouts[timeout] else { continue }
            record.deadline = now + UInt64(max(0, record.intervalMilliseconds))
            timeouts[timeout] = record
            timeout.handle()
        }
        earliestDeadline = timeouts.values.lazy.filter(\.enabled).map(\.deadline).min() ?? .max
    }

    static func now() -> UInt64 { EventLoop.nowMilliseconds() }
}

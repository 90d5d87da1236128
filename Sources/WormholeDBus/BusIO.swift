internal import CWormholeDBus
import Dispatch
import Foundation
import Glibc
import Logging
import Synchronization

/// An event the connection reports about itself.
public enum BusConnectionEvent: Hashable, Sendable {
    /// The bus daemon went away or closed the connection. Signals are not delivered until a reconnect.
    case disconnected
    /// A new connection to the same address is up and every active match rule has been re-added and
    /// acknowledged by the bus. Signals emitted while disconnected were missed.
    case reconnected
}

/// Owns one libdbus connection at a time and the thread that drives it.
///
/// The thread sleeps in `epoll_wait` on the connection's socket (registered through
/// libdbus watch functions) and on an `eventfd` that other threads write to when they
/// queue work. Its only timed wait is for libdbus timeouts (reply deadlines). Every
/// libdbus call that reads or dispatches happens on this thread; `emit` writes from the
/// calling thread, which libdbus allows when threads are initialised, so a send never
/// waits behind a reader.
///
/// `@unchecked Sendable`: the properties marked "thread-confined" are touched only on
/// the I/O thread (through `submit`); the rest is immutable, atomic or behind `shared`.
final class BusIO: @unchecked Sendable {
    typealias Completion = @Sendable (Result<Void, BusError>) -> Void

    struct Route {
        /// The route receives a signal when any of its rules matches it.
        var rules: [MatchRule]
        /// `argNpath` rules route only values at or below their value (see `BusConnection.addRoute`).
        var strictArgumentPaths = false
        var deliver: @Sendable (Signal) -> Void
        var finish: @Sendable () -> Void
    }

    private struct RuleEntry {
        var count: Int
        var active: Bool
        var waiters: [Completion]
    }

    private struct WatchRecord {
        var bits: UInt
    }

    private struct TimeoutRecord {
        var interval: Int
        var enabled: Bool
        var deadline: UInt64
    }

    private struct Shared {
        var jobs: [@Sendable () -> Void] = []
        var watches: [Int32: [UInt]] = [:]
        var timeouts: [UInt: TimeoutRecord] = [:]
        var connection: UInt = 0
        var uniqueName: String = ""
        var connected = false
        var stopping = false
        var eventHandlers: [UInt64: @Sendable (BusConnectionEvent) -> Void] = [:]
    }

    let address: BusAddress
    let automaticReconnect: Bool
    let logger: Logger
    private let epollFD: Int32
    private let wakeFD: Int32
    private let ioThread = Atomic<UInt>(0)
    private let shared = Mutex(Shared())
    private let nextID = Atomic<UInt64>(1)
    /// Signals the connection received (after the bus daemon's filtering), for tests and statistics.
    let signalsReceived = Atomic<UInt64>(0)

    // Thread-confined.
    private var rules: [String: RuleEntry] = [:]
    private var routes: [UInt64: Route] = [:]
    private var disconnectPending = false
    private var reconnector: Reconnector?

    init(address: BusAddress, automaticReconnect: Bool, logger: Logger) throws(BusError) {
        Self.initialiseThreads
        self.address = address
        self.automaticReconnect = automaticReconnect
        self.logger = logger
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard epollFD >= 0, wakeFD >= 0 else {
            let reason = String(cString: strerror(errno))
            if epollFD >= 0 { Glibc.close(epollFD) }
            if wakeFD >= 0 { Glibc.close(wakeFD) }
            throw BusError(.connectionFailed, value: address.rawValue, "cannot create the I/O loop: \(reason)")
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeFD
        epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event)
        let connection: OpaquePointer
        do {
            connection = try Self.open(address)
        } catch {
            Glibc.close(epollFD)
            Glibc.close(wakeFD)
            throw error
        }
        install(connection)
        let thread = Thread { [self] in run() }
        thread.name = "wormhole-dbus-io"
        thread.start()
    }

    deinit {
        Glibc.close(epollFD)
        Glibc.close(wakeFD)
    }

    private static let initialiseThreads: Void = { _ = dbus_threads_init_default() }()

    // MARK: Connecting

    /// Opens a private connection and says Hello to the bus. Blocking; not on the I/O thread.
    static func open(_ address: BusAddress) throws(BusError) -> OpaquePointer {
        let context = "cannot connect to the bus at \(quoted(address.rawValue))"
        let connection = try withCError(.connectionFailed, value: address.rawValue, context: context) {
            dbus_connection_open_private(address.rawValue, $0)
        }
        guard let connection else { throw BusError(.connectionFailed, value: address.rawValue, context) }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        do {
            _ = try withCError(.connectionFailed, value: address.rawValue, context: context) {
                dbus_bus_register(connection, $0)
            }
        } catch {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            throw error
        }
        return connection
    }

    /// Hands a freshly opened connection to the loop.
    private func install(_ connection: OpaquePointer) {
        let data = Unmanaged.passUnretained(self).toOpaque()
        let name = String(libdbus: dbus_bus_get_unique_name(connection)) ?? ""
        shared.withLock {
            $0.connection = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))
            $0.uniqueName = name
            $0.connected = true
        }
        dbus_connection_set_watch_functions(
            connection, BusIO.addWatch, BusIO.removeWatch, BusIO.toggleWatch, data, nil)
        dbus_connection_set_timeout_functions(
            connection, BusIO.addTimeout, BusIO.removeTimeout, BusIO.toggleTimeout, data, nil)
        dbus_connection_set_wakeup_main_function(connection, BusIO.wakeupMain, data, nil)
        dbus_connection_set_dispatch_status_function(connection, BusIO.dispatchStatus, data, nil)
        dbus_connection_add_filter(connection, BusIO.filter, data, nil)
        wake()
    }

    private static func pointer(_ bits: UInt) -> OpaquePointer? {
        OpaquePointer(bitPattern: Int(bitPattern: bits))
    }

    private static func bits(_ pointer: OpaquePointer) -> UInt {
        UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(pointer)))
    }

    /// The current connection with a reference taken, or `nil` while disconnected. The caller unrefs it.
    private func currentConnection() -> OpaquePointer? {
        shared.withLock { state -> OpaquePointer? in
            guard state.connected, let connection = Self.pointer(state.connection) else { return nil }
            dbus_connection_ref(connection)
            return connection
        }
    }

    var isConnected: Bool { shared.withLock { $0.connected } }
    var uniqueName: String { shared.withLock { $0.uniqueName } }
    var isOnIOThread: Bool { ioThread.load(ordering: .acquiring) == UInt(pthread_self()) }

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    // MARK: Work from other threads

    /// Queues `job` to run on the I/O thread. Returns false when the loop has stopped.
    @discardableResult
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        let accepted = shared.withLock { state -> Bool in
            if state.stopping { return false }
            state.jobs.append(job)
            return true
        }
        if accepted { wake() }
        return accepted
    }

    private func wake() {
        if isOnIOThread { return }
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    /// Sends a message from the calling thread. libdbus writes it at once if the socket
    /// takes it, and otherwise leaves the rest to the I/O thread (through the write watch).
    func send(_ message: OpaquePointer) throws(BusError) {
        guard let connection = currentConnection() else {
            throw BusError(.disconnected, value: address.rawValue, "not connected to the bus at \(quoted(address.rawValue))")
        }
        defer { dbus_connection_unref(connection) }
        if dbus_connection_send(connection, message, nil) == 0 {
            throw BusError(.outOfMemory, "libdbus could not queue a message")
        }
        // A daemon that died since the last read is noticed by the write itself: libdbus then
        // drops the message silently, so ask whether the connection survived it.
        if dbus_connection_get_is_connected(connection) == 0 {
            throw BusError(.disconnected, value: address.rawValue, "the bus at \(quoted(address.rawValue)) went away")
        }
    }

    /// Blocks until every queued outgoing message is written (for processes about to exit).
    func flush() {
        guard let connection = currentConnection() else { return }
        defer { dbus_connection_unref(connection) }
        dbus_connection_flush(connection)
    }

    // MARK: Match rules and routes (run on the I/O thread)

    /// Adds a route and its rules; `completion` runs on the I/O thread once the bus acknowledged
    /// every rule. If any rule fails, the others are released and the route is not added.
    func addRoute(id: UInt64, _ route: Route, completion: @escaping Completion) {
        let accepted = submit { [self] in
            routes[id] = route
            let outcomes = OutcomeCollector(count: route.rules.count)
            if route.rules.isEmpty { completion(.success(())) }
            for rule in route.rules {
                acquireRule(rule) { [self] result in
                    outcomes.record(rule: rule, result)
                    guard let all = outcomes.finished() else { return }
                    if let failure = all.first(where: { if case .failure = $0.1 { true } else { false } }) {
                        routes[id] = nil
                        for (rule, result) in all { if case .success = result { releaseRule(rule) } }
                        completion(failure.1)
                    } else {
                        completion(.success(()))
                    }
                }
            }
        }
        if !accepted { completion(.failure(closedError())) }
    }

    /// Removes a route and releases its rules.
    func removeRoute(id: UInt64) {
        submit { [self] in
            guard let route = routes.removeValue(forKey: id) else { return }
            for rule in route.rules { releaseRule(rule) }
        }
    }

    /// Takes one reference on a rule; the bus sees AddMatch only for the first.
    func acquireRule(_ rule: MatchRule, completion: @escaping Completion) {
        let key = rule.description
        if var entry = rules[key] {
            entry.count += 1
            if entry.active {
                rules[key] = entry
                completion(.success(()))
            } else {
                entry.waiters.append(completion)
                rules[key] = entry
            }
            return
        }
        guard isConnected else {
            completion(.failure(BusError(.disconnected, value: address.rawValue, "cannot add match rule \(key): not connected to the bus at \(quoted(address.rawValue))")))
            return
        }
        rules[key] = RuleEntry(count: 1, active: false, waiters: [completion])
        sendRuleRequest("AddMatch", key) { [self] result in
            guard var entry = rules[key] else { return }
            let waiters = entry.waiters
            entry.waiters = []
            switch result {
            case .success:
                entry.active = true
                rules[key] = entry
            case .failure:
                rules[key] = nil
            }
            for waiter in waiters { waiter(result) }
        }
    }

    /// Drops one reference on a rule; the bus sees RemoveMatch when the last one goes.
    func releaseRule(_ rule: MatchRule, completion: Completion? = nil) {
        let key = rule.description
        guard var entry = rules[key] else {
            completion?(.success(()))
            return
        }
        entry.count -= 1
        if entry.count > 0 {
            rules[key] = entry
            completion?(.success(()))
            return
        }
        rules[key] = nil
        if isConnected {
            sendRuleRequest("RemoveMatch", key) { completion?($0) }
        } else {
            completion?(.success(()))
        }
    }

    /// Sends AddMatch or RemoveMatch and calls `completion` with the bus daemon's answer.
    private func sendRuleRequest(_ method: String, _ rule: String, completion: @escaping Completion) {
        guard let connection = currentConnection() else {
            completion(.failure(BusError(.disconnected, value: address.rawValue, "not connected to the bus at \(quoted(address.rawValue))")))
            return
        }
        defer { dbus_connection_unref(connection) }
        let message: OpaquePointer
        do {
            message = try MessageCoding.makeBusCall(method, strings: [rule])
        } catch {
            completion(.failure(error))
            return
        }
        defer { dbus_message_unref(message) }
        var pending: OpaquePointer?
        guard dbus_connection_send_with_reply(connection, message, &pending, cwormhole_timeout_use_default) != 0,
            let pending
        else {
            completion(.failure(BusError(.disconnected, value: rule, "cannot send \(method) for \(rule): the connection is closed")))
            return
        }
        let box = Unmanaged.passRetained(ReplyBox { reply in
            if let reply, let error = MessageCoding.readError(reply) {
                completion(.failure(BusError(.requestFailed, value: rule, dbusName: error.name, "the bus refused \(method) for \(rule): \(error.message)")))
            } else if reply == nil {
                completion(.failure(BusError(.disconnected, value: rule, "no reply to \(method) for \(rule)")))
            } else {
                completion(.success(()))
            }
        })
        let notify: DBusPendingCallNotifyFunction = { pending, data in
            guard let pending, let data else { return }
            let box = Unmanaged<ReplyBox>.fromOpaque(data).takeUnretainedValue()
            let reply = dbus_pending_call_steal_reply(pending)
            box.handler(reply)
            if let reply { dbus_message_unref(reply) }
        }
        let free: DBusFreeFunction = { data in
            guard let data else { return }
            Unmanaged<ReplyBox>.fromOpaque(data).release()
        }
        dbus_pending_call_set_notify(pending, notify, box.toOpaque(), free)
        dbus_pending_call_unref(pending)
    }

    private func closedError() -> BusError {
        BusError(.disconnected, value: address.rawValue, "the connection to \(quoted(address.rawValue)) is closed")
    }

    // MARK: Events

    func addEventHandler(_ handler: @escaping @Sendable (BusConnectionEvent) -> Void) -> UInt64 {
        let id = makeID()
        shared.withLock { $0.eventHandlers[id] = handler }
        return id
    }

    func removeEventHandler(_ id: UInt64) {
        _ = shared.withLock { $0.eventHandlers.removeValue(forKey: id) }
    }

    private func report(_ event: BusConnectionEvent) {
        let handlers = shared.withLock { Array($0.eventHandlers.values) }
        for handler in handlers { handler(event) }
    }

    // MARK: The loop

    private func run() {
        ioThread.store(UInt(pthread_self()), ordering: .releasing)
        var events = [epoll_event](repeating: epoll_event(), count: 16)
        while true {
            let count = epoll_wait(epollFD, &events, Int32(events.count), nextTimeoutMilliseconds())
            if count < 0 && errno != EINTR {
                logger.error("epoll_wait failed: \(String(cString: strerror(errno)))")
                break
            }
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                if fd == wakeFD {
                    var value: UInt64 = 0
                    _ = Glibc.read(wakeFD, &value, 8)
                } else {
                    handleWatches(fd: fd, events: events[index].events)
                }
            }
            fireTimeouts()
            let (jobs, stopping) = shared.withLock { state in
                let jobs = state.jobs
                state.jobs = []
                return (jobs, state.stopping)
            }
            for job in jobs { job() }
            dispatchAll()
            if disconnectPending { handleDisconnect() }
            if stopping { break }
        }
        teardown()
    }

    private func dispatchAll() {
        guard let connection = currentConnection() else { return }
        defer { dbus_connection_unref(connection) }
        while dbus_connection_dispatch(connection) == DBUS_DISPATCH_DATA_REMAINS {}
    }

    /// The filter sees every incoming message on the I/O thread during dispatch.
    fileprivate func received(_ message: OpaquePointer) {
        if dbus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
            disconnectPending = true
            return
        }
        guard let signal = MessageCoding.readSignal(message) else { return }
        // The daemon's own signals to us (NameAcquired) are not counted: only other connections' signals.
        if signal.interface.rawValue != "org.freedesktop.DBus" { signalsReceived.add(1, ordering: .relaxed) }
        for route in routes.values
        where route.rules.contains(where: { $0.matches(signal, strictArgumentPaths: route.strictArgumentPaths) }) {
            route.deliver(signal)
        }
    }

    private func handleDisconnect() {
        disconnectPending = false
        let old = shared.withLock { state -> UInt in
            let old = state.connection
            state.connection = 0
            state.connected = false
            return old
        }
        if let connection = Self.pointer(old) {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
        }
        for key in Array(rules.keys) {
            guard var entry = rules[key] else { continue }
            let waiters = entry.waiters
            entry.waiters = []
            entry.active = false
            rules[key] = entry
            for waiter in waiters {
                waiter(.failure(BusError(.disconnected, value: key, "the bus went away before it acknowledged \(key)")))
            }
        }
        logger.info("disconnected from the bus", metadata: ["address": "\(address.rawValue)"])
        report(.disconnected)
        if automaticReconnect {
            if !shared.withLock({ $0.stopping }) {
                reconnector = Reconnector(io: self)
                reconnector?.start()
            }
        } else {
            for route in routes.values { route.finish() }
            routes = [:]
        }
    }

    /// Called on the I/O thread with a new connection from the reconnector.
    func adoptReconnected(_ connection: OpaquePointer) {
        reconnector?.stop()
        reconnector = nil
        install(connection)
        let keys = rules.filter { $0.value.count > 0 }.map(\.key)
        let remaining = Atomic<Int>(keys.count)
        logger.info("reconnected to the bus", metadata: ["address": "\(address.rawValue)", "rules": "\(keys.count)"])
        if keys.isEmpty {
            report(.reconnected)
            return
        }
        for key in keys {
            sendRuleRequest("AddMatch", key) { [self] result in
                if var entry = rules[key] {
                    if case .success = result { entry.active = true }
                    let waiters = entry.waiters
                    entry.waiters = []
                    rules[key] = entry
                    for waiter in waiters { waiter(result) }
                }
                if case .failure(let error) = result {
                    logger.error("could not re-add a match rule after reconnecting: \(error)")
                }
                if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                    report(.reconnected)
                }
            }
        }
    }

    /// Stops the loop; the connection is closed on the I/O thread and every route finished.
    func stop() {
        let wasStopping = shared.withLock { state -> Bool in
            let was = state.stopping
            state.stopping = true
            return was
        }
        if !wasStopping {
            var one: UInt64 = 1
            _ = Glibc.write(wakeFD, &one, 8)
        }
    }

    private func teardown() {
        reconnector?.stop()
        reconnector = nil
        let old = shared.withLock { state -> UInt in
            let old = state.connection
            state.connection = 0
            state.connected = false
            state.eventHandlers = [:]
            return old
        }
        if let connection = Self.pointer(old) {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
        }
        for route in routes.values { route.finish() }
        routes = [:]
        for entry in rules.values {
            for waiter in entry.waiters { waiter(.failure(closedError())) }
        }
        rules = [:]
        let late = shared.withLock { state in
            let jobs = state.jobs
            state.jobs = []
            return jobs
        }
        for job in late { job() }
    }

    // MARK: libdbus watches and timeouts

    private func epollEvents(for fd: Int32, in state: Shared) -> UInt32 {
        var events: UInt32 = 0
        for bits in state.watches[fd] ?? [] {
            guard let watch = Self.pointer(bits), dbus_watch_get_enabled(watch) != 0 else { continue }
            let flags = dbus_watch_get_flags(watch)
            if flags & DBUS_WATCH_READABLE.rawValue != 0 { events |= EPOLLIN.rawValue }
            if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { events |= EPOLLOUT.rawValue }
        }
        return events
    }

    private func updateEpoll(fd: Int32, state: Shared, operation: Int32) {
        var event = epoll_event()
        event.events = epollEvents(for: fd, in: state)
        event.data.fd = fd
        epoll_ctl(epollFD, operation, fd, &event)
    }

    fileprivate func watchAdded(_ watch: OpaquePointer) {
        let fd = dbus_watch_get_unix_fd(watch)
        shared.withLock { state in
            let isNew = state.watches[fd] == nil
            state.watches[fd, default: []].append(Self.bits(watch))
            updateEpoll(fd: fd, state: state, operation: isNew ? EPOLL_CTL_ADD : EPOLL_CTL_MOD)
        }
    }

    fileprivate func watchRemoved(_ watch: OpaquePointer) {
        let bits = Self.bits(watch)
        shared.withLock { state in
            for (fd, list) in state.watches where list.contains(bits) {
                let rest = list.filter { $0 != bits }
                if rest.isEmpty {
                    state.watches[fd] = nil
                    epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
                } else {
                    state.watches[fd] = rest
                    updateEpoll(fd: fd, state: state, operation: EPOLL_CTL_MOD)
                }
            }
        }
    }

    fileprivate func watchToggled(_ watch: OpaquePointer) {
        let bits = Self.bits(watch)
        shared.withLock { state in
            for (fd, list) in state.watches where list.contains(bits) {
                updateEpoll(fd: fd, state: state, operation: EPOLL_CTL_MOD)
            }
        }
    }

    private func handleWatches(fd: Int32, events: UInt32) {
        var index = 0
        while true {
            // Look the watch up again each time: handling one may remove the others.
            let bits = shared.withLock { state -> UInt? in
                guard let list = state.watches[fd], index < list.count else { return nil }
                return list[index]
            }
            guard let bits, let watch = Self.pointer(bits) else { return }
            index += 1
            guard dbus_watch_get_enabled(watch) != 0 else { continue }
            let flags = dbus_watch_get_flags(watch)
            var condition: UInt32 = 0
            if events & EPOLLIN.rawValue != 0 && flags & DBUS_WATCH_READABLE.rawValue != 0 {
                condition |= DBUS_WATCH_READABLE.rawValue
            }
            if events & EPOLLOUT.rawValue != 0 && flags & DBUS_WATCH_WRITABLE.rawValue != 0 {
                condition |= DBUS_WATCH_WRITABLE.rawValue
            }
            if events & EPOLLERR.rawValue != 0 { condition |= DBUS_WATCH_ERROR.rawValue }
            if events & EPOLLHUP.rawValue != 0 { condition |= DBUS_WATCH_HANGUP.rawValue }
            if condition != 0 { dbus_watch_handle(watch, condition) }
        }
    }

    private static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000 + UInt64(spec.tv_nsec) / 1_000_000
    }

    fileprivate func timeoutChanged(_ timeout: OpaquePointer, removed: Bool) {
        let bits = Self.bits(timeout)
        shared.withLock { state in
            if removed {
                state.timeouts[bits] = nil
            } else {
                let interval = Int(dbus_timeout_get_interval(timeout))
                state.timeouts[bits] = TimeoutRecord(
                    interval: interval, enabled: dbus_timeout_get_enabled(timeout) != 0,
                    deadline: Self.now() + UInt64(max(0, interval)))
            }
        }
        wake()
    }

    private func nextTimeoutMilliseconds() -> Int32 {
        shared.withLock { state in
            var next = UInt64.max
            for record in state.timeouts.values where record.enabled { next = min(next, record.deadline) }
            guard next != UInt64.max else { return -1 }
            let now = Self.now()
            return next <= now ? 0 : Int32(clamping: next - now)
        }
    }

    private func fireTimeouts() {
        // Most wake-ups have no libdbus timeout at all (they exist only while a reply is awaited).
        if shared.withLock({ $0.timeouts.isEmpty }) { return }
        let now = Self.now()
        let due = shared.withLock { state -> [UInt] in
            let due = state.timeouts.filter { $0.value.enabled && $0.value.deadline <= now }.map(\.key)
            for key in due {
                guard var record = state.timeouts[key] else { continue }
                record.deadline = now + UInt64(max(0, record.interval))
                state.timeouts[key] = record
            }
            return due
        }
        for bits in due {
            let stillThere = shared.withLock { $0.timeouts[bits] != nil }
            if stillThere, let timeout = Self.pointer(bits) { dbus_timeout_handle(timeout) }
        }
    }

    // MARK: C callbacks (no captures; the loop comes through `data`)

    private static func io(_ data: UnsafeMutableRawPointer?) -> BusIO? {
        data.map { Unmanaged<BusIO>.fromOpaque($0).takeUnretainedValue() }
    }

    private static let addWatch: DBusAddWatchFunction = { watch, data in
        if let watch { io(data)?.watchAdded(watch) }
        return 1
    }
    private static let removeWatch: DBusRemoveWatchFunction = { watch, data in
        if let watch { io(data)?.watchRemoved(watch) }
    }
    private static let toggleWatch: DBusWatchToggledFunction = { watch, data in
        if let watch { io(data)?.watchToggled(watch) }
    }
    private static let addTimeout: DBusAddTimeoutFunction = { timeout, data in
        if let timeout { io(data)?.timeoutChanged(timeout, removed: false) }
        return 1
    }
    private static let removeTimeout: DBusRemoveTimeoutFunction = { timeout, data in
        if let timeout { io(data)?.timeoutChanged(timeout, removed: true) }
    }
    private static let toggleTimeout: DBusTimeoutToggledFunction = { timeout, data in
        if let timeout { io(data)?.timeoutChanged(timeout, removed: false) }
    }
    private static let wakeupMain: DBusWakeupMainFunction = { data in
        io(data)?.wake()
    }
    private static let dispatchStatus: DBusDispatchStatusFunction = { _, status, data in
        if status == DBUS_DISPATCH_DATA_REMAINS { io(data)?.wake() }
    }
    private static let filter: DBusHandleMessageFunction = { _, message, data in
        if let message { io(data)?.received(message) }
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
    }
}

/// Carries a reply handler through libdbus's `void *` user data.
private final class ReplyBox {
    let handler: (OpaquePointer?) -> Void
    init(_ handler: @escaping (OpaquePointer?) -> Void) { self.handler = handler }
}

/// Gathers the answers for a route's rules.
/// `@unchecked Sendable`: created and used only on the I/O thread.
private final class OutcomeCollector: @unchecked Sendable {
    private let count: Int
    private var results: [(MatchRule, Result<Void, BusError>)] = []

    init(count: Int) { self.count = count }

    func record(rule: MatchRule, _ result: Result<Void, BusError>) { results.append((rule, result)) }

    /// All results once every rule has answered, else `nil`.
    func finished() -> [(MatchRule, Result<Void, BusError>)]? { results.count == count ? results : nil }
}

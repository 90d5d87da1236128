// SPDX-License-Identifier: Apache-2.0
import Logging
import WormholeDBus
import WormholeSystem

/// What every post route of one center shares: the connection its signals come on, and how its
/// rings and states are told apart and kept.
struct PostReception: Sendable {
    let connection: BusConnection
    /// The bus's doorbell hash (`DoorbellHash.busKey(of:)`).
    let busKey: UInt64
    /// Whether the center's routes may be rung (``PeerWake/doorbell``).
    let ringable: Bool
    let logger: Logger
    /// The last state seen per name (``DarwinNotificationCenter/lastState(of:)``).
    let lastStates: Locked<[String: UInt64]>
    /// The center was closed: its routes are rung no more.
    let closed: Locked<Bool>
    /// The center's runtime: its doorbell and the process's own connections.
    let runtime: WormholeRuntime
}

/// One subscription's wake source for the posts of a name, or of every name below a prefix: its
/// route on the bus (the match rules, contract §1), its doorbell registration (contract §9) and
/// the merge of its rings with the bus's signals, each post once and in its sender's order. Every
/// kind of subscription that posts wake (notification observers, message listeners, journal
/// listeners, defaults observers, and their streams) adds one of its own, with its own sink:
/// no kind wraps another kind's listener.
///
/// The sink runs on the I/O thread: for every post (`.posted`), and once after each reconnect
/// (`.catchUp`). The doorbell is this type's alone: registering, receiving a ring, the merge,
/// and asking the connection to drop the signal a ring stood for.
final class PostRoute: Sendable {
    private struct State {
        var routeID: UInt64?
        /// Its doorbell registration (directory hash, ID), while it has one.
        var doorbell: (directory: UInt64, id: UInt64)?
        /// The merge of its rings and signals (contract §9): each post once, in its sender's order.
        var order = PostOrder()
        var removed = false
    }

    /// The observed name, or prefix (ending in `/`).
    let target: NotificationName
    let isPrefix: Bool
    let options: ObserverOptions
    private let reception: PostReception
    private let sink: @Sendable (DarwinNotification) -> Void
    private let state = Locked(State())

    init(
        target: NotificationName, isPrefix: Bool, options: ObserverOptions, reception: PostReception,
        sink: @escaping @Sendable (DarwinNotification) -> Void
    ) {
        self.target = target
        self.isPrefix = isPrefix
        self.options = options
        self.reception = reception
        self.sink = sink
    }

    /// The match rules of the route: two for a name (its bucket interface and the plain one), one
    /// `arg0path` rule for a prefix.
    var rules: [MatchRule] {
        get throws {
            isPrefix ? [try NotifyContract.rule(observingPrefix: target)] : try NotifyContract.rules(observing: target)
        }
    }

    /// The connection's route, once added; the doorbell registration follows.
    var routeID: UInt64? {
        get { state.withLock { $0.routeID } }
        set { state.withLock { $0.routeID = newValue } }
    }

    var isRemoved: Bool { state.withLock { $0.removed } }

    /// Marks it removed and leaves the doorbell; the connection's route for the caller to
    /// remove, nil when there is none to remove (none was added, or it was removed already).
    func takeForRemoval() -> UInt64? {
        let (routeID, registration) = state.withLock { state -> (UInt64?, (directory: UInt64, id: UInt64)?) in
            if state.removed { return (nil, nil) }
            state.removed = true
            defer {
                state.routeID = nil
                state.doorbell = nil
            }
            return (state.routeID, state.doorbell)
        }
        leaveDoorbell(registration)
        return routeID
    }

    // MARK: The doorbell

    /// Registers to be rung (when the center may be and the process has a doorbell), once it is
    /// active on the bus. A route removed meanwhile, or whose center closed, leaves the doorbell
    /// again at once.
    func enroll() {
        guard reception.ringable, !reception.closed.withLock({ $0 }), let doorbell = reception.runtime.doorbell
        else { return }
        let registration = doorbell.register(
            busKey: reception.busKey, target: target.rawValue, isPrefix: isPrefix
        ) { [weak self] ring in self?.rung(ring) }
        guard let registration else { return }
        let kept = state.withLock { state -> Bool in
            if state.removed || state.doorbell != nil { return false }
            state.doorbell = registration
            return true
        }
        if !kept { return doorbell.unregister(registration) }
        // Closed meanwhile: the close's own leaving may have run before the registration was kept.
        if reception.closed.withLock({ $0 }) { leaveDoorbell() }
    }

    /// Stops being rung (the center closes; its routes end with the connection).
    func leaveDoorbell() {
        leaveDoorbell(
            state.withLock { state in
                defer { state.doorbell = nil }
                return state.doorbell
            })
    }

    private func leaveDoorbell(_ registration: (directory: UInt64, id: UInt64)?) {
        if let registration { reception.runtime.doorbell?.unregister(registration) }
    }

    /// Runs on the I/O thread for every ring of this process that the target may match (by its
    /// directory's hash): the same checks as the bus's rules, then the merge with the bus's
    /// signals (``PostOrder``), then the same delivery as a signal's. No ring is delivered while
    /// the connection is down: the catch-up after the reconnect stands for it.
    private func rung(_ ring: DoorbellRing) {
        guard ring.busKey == reception.busKey, reception.connection.isConnected else { return }
        let target = target.rawValue.utf8
        if isPrefix {
            guard ring.name.utf8.starts(with: target), NotificationName(received: ring.name) != nil else { return }
        } else {
            guard ring.name.utf8.elementsEqual(target) else { return }
        }
        let ring = PostOrder.Ring(
            sender: ring.sender, name: ring.name, serial: ring.serial, previous: ring.previous, state: ring.state)
        deliver(rings: state.withLock { state in state.removed ? [] : state.order.ring(ring) })
    }

    /// Delivers rings that the merge let through, each as its signal would be; the connection then
    /// drops each one's signal in its filter, undecoded, when every route it reaches was rung for it.
    private func deliver(rings: [PostOrder.Ring]) {
        for ring in rings {
            let name = isPrefix ? (NotificationName(received: ring.name) ?? target) : target
            deliver(name: name, rawName: ring.name, state: ring.state, sender: ring.sender)
            // After the delivery (its handler's own post goes first).
            guard let routeID else { continue }
            var probe = Signal(
                path: NotifyContract.path, interface: NotifyContract.bucket(for: ring.name),
                member: NotifyContract.posted, arguments: [.string(ring.name), .uint64(ring.state)])
            probe.sender = ring.sender
            let (sender, rawName, serial) = (ring.sender, ring.name, ring.serial)
            reception.connection.expectDuplicate(of: probe, serial: serial, routeID: routeID) { [weak self] in
                self?.state.withLock { $0.order.absorbed(sender: sender, name: rawName, serial: serial) }
            }
        }
    }

    // MARK: The bus

    /// The connection is new: forgets the rings and signals seen (no signal of before will come
    /// on it), and tells the sink to catch up.
    func reconnected() {
        let removed = state.withLock { state -> Bool in
            state.order.reset()
            return state.removed
        }
        if !removed { sink(DarwinNotification(name: target, state: nil, reason: .catchUp)) }
    }

    /// Runs on the I/O thread for every signal routed here: only what the route's rules do not
    /// say is checked here, once (``NotifyContract/name(in:routedTo:isPrefix:)``).
    func received(_ signal: Signal) {
        guard let (name, rawName) = NotifyContract.name(in: signal, routedTo: target, isPrefix: isPrefix) else {
            return reception.logger.debug("dropped a malformed Posted signal: \(signal)")
        }
        var state: UInt64?
        if signal.arguments.count > 1 {
            // Wormhole sends `t`; other senders may use any integer type (dbus-python sends a
            // Python int as `i`). A negative or non-integer state is no state, and says why.
            let argument = signal.arguments[1]
            state = argument.nonNegativeInteger
            if state == nil {
                reception.logger.debug(
                    "Posted '\(rawName)' carried the state \(argument), not an integer of 0 or more: delivered without a state"
                )
            }
        }
        // A Wormhole sender with a doorbell numbers its posts: a route that may be rung merges
        // them with its rings, each post once and in its order (``PostOrder``). It keeps the
        // signals that come before any ring too: their rings may follow.
        if reception.ringable, reception.runtime.doorbell != nil, let sender = signal.sender,
            let serial = signal.serial, serial & DoorbellSocket.serialMark != 0
        {
            let (deliverSignal, then) = self.state.withLock { state in
                state.order.signal(sender: sender, name: rawName, serial: serial)
            }
            if deliverSignal { deliver(name: name, rawName: rawName, state: state, sender: sender) }
            return deliver(rings: then)
        }
        deliver(name: name, rawName: rawName, state: state, sender: signal.sender)
    }

    /// The end of every delivery of a post, by the bus or the doorbell.
    private func deliver(name: NotificationName, rawName: String, state: UInt64?, sender: String?) {
        if let state { reception.lastStates.withLock { $0[rawName] = state } }
        let own =
            sender.map {
                reception.runtime.ownConnections.contains(sender: $0, on: reception.connection.address)
            } ?? false
        if own && options.ignoresOwnPosts { return }
        sink(DarwinNotification(name: name, state: state, reason: .posted, isOwnPost: own))
    }
}

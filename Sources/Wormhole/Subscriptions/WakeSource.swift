// SPDX-License-Identifier: Apache-2.0
public import WormholeDBus
import WormholeSystem

/// How a facade's subscriptions are woken now (``MessageCenter/wakeSource``,
/// ``GroupDefaults/wakeSource``): the same for every kind of subscription that has files behind it
/// (mailbox listeners, journal readers, defaults observers).
public enum WakeSource: Sendable, Hashable, CustomStringConvertible {
    /// Signals on the bus (contract §1, §3, §5, §6, §7): the normal way.
    case bus
    /// inotify on the directories that hold what is subscribed to (the wormhole directory for
    /// mailboxes, a journal's directory, the `Preferences` directory for a defaults suite),
    /// because the bus cannot be reached or was lost (the error says why). A change there wakes
    /// the subscriptions as a post would, with the same delivery rules (no signal carried it, so
    /// a mailbox delivery's ``MessageDelivery/sentAt`` is `nil`). Transient messages and plain
    /// notifications need the bus. As soon as the bus can be reached the subscriptions' rules are
    /// added, the watches stop and every subscription catches up once.
    case directory(BusError)
    /// Neither: the bus cannot be reached and the directories cannot be watched either (the
    /// error says both; typically the per-user inotify limit `fs.inotify.max_user_instances` is
    /// reached, and it names that limit). The subscriptions wait for the bus and catch up when it
    /// can be reached, as after ``directory(_:)``.
    case waitingForBus(BusError)

    public var description: String {
        switch self {
        case .bus: "bus"
        case .directory(let error): "directory (\(error.message))"
        case .waitingForBus(let error): "waiting for the bus (\(error.message))"
        }
    }
}

extension MessageCenter {
    /// How this wormhole's listeners and journal readers are woken now: ``WakeSource/bus``, or
    /// ``WakeSource/directory(_:)`` while the bus cannot be reached (`.bus` while it has none).
    public var wakeSource: WakeSource { wakeups.source }

    /// Calls `handler` with the new ``WakeSource`` each time this wormhole's listeners and journal
    /// readers switch from the bus to the directory watch or back, until the subscription is
    /// cancelled or released. On the switch back it runs once their catch-up was asked for.
    public func onWakeSourceChange(
        on delivery: DeliveryQueue = .serial, _ handler: @escaping @Sendable (WakeSource) -> Void
    ) -> Subscription {
        wakeups.subscribe(delivery.makeExecutor(label: "wormhole.wake-source"), handler)
    }
}

/// The reader of a ``WakeSource`` subscription (``MessageCenter/onWakeSourceChange(on:_:)``,
/// ``GroupDefaults/onWakeSourceChange(on:_:)``): every change, in order; the latest alone while
/// suspended.
final class WakeSourceReader: SubscriptionCore {
    let pump: DeliveryPump
    private let handler: @Sendable (WakeSource) -> Void
    private let pending = Locked<[WakeSource]>([])

    init(executor: DeliveryExecutor, handler: @escaping @Sendable (WakeSource) -> Void) {
        pump = DeliveryPump(executor: executor)
        self.handler = handler
    }

    func changed(to source: WakeSource) {
        let wake = pending.withLock { pending -> Bool in
            if pump.isCancelled { return false }
            if pump.isSuspended { pending = [] }
            pending.append(source)
            return true
        }
        if wake { self.wake() }
    }

    func drainPending() {
        drain {
            pending.withLock { $0.takeAll() }
        } deliver: {
            handler($0)
        }
    }

    func forgetPending() { pending.withLock { $0 = [] } }
}

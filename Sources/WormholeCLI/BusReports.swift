// SPDX-License-Identifier: Apache-2.0
import Synchronization
import Wormhole
import WormholeDBus

/// Says on standard error what happens to the bus under `observe`, `listen` (every mode) and
/// `defaults observe` (contract §4, v1.2): one line when the connection is lost, starting
/// `wormhole: lost the bus`, one when it is back and what changed meanwhile was delivered,
/// starting `wormhole: back on the bus`. Without it a lost bus would be silent unless
/// `WORMHOLE_LOG` is set.
final class BusReports: Sendable {
    /// What the command does after a reconnect.
    enum Kind {
        /// `observe`: posts made meanwhile are gone (notifications carry no payload).
        case observe
        /// `listen`: the mailboxes that changed meanwhile are delivered again (`catchUp` lines).
        case listen
        /// `listen --journal`: the records appended meanwhile are printed (the line is written by
        /// the thread that prints them, once it has: see ``watch(_:whenBack:)``).
        case journal
        /// `defaults observe`: the keys that changed meanwhile are printed (`catchUp` changes).
        case defaults
    }

    private let kind: Kind
    private let address: String
    /// Catch-up lines written since the last reconnect (`listen`).
    private let caughtUp = Atomic<Int>(0)

    /// `address`: the bus watched; `nil` when there is no session bus (its messages then say so).
    init(_ kind: Kind, address: BusAddress?) {
        self.kind = kind
        self.address = address.map { quoted($0.rawValue) } ?? "(no session bus)"
    }

    /// Counts one catch-up line (call where the line is written, on the I/O thread).
    func caughtUpOne() {
        caughtUp.add(1, ordering: .relaxed)
    }

    /// What is watched while there is no bus, as the lines name it.
    private var directory: String {
        switch kind {
        case .observe, .listen: "the wormhole directory"
        case .journal: "the journal directory"
        case .defaults: "the Preferences directory"
        }
    }

    /// Watches where a facade's subscriptions are woken (`listen` in every mode and `defaults
    /// observe`, which fall back to a directory watch): one line when they move to the watch
    /// because the bus was lost, one when they are back on the bus and have caught up.
    /// Handlers run on the I/O thread or the switching thread, after the catch-up deliveries
    /// were written. `whenBack`: instead of writing the back line at once, call it (the command
    /// writes ``writeBackLine()`` once it has delivered what changed).
    func watch(_ facade: some WakeSourceReporting, whenBack: (@Sendable () -> Void)? = nil) -> Subscription {
        facade.onWakeSourceChange(on: .ioThread) { [self] source in
            switch source {
            case .directory(let error) where error.code == .disconnected:
                caughtUp.store(0, ordering: .relaxed)
                writeError("wormhole: lost the bus at \(address); listening through \(directory) until it is back")
            case .directory:
                // At start: said after `ready` by sayWhereListening.
                break
            case .waitingForBus(let error) where error.code == .disconnected:
                // "lost the bus at …; and the directory cannot be watched instead: …"
                caughtUp.store(0, ordering: .relaxed)
                writeError("wormhole: \(error.message); waiting for the bus")
            case .waitingForBus:
                break
            case .bus:
                if let whenBack { whenBack() } else { writeBackLine() }
            }
        }
    }

    /// After `ready`: says when the subscriptions started without a bus (woken through a directory).
    func sayWhereListening(_ facade: some WakeSourceReporting) {
        switch facade.wakeSource {
        case .directory(let error) where error.code != .disconnected:
            writeError(
                "wormhole: \(error.message); listening through \(directory) (inotify) until the bus can be reached")
        case .waitingForBus(let error):
            writeError("wormhole: \(error.message); waiting for the bus")
        default: break
        }
    }

    /// Watches `connection`. Call after every subscription of the command is made: handlers
    /// run in the order they were added, so on a reconnect the catch-up (on the I/O thread) is
    /// done when this one runs.
    /// `whenBack`: instead of writing the back line at once, call it (the command writes
    /// ``writeBackLine()`` once it has delivered what changed).
    func watch(_ connection: BusConnection, whenBack: (@Sendable () -> Void)? = nil) -> EventSubscription {
        connection.onEvent(on: .ioThread) { [self] event in
            switch event {
            case .disconnected:
                caughtUp.store(0, ordering: .relaxed)
                writeError("wormhole: lost the bus at \(address); waiting for it to come back")
            case .reconnected:
                if let whenBack { whenBack() } else { writeBackLine() }
            }
        }
    }

    /// The line that says the bus is back, and what was delivered since it was lost.
    func writeBackLine() {
        let count = caughtUp.exchange(0, ordering: .relaxed)
        switch kind {
        case .observe:
            writeError("wormhole: back on the bus at \(address); posts made while it was away were missed")
        case .listen:
            let changed = count == 1 ? "1 message" : "\(count) messages"
            writeError("wormhole: back on the bus at \(address); caught up (\(changed) changed while it was away)")
        case .journal:
            let records = count == 1 ? "1 record" : "\(count) records"
            writeError("wormhole: back on the bus at \(address); caught up (\(records) printed since it was lost)")
        case .defaults:
            let keys = count == 1 ? "1 key" : "\(count) keys"
            writeError("wormhole: back on the bus at \(address); caught up (\(keys) changed while it was away)")
        }
    }
}

/// A facade whose subscriptions fall back to a directory watch without a bus.
protocol WakeSourceReporting {
    var wakeSource: WakeSource { get }
    func onWakeSourceChange(
        on delivery: DeliveryQueue, _ handler: @escaping @Sendable (WakeSource) -> Void
    ) -> Subscription
}

extension MessageCenter: WakeSourceReporting {}
extension GroupDefaults: WakeSourceReporting {}

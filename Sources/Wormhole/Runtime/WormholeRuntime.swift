// SPDX-License-Identifier: Apache-2.0
import WormholeDBus
import WormholeSystem

/// The process's runtime: the one object that holds what every facade of a Wormhole process
/// shares, reached through ``shared``.
///
/// - ``system``: the machinery below D-Bus (`WormholeSystem`): the one event loop, the inotify
///   instance and the exit drain, which the D-Bus layer reaches on its own.
/// - ``connections``: the shared bus connections, one per bus and purpose (signals, transient).
/// - ``ownConnections``: every center's connection, to recognise the process's own posts.
/// - ``doorbell``: the doorbell (contract §9) with its endpoint and ringing socket; nil when it is
///   off.
/// - ``appIdentity``: the app ID the process posts under, resolved once.
/// - ``sweptDirectories``: the directories whose stale temporaries this process swept already.
/// - ``subscriptions``: every subscription of the process, registered once
///   (``SubscriptionTable``): each center's post routes and each facade's wake subscribers, in
///   the part of their owner.
///
/// Everything here is made on first use of ``shared`` and lives as long as the process; what
/// holds a descriptor or a thread (a connection, the endpoint, the loop) is opened by its first
/// user and closed with its last.
final class WormholeRuntime: Sendable {
    /// The process's runtime.
    static let shared = WormholeRuntime()

    let system: ProcessRuntime
    let connections: SharedConnections
    let ownConnections: OwnConnections
    let appIdentity: AppIdentity.Resolver
    let doorbell: Doorbell?
    let sweptDirectories: OpportunisticSweep
    let subscriptions: SubscriptionTable

    private init() {
        system = ProcessRuntime.shared
        connections = SharedConnections()
        ownConnections = OwnConnections()
        appIdentity = AppIdentity.Resolver()
        doorbell = Doorbell.make(identity: appIdentity, system: system)
        sweptDirectories = OpportunisticSweep()
        subscriptions = SubscriptionTable()
    }
}

/// Every center's connection in this process, to recognise own posts. A sender is this process
/// when it is the *current* unique name of one of them on the same bus address: every daemon
/// numbers unique names from `:1.0`, so a bare name could be another bus's, or (after a restart)
/// another process's that inherited a name this one held before.
final class OwnConnections: Sendable {
    private let table = Locked<[ObjectIdentifier: BusConnection]>([:])

    func insert(_ connection: BusConnection, for owner: ObjectIdentifier) {
        table.withLock { $0[owner] = connection }
    }

    func remove(_ owner: ObjectIdentifier) {
        _ = table.withLock { $0.removeValue(forKey: owner) }
    }

    func contains(sender: String, on address: BusAddress) -> Bool {
        table.withLock { $0.values.contains { $0.address == address && $0.uniqueName == sender } }
    }
}

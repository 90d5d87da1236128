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
///
/// Each subscription is registered with its owner, not here: a center keeps its post routes
/// (``PostRouteTable``), a facade's engine its wake subscribers (``WakeSubscriberTable``).
///
/// Everything here is made on first use of ``shared`` and lives as long as the process; what
/// holds a descriptor or a thread (a connection, the endpoint, the loop) is opened by its first
/// user and closed with its last.
///
/// A test can make a runtime of its own (``init(sharingProcessOf:)``) and make facades in it
/// (``current``): they get connections of their own (another unique name on the same bus) and
/// share with ``shared`` what there is one of per process.
final class WormholeRuntime: Sendable {
    /// The process's runtime.
    static let shared = WormholeRuntime()

    /// The runtime the facades made now use (`MessageCenter`, `GroupDefaults`,
    /// `DarwinNotificationCenter` read it in their initializers): ``shared``, unless a test binds
    /// one of its own around the facades it makes (`WormholeRuntime.$current.withValue(runtime) { … }`).
    @TaskLocal static var current: WormholeRuntime = .shared

    let system: ProcessRuntime
    let connections: SharedConnections
    let ownConnections: OwnConnections
    let appIdentity: AppIdentity.Resolver
    let doorbell: Doorbell?
    let sweptDirectories: OpportunisticSweep

    private init() {
        system = ProcessRuntime.shared
        connections = SharedConnections()
        ownConnections = OwnConnections()
        appIdentity = AppIdentity.Resolver()
        doorbell = Doorbell.make(identity: appIdentity, system: system)
        sweptDirectories = OpportunisticSweep()
    }

    /// A runtime of its own, for tests: its own bus connections (so its facades hold other
    /// connections, with other unique names, than `base`'s on the same bus), and, through its
    /// facades' own tables, its own subscriptions. What a process has one of is `base`'s: the
    /// loop, the inotify instance and the exit drain (``ProcessRuntime``), the doorbell (one
    /// endpoint and one serial sequence per process, contract §9), the app identity it posts
    /// under, the set of its own connections (a post from either runtime is the process's own)
    /// and the record of directories swept.
    package init(sharingProcessOf base: WormholeRuntime = .shared) {
        system = base.system
        connections = SharedConnections()
        ownConnections = base.ownConnections
        appIdentity = base.appIdentity
        doorbell = base.doorbell
        sweptDirectories = base.sweptDirectories
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

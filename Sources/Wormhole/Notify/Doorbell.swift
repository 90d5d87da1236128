// SPDX-License-Identifier: Apache-2.0
import Glibc
import Logging
import Synchronization
import SystemPackage
import WormholeDBus
import WormholeSystem

/// How a facade's posts and observers wake, and are woken by, Wormhole peers of the same user
/// (docs/contract.md section 9).
public enum PeerWake: Sendable, Hashable {
    /// Beside the bus signal, a direct datagram ("ring") between Wormhole processes of this user
    /// that share `$XDG_RUNTIME_DIR`: posts ring the observers registered for the name once their
    /// connection accepted the signal, and observers register to be rung. An observer delivers
    /// whichever comes first, once, and a sender's posts of a name in order. The default; off (as ``busOnly``) without `$XDG_RUNTIME_DIR` or with
    /// `WORMHOLE_DOORBELL=off` in the environment.
    case doorbell
    /// The bus signal alone, as foreign posters and observers use it: posts ring nobody and
    /// observers are not rung.
    case busOnly
}

/// The doorbell: a direct same-user wake between Wormhole peers beside the bus signal.
///
/// Layout under `$XDG_RUNTIME_DIR/wormhole/doorbell/` (0700, the user's):
/// - `e<ID>`: the endpoint of one process, an `AF_UNIX` datagram socket (`ID`: 16 lower-case hex
///   digits, random per process);
/// - `n<H>/<ID>`: one empty file per process that observes what `H` names, where `H` is 16 hex
///   digits of FNV-1a-64 over the bus's hash (8 bytes, little-endian), one kind byte (`n` for a
///   name, `p` for a prefix ending in `/`) and the name's UTF-8 bytes; the bus's hash is
///   FNV-1a-64 of its address's sharing key (``BusAddress/sharingKey``).
///
/// A post of name N on bus B is numbered (its signal's serial), and once its connection accepted
/// the signal it rings every process with an entry under `n<H(B, n, N)>` and under
/// `n<H(B, p, P)>` for each prefix P of N that ends in `/`, once each, with that serial and the
/// serial of the sender's previous post of N. A ring that finds nobody there (`ECONNREFUSED`,
/// `ENOENT`) removes the entry; the dead endpoint's file is left for the sweep of the next process
/// that opens an endpoint. The receiving process checks the ring's credentials (same user only)
/// and hands it to exactly its observers of that bus whose name or prefix matches, which merge it
/// with the bus's signals (``PostOrder``): each post once, in its sender's order.
final class Doorbell: Sendable {

    /// What a registration is handed when its process is rung for it (on the loop's thread).
    typealias Deliver = @Sendable (DoorbellRing) -> Void

    private struct Registration {
        var deliver: Deliver
    }

    private struct State {
        /// This process's registrations, by directory hash, then by registration ID.
        var registrations: [UInt64: [UInt64: Registration]] = [:]
        var nextID: UInt64 = 1
        var endpointOpen = false
        /// The root was made and checked (once).
        var rootReady = false
        /// The hook that removes this process's files at a normal exit (added with the endpoint).
        var exitHook: UInt64?
    }

    /// `$XDG_RUNTIME_DIR/wormhole/doorbell`.
    let root: String
    /// This process's endpoint ID (16 hex digits).
    let endpointID: String
    private let logger = Logger(label: "wormhole.doorbell")
    private let state = Locked(State())
    /// The ringing side's view of the registrations.
    let lookup: RegistrationLookup
    private let sequence = Locked(PostSequence())

    // Counters, for tests and `doctor`.
    /// Endpoints rung (datagrams delivered to a queue).
    let ringsSent = Atomic<UInt64>(0)
    /// Rings received and handed to observers.
    let ringsReceived = Atomic<UInt64>(0)
    /// Rings refused: another user's, or malformed.
    let ringsRefused = Atomic<UInt64>(0)
    /// Stale registrations removed by this process's rings.
    let staleRemoved = Atomic<UInt64>(0)

    /// The process's endpoint, opened with the first registration, closed at exit.
    let endpoint: DoorbellSocket.Endpoint
    /// The process's socket that rings.
    private let ringer = DoorbellSocket.Ringer()
    /// Where the exit hook is added.
    private let exitDrain: ExitDrain

    init(root: String, endpointID: String, loop: RuntimeLoop, exitDrain: ExitDrain) {
        self.root = root
        self.endpointID = endpointID
        lookup = RegistrationLookup(root: root)
        endpoint = DoorbellSocket.Endpoint(loop: loop)
        self.exitDrain = exitDrain
    }

    /// Whether the environment variable `name` turns something off (`off`, `0`, `no`, `false`).
    private static func isOff(_ name: String) -> Bool {
        guard let setting = Syscall.environment(name) else { return false }
        return ["off", "0", "no", "false"].contains(setting.lowercased())
    }

    /// The process's doorbell (``WormholeRuntime/doorbell``); nil when it is off (no
    /// `$XDG_RUNTIME_DIR`, `WORMHOLE_DOORBELL=off`, a sandboxed process, or a runtime directory
    /// whose paths would not fit a socket address).
    static func make(identity: AppIdentity.Resolver, system: ProcessRuntime) -> Doorbell? {
        if isOff("WORMHOLE_DOORBELL") { return nil }
        // A sandboxed participant (an app ID, contract §8) talks to the bus through a proxy:
        // xdg-dbus-proxy closes a client whose serials do not increase, and the doorbell's
        // numbered posts (high serials) followed by libdbus's own calls (low ones) would not.
        // Its bus is the way (as between sandboxed apps anyway); so is one whose app ID is invalid.
        guard case .success(nil) = Result(catching: { try identity.current() }) else { return nil }
        guard let runtime = Syscall.environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") else {
            return nil
        }
        let doorbell = Doorbell(
            root: runtime + "/wormhole/doorbell", endpointID: hex(UInt64.random(in: 0...UInt64.max)),
            loop: system.loop, exitDrain: system.exitDrain)
        // `e<ID>` must fit `sun_path`.
        guard doorbell.endpointPath(doorbell.endpointID).utf8.count <= DoorbellSocket.maximumPathLength else {
            return nil
        }
        return doorbell
    }

    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    func endpointPath(_ id: String) -> String { root + "/e" + id }

    // MARK: Listening

    /// Registers an observer of `target` (a name, or a prefix ending in `/`) on the bus
    /// `busKey`: this process gets an entry under the target's directory (the first registration
    /// of it makes it, and opens the endpoint). Returns the registration's ID for
    /// ``unregister(_:)``, or nil when the doorbell cannot be used here (said in the log at
    /// debug level; the bus signal wakes the observer as before).
    func register(busKey: UInt64, target: String, isPrefix: Bool, deliver: @escaping Deliver) -> (UInt64, UInt64)? {
        let directory = DoorbellHash.directoryHash(busKey: busKey, target: target, isPrefix: isPrefix)
        return state.withLock { state -> (UInt64, UInt64)? in
            do {
                if !state.rootReady {
                    try makeRoot()
                    state.rootReady = true
                }
                if !state.endpointOpen {
                    try openEndpoint()
                    state.endpointOpen = true
                    sweep()
                    if state.exitHook == nil {
                        state.exitHook = exitDrain.addHook { [weak self] _ in self?.leaveAtExit() }
                    }
                }
                if state.registrations[directory, default: [:]].isEmpty {
                    // At most `registrationLimit` directories: observers beyond are woken by the bus.
                    guard state.registrations.count < Self.registrationLimit else { return nil }
                    try addEntry(directory)
                }
            } catch {
                logger.debug("the doorbell is not used for \(target): \(error)")
                if state.registrations.values.allSatisfy(\.isEmpty) { closeEndpoint(&state) }
                return nil
            }
            let id = state.nextID
            state.nextID += 1
            state.registrations[directory, default: [:]][id] = Registration(deliver: deliver)
            return (directory, id)
        }
    }

    /// The most registration directories a process has entries in: observers of further names
    /// are woken by the bus alone. The doorbell is an accelerator: this bounds what a process
    /// makes at start and removes at its end (a `listen` of 10,000 names makes 64 registrations, not
    /// 10,000, on whatever file system holds the runtime directory).
    static let registrationLimit = 64

    /// Removes a registration; the last one of its directory removes the process's entry, the
    /// last one of the process closes the endpoint.
    func unregister(_ registration: (directory: UInt64, id: UInt64)) {
        state.withLock { state in
            guard state.registrations[registration.directory]?.removeValue(forKey: registration.id) != nil else {
                return
            }
            if state.registrations[registration.directory]?.isEmpty == true {
                state.registrations[registration.directory] = nil
                removeEntry(registration.directory)
            }
            if state.registrations.isEmpty { closeEndpoint(&state) }
        }
    }

    private func makeRoot() throws {
        let parent = String(root.dropLast("/doorbell".count))
        for directory in [parent, root] {
            try Self.makeDirectory(directory)
            try Self.checkPrivate(directory)
        }
    }

    /// Makes `path` (mode 0700) unless it exists.
    private static func makeDirectory(_ path: String) throws(WormholeError) {
        do throws(Errno) { try Syscall.mkdirUnlessPresent(path, 0o700) } catch { throw ioError(error, "create", path) }
    }

    /// The directory is the user's, not a symlink, and nobody else's to enter or write.
    private static func checkPrivate(_ path: String) throws {
        switch Result(catching: { () throws(Errno) -> stat in try Syscall.lstat(path) }) {
        case .success(let info): try checkPrivate(info, path: path)
        case .failure(let error): throw ioError(error, "inspect", path)
        }
    }

    static func checkPrivate(_ info: stat, path: String) throws {
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw WormholeError(.unsafePath, value: path, "\(path) is not a directory")
        }
        guard info.st_uid == Syscall.effectiveUserID() else {
            throw WormholeError(.unsafePath, value: path, "\(path) is owned by uid \(info.st_uid), not by this user")
        }
        guard info.st_mode & 0o022 == 0 else {
            throw WormholeError(.unsafePath, value: path, "\(path) is writable by group or others")
        }
    }

    private func openEndpoint() throws {
        let path = endpointPath(endpointID)
        let handler: @Sendable ([DoorbellSocket.Ring]) -> Void = { [weak self] rings in self?.received(rings) }
        do {
            try endpoint.open(path: path, handler: handler)
        } catch let failure where failure.code == EADDRINUSE {
            // A file left at our random ID: nobody can be bound there but a process with this ID.
            try? Syscall.unlink(path)
            try endpoint.open(path: path, handler: handler)
        }
    }

    /// Removes what processes killed without their exit hook left (contract §9, *Leftovers*): every
    /// other endpoint that nobody is bound to, with its registrations in every registration
    /// directory. Run when this process opens its endpoint, so a killed process's files last
    /// until the next Wormhole process of the user observes with the doorbell (on any bus). The
    /// registration directories are listed only when a dead endpoint was found.
    private func sweep() {
        let names = RegistrationLookup.names(at: root)
        var dead = Set<String>()
        for entry in names where entry.utf8.count == 17 && entry.hasPrefix("e") {
            let id = String(entry.dropFirst())
            guard id != endpointID, let address = DoorbellSocket.address(endpointPath(id)) else { continue }
            if DoorbellSocket.isBound(address) == false { dead.insert(id) }
        }
        guard !dead.isEmpty else { return }
        for entry in names where entry.utf8.count == 17 && entry.hasPrefix("n") {
            let directory = root + "/" + entry
            var removed = false
            for id in RegistrationLookup.names(at: directory) where dead.contains(id) {
                removed = (try? Syscall.unlink(directory + "/" + id)) != nil || removed
            }
            if removed { try? Syscall.rmdir(directory) }  // not empty: others observe it
        }
        for id in dead { try? Syscall.unlink(endpointPath(id)) }
        staleRemoved.add(UInt64(dead.count), ordering: .relaxed)
        logger.debug("removed \(dead.count) dead doorbell endpoints and their registrations")
    }

    /// At a normal exit (`exit()`, returning from `main`): this process's entries and endpoint
    /// file go, so that nobody rings a process that is gone. A killed process leaves them; the
    /// next ring removes them.
    private func leaveAtExit() {
        state.withLock { state in
            for directory in state.registrations.keys { removeEntry(directory) }
            state.registrations = [:]
            closeEndpoint(&state)
        }
    }

    private func closeEndpoint(_ state: inout State) {
        guard state.endpointOpen else { return }
        state.endpointOpen = false
        endpoint.close()
    }

    private func entryPath(_ directory: UInt64) -> (directory: String, entry: String) {
        let name = root + "/n" + Self.hex(directory)
        return (name, name + "/" + endpointID)
    }

    /// Makes `n<H>/<ID>`; a directory removed between its `mkdir` and the entry (by a process
    /// whose last entry it was) is made again.
    private func addEntry(_ directory: UInt64) throws {
        let (directoryPath, entryPath) = entryPath(directory)
        for _ in 0..<16 {
            try Self.makeDirectory(directoryPath)
            let opened = Result { () throws(Errno) -> Int32 in
                try Syscall.open(entryPath, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            }
            switch opened {
            case .success(let fd):
                Syscall.close(fd)
                return
            case .failure(let error) where error != .noSuchFileOrDirectory:
                throw ioError(error, "create", entryPath)
            case .failure:
                continue  // the directory went between the two calls: made again
            }
        }
        throw WormholeError(.io, value: directoryPath, "\(directoryPath) kept disappearing")
    }

    private func removeEntry(_ directory: UInt64) {
        let (directoryPath, entryPath) = entryPath(directory)
        try? Syscall.unlink(entryPath)
        try? Syscall.rmdir(directoryPath)  // ENOTEMPTY: other processes still observe it
    }

    /// On the loop's thread: rings read from the endpoint.
    private func received(_ rings: [DoorbellSocket.Ring]) {
        let uid = Syscall.effectiveUserID()
        var hashes: [UInt64] = []
        for ring in rings {
            guard ring.uid == uid else {
                ringsRefused.add(1, ordering: .relaxed)
                logger.info(
                    "refused a doorbell ring from uid \(ring.uid) (pid \(ring.pid)): only this user (\(uid)) may ring")
                continue
            }
            guard let message = DoorbellRing(decoding: ring.bytes) else {
                ringsRefused.add(1, ordering: .relaxed)
                logger.debug("dropped a malformed doorbell ring (\(ring.bytes.count) bytes) from pid \(ring.pid)")
                continue
            }
            ringsReceived.add(1, ordering: .relaxed)
            HopTrace.mark(.ringDecoded)
            hashes.removeAll(keepingCapacity: true)
            DoorbellHash.directoryHashes(busKey: message.busKey, name: message.name, into: &hashes)
            let targets = state.withLock { state in
                hashes.flatMap { state.registrations[$0].map { Array($0.values) } ?? [] }
            }
            // Each registration checks the name, the prefix and the bus itself (a hash may collide).
            for target in targets { target.deliver(message) }
        }
    }

    // MARK: Ringing

    /// Gives a post of `name` by the connection `sender` (number `session`) on the bus `busKey`
    /// its serial, and runs `send` with it under the sequence's lock, so that one connection's
    /// posts go out in the order of their serials. `send` calls `accepted` once the connection
    /// took the signal (before it is written): the serial is then this name's latest, and
    /// `accepted` returns the previous post's (0: none, nil: not known), for the ring. Every post
    /// of a process with a doorbell is numbered, rung or not: a receiver compares a signal's
    /// serial with the rings it delivered (``PostOrder``).
    func numbered(
        name: String, busKey: UInt64, sender: String, session: UInt64,
        send: (_ serial: UInt32, _ accepted: () -> UInt32?) throws -> Void
    ) throws {
        try sequence.withLock { sequence in
            let key = PostSequence.Key(busKey: busKey, sender: sender, session: session, name: name)
            let serial = sequence.nextSerial()
            try send(serial) { sequence.record(key, serial: serial) }
        }
    }

    /// Rings every process registered for `name` (or a prefix of it) on the bus `busKey`, for the
    /// post numbered `serial` (``numbered(name:busKey:sender:session:send:)``), once its signal
    /// was accepted and before it is written (so the rung process is woken before the bus
    /// daemon is). With nobody registered for the name it costs one `fstat` of the doorbell
    /// directory (whose registration directories are known from its last listing while it is
    /// unchanged); without a doorbell directory, one failed `open`. With somebody registered, one
    /// more `fstat` per registration directory (its entries known from its last listing while it
    /// is unchanged), then one `sendto` per endpoint.
    /// Returns whether a ring reached an endpoint's queue (not when every queue was full: those
    /// processes are stopped or behind, and the bus signal wakes them).
    @discardableResult
    func ring(name: String, state: UInt64, busKey: UInt64, sender: String, serial: UInt32, previous: UInt32?) -> Bool {
        HopTrace.mark(.ringEntered)
        guard let rootFD = lookup.openRoot() else { return false }
        var hashes: [UInt64] = []
        hashes.reserveCapacity(4)
        DoorbellHash.directoryHashes(busKey: busKey, name: name, into: &hashes)
        let existing = lookup.registrationDirectories(rootFD)
        HopTrace.mark(.listingDone)
        var datagram: [UInt8]?
        var rung: [String] = []
        var queued = false
        for hash in hashes where existing?.contains(hash) ?? true {
            guard let endpoints = lookup.registrations(of: hash, in: rootFD) else {
                lookup.forgetListing()  // gone since the listing: list again next time
                continue
            }
            for endpoint in endpoints where !rung.contains(endpoint.id) {
                rung.append(endpoint.id)
                if datagram == nil {
                    datagram = DoorbellRing(
                        busKey: busKey, serial: serial, previous: previous, state: state, sender: sender, name: name
                    ).encoded()
                }
                HopTrace.mark(.lookupDone)
                let outcome = datagram!.withUnsafeBytes { ringer.ring($0, to: endpoint.address) }
                HopTrace.mark(.ringSent)
                switch outcome {
                case .delivered:
                    ringsSent.add(1, ordering: .relaxed)
                    queued = true
                case .stale:
                    // Nobody listens at that endpoint: its process is gone (never judged by pid).
                    // (The directory changes, so its next post lists it again.)
                    let directory = "n" + Self.hex(hash)
                    // The endpoint file stays for the sweep, which also finds the process's other
                    // registrations (``sweep()``).
                    try? Syscall.unlinkat(rootFD, directory + "/" + endpoint.id)
                    try? Syscall.unlinkat(rootFD, directory, removingDirectory: true)
                    staleRemoved.add(1, ordering: .relaxed)
                case .full:
                    logger.debug("doorbell endpoint \(endpoint.id) is full: the bus signal wakes it")
                case .failed(let code):
                    logger.debug("cannot ring doorbell endpoint \(endpoint.id): \(Errno(rawValue: code))")
                }
            }
        }
        return queued
    }

    /// Whether a post that rang somebody yields the CPU once, right after its rings and before
    /// its signal is written: the kernel wakes a datagram's receiver on the sender's CPU when it
    /// can (it expects the sender to wait next, as a request-reply peer does), and so does the
    /// signal's write wake the bus daemon; the yield lets the rung process run first. Yes unless
    /// `WORMHOLE_DOORBELL_YIELD=off` (or `0`, `no`, `false`), a diagnostic switch
    /// (docs/performance.md, *The doorbell*).
    static let yieldsAfterRinging = !isOff("WORMHOLE_DOORBELL_YIELD")
}

import Glibc
import Logging
import Synchronization
import WormholeDBus

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
    /// The process's doorbell; nil when it is off (no `$XDG_RUNTIME_DIR`, `WORMHOLE_DOORBELL=off`,
    /// or a runtime directory whose paths would not fit a socket address).
    static let shared: Doorbell? = makeShared()

    /// The ring's datagram (contract §9): magic `WDB2`, then (little-endian) bus hash u64,
    /// serial u32, previous serial u32, flags u8 (bit 0: the previous serial is known), state
    /// u64, sender length u8, name length u16, sender bytes, name bytes.
    static let magic: [UInt8] = Array("WDB2".utf8)
    static let headerLength = 4 + 8 + 4 + 4 + 1 + 8 + 1 + 2

    /// One ring as a listener reads it.
    struct RingMessage: Sendable, Equatable {
        var busKey: UInt64
        var serial: UInt32
        /// The serial of the sender's previous post of `name` on its connection: 0 when it made
        /// none, nil when it does not know.
        var previous: UInt32?
        var state: UInt64
        var sender: String
        var name: String
    }

    /// What a registration is handed when its process is rung for it (on the loop's thread).
    typealias Deliver = @Sendable (RingMessage) -> Void

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
    /// The root opened (a directory descriptor) for the ringing side (-1 until it exists).
    private let rootDescriptor = Atomic<Int32>(-1)
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

    init(root: String, endpointID: String) {
        self.root = root
        self.endpointID = endpointID
    }

    /// Whether the environment variable `name` turns something off (`off`, `0`, `no`, `false`).
    private static func isOff(_ name: String) -> Bool {
        guard let setting = getenv(name).map({ String(cString: $0) }) else { return false }
        return ["off", "0", "no", "false"].contains(setting.lowercased())
    }

    private static func makeShared() -> Doorbell? {
        if isOff("WORMHOLE_DOORBELL") { return nil }
        // A sandboxed participant (an app ID, contract §8) talks to the bus through a proxy:
        // xdg-dbus-proxy closes a client whose serials do not increase, and the doorbell's
        // numbered posts (high serials) followed by libdbus's own calls (low ones) would not.
        // Its bus is the way (as between sandboxed apps anyway); so is one whose app ID is invalid.
        guard case .success(nil) = Result(catching: { try AppIdentity.current() }) else { return nil }
        guard let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") else {
            return nil
        }
        let doorbell = Doorbell(root: runtime + "/wormhole/doorbell", endpointID: hex(UInt64.random(in: 0...UInt64.max)))
        // `e<ID>` must fit `sun_path`.
        guard doorbell.endpointPath(doorbell.endpointID).utf8.count <= DoorbellSocket.maximumPathLength else { return nil }
        return doorbell
    }

    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    func endpointPath(_ id: String) -> String { root + "/e" + id }

    // MARK: Hashes

    /// The bus's hash: FNV-1a-64 of its sharing key.
    static func busKey(of address: BusAddress) -> UInt64 { NotifyContract.fnv1a64(address.sharingKey.utf8) }

    private static let fnvPrime: UInt64 = 0x0000_0100_0000_01b3

    private static func start(_ busKey: UInt64, kind: UInt8) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for shift in stride(from: 0, to: 64, by: 8) {
            hash ^= (busKey >> UInt64(shift)) & 0xFF
            hash = hash &* fnvPrime
        }
        hash ^= UInt64(kind)
        return hash &* fnvPrime
    }

    /// The directory hash of an observed name (`isPrefix` false) or prefix.
    static func directoryHash(busKey: UInt64, target: String, isPrefix: Bool) -> UInt64 {
        var hash = start(busKey, kind: isPrefix ? UInt8(ascii: "p") : UInt8(ascii: "n"))
        for byte in target.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* fnvPrime
        }
        return hash
    }

    /// The directories a post of `name` rings: the name's, then each prefix's (every leading
    /// part that ends in `/`, the whole name included when it ends so), in one pass.
    static func directoryHashes(busKey: UInt64, name: String, into hashes: inout [UInt64]) {
        hashes.append(directoryHash(busKey: busKey, target: name, isPrefix: false))
        var hash = start(busKey, kind: UInt8(ascii: "p"))
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* fnvPrime
            if byte == UInt8(ascii: "/") { hashes.append(hash) }
        }
    }

    // MARK: The datagram

    static func encode(_ ring: RingMessage) -> [UInt8] {
        var bytes = magic
        bytes.reserveCapacity(headerLength + ring.sender.utf8.count + ring.name.utf8.count)
        func put<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }
        put(ring.busKey)
        put(ring.serial)
        put(ring.previous ?? 0)
        put(UInt8(ring.previous == nil ? 0 : 1))
        put(ring.state)
        put(UInt8(ring.sender.utf8.count))
        put(UInt16(ring.name.utf8.count))
        bytes.append(contentsOf: ring.sender.utf8)
        bytes.append(contentsOf: ring.name.utf8)
        return bytes
    }

    /// The ring in `bytes`, or nil for anything else: another magic (another version of the
    /// datagram), another length, a serial without the high bit, unknown flags, an empty name or
    /// invalid UTF-8.
    static func decode(_ bytes: [UInt8]) -> RingMessage? {
        guard bytes.count >= headerLength, bytes[0..<4].elementsEqual(magic) else { return nil }
        func get<T: FixedWidthInteger>(_ offset: Int, as: T.Type) -> T {
            var value: T = 0
            for index in 0..<MemoryLayout<T>.size { value |= T(bytes[offset + index]) << (8 * index) }
            return value
        }
        let flags = bytes[20]
        let senderLength = Int(bytes[29])
        let nameLength = Int(get(30, as: UInt16.self))
        guard bytes.count == headerLength + senderLength + nameLength, nameLength > 0, flags & ~1 == 0 else { return nil }
        let serial = get(12, as: UInt32.self)
        let previous = get(16, as: UInt32.self)
        guard serial & serialMark != 0, previous == 0 || previous & serialMark != 0 else { return nil }
        guard let sender = String(validating: bytes[headerLength..<headerLength + senderLength], as: UTF8.self),
            let name = String(validating: bytes[(headerLength + senderLength)...], as: UTF8.self)
        else { return nil }
        return RingMessage(
            busKey: get(4, as: UInt64.self), serial: serial, previous: flags & 1 == 0 ? nil : previous,
            state: get(21, as: UInt64.self), sender: sender, name: name)
    }

    // MARK: Listening

    /// Registers an observer of `target` (a name, or a prefix ending in `/`) on the bus
    /// `busKey`: this process gets an entry under the target's directory (the first registration
    /// of it makes it, and opens the endpoint). Returns the registration's ID for
    /// ``unregister(_:)``, or nil when the doorbell cannot be used here (said in the log at
    /// debug level; the bus signal wakes the observer as before).
    func register(busKey: UInt64, target: String, isPrefix: Bool, deliver: @escaping Deliver) -> (UInt64, UInt64)? {
        let directory = Self.directoryHash(busKey: busKey, target: target, isPrefix: isPrefix)
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
                        state.exitHook = ExitDrain.addHook { [weak self] _ in self?.leaveAtExit() }
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
            guard state.registrations[registration.directory]?.removeValue(forKey: registration.id) != nil else { return }
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
            if mkdir(directory, 0o700) != 0 && errno != EEXIST {
                throw WormholeError(.io, value: directory, "cannot create \(directory): \(String(cString: strerror(errno)))")
            }
            try Self.checkPrivate(directory)
        }
    }

    /// The directory is the user's, not a symlink, and nobody else's to enter or write.
    private static func checkPrivate(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw WormholeError(.io, value: path, "cannot inspect \(path): \(String(cString: strerror(errno)))")
        }
        try checkPrivate(info, path: path)
    }

    private static func checkPrivate(_ info: stat, path: String) throws {
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
            try DoorbellSocket.endpoint.open(path: path, handler: handler)
        } catch let failure where failure.code == EADDRINUSE {
            // A file left at our random ID: nobody can be bound there but a process with this ID.
            unlink(path)
            try DoorbellSocket.endpoint.open(path: path, handler: handler)
        }
    }

    /// Removes what processes killed without their exit hook left (contract §9, *Leftovers*): every
    /// other endpoint that nobody is bound to, with its registrations in every registration
    /// directory. Run when this process opens its endpoint, so a killed process's files last
    /// until the next Wormhole process of the user observes with the doorbell (on any bus). The
    /// registration directories are listed only when a dead endpoint was found.
    private func sweep() {
        let names = Self.names(at: root)
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
            for id in Self.names(at: directory) where dead.contains(id) {
                removed = unlink(directory + "/" + id) == 0 || removed
            }
            if removed { rmdir(directory) }  // not empty: others observe it
        }
        for id in dead { unlink(endpointPath(id)) }
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
        DoorbellSocket.endpoint.close()
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
            if mkdir(directoryPath, 0o700) != 0 && errno != EEXIST {
                throw WormholeError(.io, value: directoryPath, "cannot create \(directoryPath): \(String(cString: strerror(errno)))")
            }
            let fd = open(entryPath, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                close(fd)
                return
            }
            if errno != ENOENT {
                throw WormholeError(.io, value: entryPath, "cannot create \(entryPath): \(String(cString: strerror(errno)))")
            }
        }
        throw WormholeError(.io, value: directoryPath, "\(directoryPath) kept disappearing")
    }

    private func removeEntry(_ directory: UInt64) {
        let (directoryPath, entryPath) = entryPath(directory)
        unlink(entryPath)
        rmdir(directoryPath)  // ENOTEMPTY: other processes still observe it
    }

    /// On the loop's thread: rings read from the endpoint.
    private func received(_ rings: [DoorbellSocket.Ring]) {
        let uid = Syscall.effectiveUserID()
        var hashes: [UInt64] = []
        for ring in rings {
            guard ring.uid == uid else {
                ringsRefused.add(1, ordering: .relaxed)
                logger.info("refused a doorbell ring from uid \(ring.uid) (pid \(ring.pid)): only this user (\(uid)) may ring")
                continue
            }
            guard let message = Self.decode(ring.bytes) else {
                ringsRefused.add(1, ordering: .relaxed)
                logger.debug("dropped a malformed doorbell ring (\(ring.bytes.count) bytes) from pid \(ring.pid)")
                continue
            }
            ringsReceived.add(1, ordering: .relaxed)
            HopTrace.mark(.ringDecoded)
            hashes.removeAll(keepingCapacity: true)
            Self.directoryHashes(busKey: message.busKey, name: message.name, into: &hashes)
            let targets = state.withLock { state in
                hashes.flatMap { state.registrations[$0].map { Array($0.values) } ?? [] }
            }
            // Each registration checks the name, the prefix and the bus itself (a hash may collide).
            for target in targets { target.deliver(message) }
        }
    }

    /// The serials the doorbell gives posts have the high bit set; libdbus numbers a
    /// connection's messages from 1, so a signal without it was numbered by libdbus.
    static let serialMark: UInt32 = DoorbellSocket.serialMark

    // MARK: Ringing

    /// Gives a post of `name` by the connection `sender` (number `session`) on the bus `busKey` its serial, and runs
    /// `send` with it under the sequence's lock, so that one connection's posts go out in the
    /// order of their serials; once `send` returned (the connection accepted the signal), the
    /// serial is this name's latest. Returns the serial and the previous post's (0: none, nil:
    /// not known). Every post of a process with a doorbell is numbered, rung or not: a receiver
    /// compares a signal's serial with the rings it delivered (``PostOrder``).
    func numbered(
        name: String, busKey: UInt64, sender: String, session: UInt64, send: (UInt32) throws -> Void
    ) throws -> (serial: UInt32, previous: UInt32?) {
        try sequence.withLock { sequence in
            let key = PostSequence.Key(busKey: busKey, sender: sender, session: session, name: name)
            let serial = sequence.nextSerial()
            try send(serial)
            return (serial, sequence.record(key, serial: serial))
        }
    }

    /// Rings every process registered for `name` (or a prefix of it) on the bus `busKey`, for the
    /// post numbered `serial` (``numbered(name:busKey:sender:send:)``), after its signal was
    /// accepted. With nobody registered for the name it costs one `fstat` of the doorbell
    /// directory (whose registration directories are known from its last listing while it is
    /// unchanged); without a doorbell directory, one failed `open`. With somebody registered, one
    /// more `fstat` per registration directory (its entries known from its last listing while it
    /// is unchanged), then one `sendto` per endpoint.
    func ring(name: String, state: UInt64, busKey: UInt64, sender: String, serial: UInt32, previous: UInt32?) {
        HopTrace.mark(.ringEntered)
        guard let rootFD = openRoot() else { return }
        var hashes: [UInt64] = []
        hashes.reserveCapacity(4)
        Self.directoryHashes(busKey: busKey, name: name, into: &hashes)
        let existing = registrationDirectories(rootFD)
        HopTrace.mark(.listingDone)
        var datagram: [UInt8]?
        var rung: [String] = []
        for hash in hashes where existing?.contains(hash) ?? true {
            guard let endpoints = registrations(of: hash, in: rootFD) else {
                listing.withLock { $0 = nil }  // gone since the listing: list again next time
                continue
            }
            for endpoint in endpoints where !rung.contains(endpoint.id) {
                rung.append(endpoint.id)
                if datagram == nil {
                    datagram = Self.encode(
                        RingMessage(
                            busKey: busKey, serial: serial, previous: previous, state: state, sender: sender, name: name))
                }
                HopTrace.mark(.lookupDone)
                let outcome = datagram!.withUnsafeBytes { DoorbellSocket.ring($0, to: endpoint.address) }
                HopTrace.mark(.ringSent)
                switch outcome {
                case .delivered:
                    ringsSent.add(1, ordering: .relaxed)
                case .stale:
                    // Nobody listens at that endpoint: its process is gone (never judged by pid).
                    // (The directory changes, so its next post lists it again.)
                    let directory = "n" + Self.hex(hash)
                    // The endpoint file stays for the sweep, which also finds the process's other
                    // registrations (``sweep()``).
                    unlinkat(rootFD, directory + "/" + endpoint.id, 0)
                    unlinkat(rootFD, directory, AT_REMOVEDIR)
                    staleRemoved.add(1, ordering: .relaxed)
                case .full:
                    logger.debug("doorbell endpoint \(endpoint.id) is full: the bus signal wakes it")
                case .failed(let code):
                    logger.debug("cannot ring doorbell endpoint \(endpoint.id): \(String(cString: strerror(code)))")
                }
            }
        }
        // The kernel wakes a datagram's receiver on the sender's CPU when it can (it expects the
        // sender to wait next, as a request-reply peer does), but this sender goes on with its
        // own work: one yield lets the rung process run first (docs/performance.md, *The
        // doorbell*); with nothing else to run here, it returns at once.
        if datagram != nil && Self.yieldsAfterRinging { sched_yield() }
    }

    /// Whether a post that rang somebody yields the CPU before its signal is built and written:
    /// yes unless `WORMHOLE_DOORBELL_YIELD=off` (or `0`, `no`, `false`), a diagnostic switch.
    static let yieldsAfterRinging = !isOff("WORMHOLE_DOORBELL_YIELD")

    /// An endpoint to ring: its ID and its socket address, made once per listing.
    struct Endpoint {
        var id: String
        var address: DoorbellSocket.Address
    }

    /// A registration directory as last listed: open (its `fstat` says whether it changed; a
    /// removed one has no links left), and the endpoints it named then.
    private struct RegistrationListing {
        var descriptor: Int32
        var snapshot: Snapshot
        var endpoints: [Endpoint]
    }

    /// The registration directories listed, by hash. A directory's entry is made or removed by
    /// `open`/`unlink` in it, which changes its modification time and size.
    private let registrationListings = Locked<[UInt64: RegistrationListing]>([:])

    /// The endpoints registered under `n<hash>`: the last listing while the directory's `fstat`
    /// is unchanged, else listed again (`openat`, `getdents64`), and that listing kept once it is
    /// settled. Nil when the directory is gone.
    private func registrations(of hash: UInt64, in rootFD: Int32) -> [Endpoint]? {
        var info = stat()
        let held = registrationListings.withLock { listings -> [Endpoint]? in
            guard let held = listings[hash] else { return nil }
            if fstat(held.descriptor, &info) == 0, held.snapshot.matches(info) { return held.endpoints }
            close(held.descriptor)
            listings[hash] = nil
            return nil
        }
        if let held { return held }
        let fd = openat(rootFD, "n" + Self.hex(hash), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        // The state before the listing: a change after it makes the snapshot differ.
        guard fstat(fd, &info) == 0 else {
            close(fd)
            return nil
        }
        let snapshot = Snapshot(info)
        // `names(consuming:)` closes what it reads; the descriptor kept is the one opened.
        let reading = dup(fd)
        let endpoints: [Endpoint] =
            reading < 0
            ? []
            : Self.names(consuming: reading).compactMap { id in
                guard id.utf8.count == 16, let address = DoorbellSocket.address(endpointPath(id)) else { return nil }
                return Endpoint(id: id, address: address)
            }
        guard reading >= 0, snapshot.isSettled else {
            close(fd)
            return endpoints
        }
        registrationListings.withLock { listings in
            // Each kept listing holds a descriptor: at most `keptListingLimit` of them, so a process
            // that posts to many observed names keeps its descriptors for its own files.
            if listings[hash] == nil, listings.count >= Self.keptListingLimit, let evicted = listings.first {
                close(evicted.value.descriptor)
                listings[evicted.key] = nil
            }
            if let replaced = listings.updateValue(
                RegistrationListing(descriptor: fd, snapshot: snapshot, endpoints: endpoints), forKey: hash)
            {
                close(replaced.descriptor)
            }
        }
        return endpoints
    }

    /// The most registration listings (open directories) a process keeps: 64. A post to a name
    /// beyond them lists its directory again (about 19 µs instead of 2.5 on the project's VM).
    static let keptListingLimit = 64

    /// How many registration listings are kept now (tests).
    var keptListingCount: Int { registrationListings.withLock { $0.count } }

    /// Closes the listings of registration directories that are no longer in the doorbell
    /// directory.
    private func forgetRegistrationListings(except directories: Set<UInt64>) {
        registrationListings.withLock { listings in
            for (hash, listing) in listings where !directories.contains(hash) {
                close(listing.descriptor)
                listings[hash] = nil
            }
        }
    }

    /// What a directory's `fstat` said: the same inode, link count (one per subdirectory), size,
    /// modification and change time mean the same entries, once the file system's clock has
    /// moved past those times (``isSettled``).
    struct Snapshot {
        var inode: UInt64
        var links: UInt64
        var size: Int64
        var modified: timespec
        var changed: timespec

        init(_ info: stat) {
            inode = UInt64(info.st_ino)
            links = UInt64(info.st_nlink)
            size = Int64(info.st_size)
            modified = info.st_mtim
            changed = info.st_ctim
        }

        func matches(_ info: stat) -> Bool {
            inode == UInt64(info.st_ino) && links == UInt64(info.st_nlink) && size == Int64(info.st_size)
                && modified.tv_sec == info.st_mtim.tv_sec && modified.tv_nsec == info.st_mtim.tv_nsec
                && changed.tv_sec == info.st_ctim.tv_sec && changed.tv_nsec == info.st_ctim.tv_nsec
        }

        /// Whether its times are older than the file system's clock now (`CLOCK_REALTIME_COARSE`,
        /// the clock of file times): a change from now on gets a later time, so an unchanged
        /// `fstat` means unchanged entries. Within the tick of a change (a few milliseconds), two
        /// changes can leave the same times and size (an entry removed and another made), so a
        /// listing taken then is not kept: the next post lists again.
        var isSettled: Bool {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME_COARSE, &now)
            func before(_ time: timespec) -> Bool {
                time.tv_sec < now.tv_sec || (time.tv_sec == now.tv_sec && time.tv_nsec < now.tv_nsec)
            }
            return before(modified) && before(changed)
        }
    }

    /// The doorbell directory's registration directories (their hashes) as last listed, and
    /// its snapshot then.
    private struct Listing {
        var snapshot: Snapshot
        var directories: Set<UInt64>
    }

    private let listing = Locked<Listing?>(nil)
    /// The parent's `fstat` when the doorbell directory was found missing.
    private let rootMissing = Locked<Snapshot?>(nil)
    /// `$XDG_RUNTIME_DIR/wormhole`, opened once it exists and is the user's (-1 before).
    private let parentDescriptor = Atomic<Int32>(-1)

    private func openParent() -> Int32? {
        let held = parentDescriptor.load(ordering: .acquiring)
        if held >= 0 { return held }
        let path = String(root.dropLast("/doorbell".count))
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, (try? Self.checkPrivate(info, path: path)) != nil else {
            close(fd)
            return nil
        }
        let (exchanged, found) = parentDescriptor.compareExchange(
            expected: -1, desired: fd, ordering: .acquiringAndReleasing)
        if exchanged { return fd }
        close(fd)
        return found
    }

    /// The registration directories that exist (by hash), from the listing when the doorbell
    /// directory is unchanged, else listed again; nil when it cannot be said (then every
    /// candidate is opened).
    private func registrationDirectories(_ rootFD: Int32) -> Set<UInt64>? {
        var info = stat()
        guard fstat(rootFD, &info) == 0 else { return nil }
        if let held = listing.withLock({ $0 }), held.snapshot.matches(info) { return held.directories }
        let fd = openat(rootFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var directories = Set<UInt64>()
        for entry in Self.names(consuming: fd) where entry.utf8.count == 17 && entry.hasPrefix("n") {
            if let hash = UInt64(entry.dropFirst(), radix: 16) { directories.insert(hash) }
        }
        let snapshot = Snapshot(info)
        listing.withLock { $0 = snapshot.isSettled ? Listing(snapshot: snapshot, directories: directories) : nil }
        forgetRegistrationListings(except: directories)
        return directories
    }

    /// The names in the directory at `path` (not followed if a link), without `.` and `..`; none
    /// when it cannot be opened.
    private static func names(at path: String) -> [String] {
        guard let fd = try? Syscall.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else { return [] }
        return names(consuming: fd)
    }

    /// The names in the directory open at `fd` (which this call closes), without `.` and `..`;
    /// what a failed read leaves out is listed again after the next change.
    private static func names(consuming fd: Int32) -> [String] {
        let entries = (try? Syscall.readDirectory(consuming: fd)) ?? []
        return entries.map(\.name).filter { $0 != "." && $0 != ".." }
    }

    /// The root for ringing, opened once it exists and checked to be the user's.
    /// Without a doorbell directory, a post costs one `fstat` of its parent
    /// (`$XDG_RUNTIME_DIR/wormhole`, which the shared state table makes), as long as the parent
    /// is unchanged since the doorbell directory was found missing (making it adds a link).
    private func openRoot() -> Int32? {
        let held = rootDescriptor.load(ordering: .acquiring)
        if held >= 0 { return held }
        var parentInfo = stat()
        let parent = openParent()
        if let parent, fstat(parent, &parentInfo) == 0,
            let missing = rootMissing.withLock({ $0 }), missing.matches(parentInfo)
        {
            return nil
        }
        let fd =
            parent.map { openat($0, "doorbell", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            ?? open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if parent != nil {
                let snapshot = Snapshot(parentInfo)
                rootMissing.withLock { $0 = snapshot.isSettled ? snapshot : nil }
            }
            return nil
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (try? Self.checkPrivate(info, path: root)) != nil else {
            close(fd)
            return nil
        }
        let (exchanged, found) = rootDescriptor.compareExchange(expected: -1, desired: fd, ordering: .acquiringAndReleasing)
        if exchanged { return fd }
        close(fd)
        return found
    }
}

/// The serials of a process's posts, and each name's latest per connection (for the
/// `previous` of a ring, ``PostOrder``).
struct PostSequence {
    struct Key: Hashable {
        var busKey: UInt64
        var sender: String
        /// The connection's number (``BusConnection/identity``): a unique name may recur.
        var session: UInt64
        var name: String
    }

    private struct Sender: Hashable {
        var busKey: UInt64
        var sender: String
        var session: UInt64
    }

    /// The most names remembered; past it the table is emptied and the connections it held say
    /// "not known" for the names they posted before (their rings then wait for their signals).
    static let memory = 16_384

    /// The low 31 bits of the last serial given.
    private var last: UInt32 = 0
    private var latest: [Key: UInt32] = [:]
    private var forgetful: Set<Sender> = []

    /// The next serial: the high bit set, the low 31 bits counting up (and wrapping; receivers
    /// compare serials as serial numbers, ``PostOrder/isAfter(_:_:)``).
    mutating func nextSerial() -> UInt32 {
        last = (last &+ 1) & 0x7FFF_FFFF
        return last | DoorbellSocket.serialMark
    }

    /// Records `serial` as the latest post of `key`; returns the one before it.
    mutating func record(_ key: Key, serial: UInt32) -> UInt32? {
        if latest.count >= Self.memory && latest[key] == nil {
            for key in latest.keys { forgetful.insert(Sender(busKey: key.busKey, sender: key.sender, session: key.session)) }
            latest = [:]
        }
        let previous = latest.updateValue(serial, forKey: key)
        if let previous { return previous }
        return forgetful.contains(Sender(busKey: key.busKey, sender: key.sender, session: key.session)) ? nil : 0
    }
}

/// The doorbell as tests, the bench and `doctor` see it.
package enum DoorbellStatus {
    /// The process's counters, or nil when it has no doorbell.
    package struct Counters: Sendable, Equatable {
        /// Endpoints rung (datagrams delivered to a queue).
        package var sent: UInt64
        /// Rings received and handed to observers.
        package var received: UInt64
        /// Rings refused: another user's, or malformed.
        package var refused: UInt64
        /// Stale registrations removed by this process's rings.
        package var staleRemoved: UInt64
    }

    package static var counters: Counters? {
        guard let doorbell = Doorbell.shared else { return nil }
        return Counters(
            sent: doorbell.ringsSent.load(ordering: .relaxed), received: doorbell.ringsReceived.load(ordering: .relaxed),
            refused: doorbell.ringsRefused.load(ordering: .relaxed),
            staleRemoved: doorbell.staleRemoved.load(ordering: .relaxed))
    }

    /// The doorbell directory this process uses (`$XDG_RUNTIME_DIR/wormhole/doorbell`), or nil when
    /// its doorbell is off.
    package static var directory: String? { Doorbell.shared?.root }

    /// The process's endpoint path while it is open.
    package static var endpoint: String? { DoorbellSocket.endpoint.path }

    /// How many registration listings (open directories) the process keeps now.
    package static var keptListings: Int? { Doorbell.shared?.keptListingCount }

    /// The bus's hash as a ring carries it.
    package static func busKey(of address: BusAddress) -> UInt64 { Doorbell.busKey(of: address) }
}

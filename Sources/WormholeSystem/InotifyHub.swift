// SPDX-License-Identifier: Apache-2.0
import Glibc
import SystemPackage

/// The process's one inotify instance, on the process's loop (``ProcessRuntime/loop``): the wormhole
/// directories that listeners watch while no bus can be reached, and the socket directories a
/// reconnection watches for a restarted bus, all share it. The per-user limit on instances
/// (`fs.inotify.max_user_instances`, 128 by default) is so spent once per process, however
/// many directories it watches; each directory takes a watch (`fs.inotify.max_user_watches`).
///
/// The instance is made with the first watch and closed with the last. Handlers run on the
/// loop's thread and must return quickly.
package final class InotifyHub: Sendable {
    /// The loop the instance is read on.
    private let runtime: RuntimeLoop

    /// The process's hub is ``ProcessRuntime/inotify``.
    init(loop: RuntimeLoop) { runtime = loop }

    /// One event, as the kernel reported it.
    package struct Event: Sendable {
        /// The event's bits (`IN_MOVED_TO`, `IN_IGNORED`, `IN_Q_OVERFLOW`, …).
        package var mask: UInt32
        /// The entry's name inside the watched directory; nil for the directory itself.
        package var name: String?

        package func has(_ bits: Int32) -> Bool { mask & UInt32(bits) != 0 }
    }

    /// A watch, active until it is released (its owner drops it): the handler is not called after
    /// that on the loop's thread, nor after the next loop iteration elsewhere.
    package final class Watch: Sendable {
        private let hub: InotifyHub
        private let id: UInt64

        fileprivate init(hub: InotifyHub, id: UInt64) {
            self.hub = hub
            self.id = id
        }

        deinit { hub.remove(id) }
    }

    private struct Subscriber {
        var mask: UInt32
        var handler: @Sendable ([Event]) -> Void
    }

    private struct State {
        var instance: Instance?
        /// The subscribers of each watch descriptor.
        var watches: [Int32: [UInt64: Subscriber]] = [:]
        /// The watch descriptor of each subscriber.
        var descriptors: [UInt64: Int32] = [:]
        var nextID: UInt64 = 1
    }

    private let state = Locked(State())
    /// The event bits (`IN_ALL_EVENTS`, a macro Swift does not import), without the flags.
    private static let allEvents = UInt32(
        IN_ACCESS | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_OPEN | IN_MOVED_FROM | IN_MOVED_TO
            | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)

    /// Whether the process holds an inotify instance now (for tests and `doctor`).
    package var isOpen: Bool { state.withLock { $0.instance != nil } }

    /// Watches `path` for `mask` (`IN_*` bits; `IN_ONLYDIR`, `IN_DONT_FOLLOW` as usual) and calls
    /// `handler` on the loop's thread with each batch of its events: those in `mask`, plus
    /// `IN_IGNORED` (the watch is gone: the path was removed, or its file system unmounted) and
    /// `IN_Q_OVERFLOW` (events were lost). Two watches of one directory share one descriptor.
    package func watch(
        _ path: String, mask: UInt32, handler: @escaping @Sendable ([Event]) -> Void
    ) throws(SystemFailure) -> Watch {
        let id = try state.withLock { state throws(SystemFailure) -> UInt64 in
            let instance: Instance
            if let open = state.instance {
                instance = open
            } else {
                instance = try Instance(hub: self)
                state.instance = instance
            }
            // IN_MASK_ADD: another subscriber of the same directory keeps the events it asked for.
            let wd: Int32
            do throws(Errno) {
                wd = try Syscall.inotifyAddWatch(instance.fd, path, mask | UInt32(IN_MASK_ADD))
            } catch {
                if state.watches.isEmpty { closeInstance(&state) }
                throw SystemFailure(call: "inotify_add_watch", code: error.rawValue)
            }
            let id = state.nextID
            state.nextID += 1
            state.watches[wd, default: [:]][id] = Subscriber(mask: mask, handler: handler)
            state.descriptors[id] = wd
            return id
        }
        return Watch(hub: self, id: id)
    }

    private func remove(_ id: UInt64) {
        state.withLock { state in
            guard let wd = state.descriptors.removeValue(forKey: id) else { return }
            state.watches[wd]?[id] = nil
            if state.watches[wd]?.isEmpty == true {
                state.watches[wd] = nil
                if let instance = state.instance { Syscall.inotifyRemoveWatch(instance.fd, wd) }
            }
            if state.watches.isEmpty { closeInstance(&state) }
        }
    }

    /// The instance has no watch left: it is closed on the loop, unless a watch is added before
    /// that (which then reuses it), so a process never holds two instances, not even while
    /// one closes.
    private func closeInstance(_ state: inout State) {
        guard let instance = state.instance else { return }
        instance.whenIdle { [self] in closeIfIdle(instance) }
    }

    /// On the loop's thread: closes `instance` if it is still the current one and unused.
    private func closeIfIdle(_ instance: Instance) {
        let close = state.withLock { state -> Bool in
            guard state.instance === instance, state.watches.isEmpty else { return false }
            state.instance = nil
            instance.closeDescriptor()
            return true
        }
        if close { instance.close() }
    }

    /// On the loop's thread: the events read from `instance`, handed to their subscribers.
    fileprivate func deliver(_ events: [(wd: Int32, event: Event)], from instance: Instance) {
        var batches: [UInt64: (handler: @Sendable ([Event]) -> Void, events: [Event])] = [:]
        state.withLock { state in
            guard state.instance === instance else { return }
            for (wd, event) in events {
                let overflow = event.has(IN_Q_OVERFLOW)
                let targets = overflow ? state.watches.values.flatMap { $0 } : Array(state.watches[wd] ?? [:])
                for (id, subscriber) in targets
                where overflow || event.has(IN_IGNORED) || event.mask & subscriber.mask & Self.allEvents != 0 {
                    batches[id, default: (subscriber.handler, [])].events.append(event)
                }
                if event.has(IN_IGNORED), let subscribers = state.watches.removeValue(forKey: wd) {
                    // The kernel dropped the watch: its subscribers are told (above) and forgotten.
                    for id in subscribers.keys { state.descriptors[id] = nil }
                }
            }
            if state.watches.isEmpty && state.descriptors.isEmpty { closeInstance(&state) }
        }
        for (_, batch) in batches.sorted(by: { $0.key < $1.key }) { batch.handler(batch.events) }
    }

    /// One inotify descriptor, read on the process's loop.
    fileprivate final class Instance: EventLoopHandler, @unchecked Sendable {
        // @unchecked: `fd` and `loop` are set in init; `closed` is loop-confined.
        let fd: Int32
        private unowned let hub: InotifyHub
        private let loop: EventLoop

        init(hub: InotifyHub) throws(SystemFailure) {
            self.hub = hub
            do throws(Errno) {
                fd = try Syscall.inotifyInit()
            } catch {
                throw SystemFailure(call: "inotify_init1", code: error.rawValue)
            }
            do throws(SystemFailure) {
                loop = try hub.runtime.join()
            } catch {
                Syscall.close(fd)
                throw error
            }
            loop.attach(self)
        }

        /// Loop-confined: whether the descriptor was closed.
        private var closed = false

        /// Leaves the loop; the descriptor is closed there (if it is not already).
        func close() { hub.runtime.detach(self, from: loop) }

        /// Runs `body` on the loop's thread, after the events already read.
        func whenIdle(_ body: @escaping @Sendable () -> Void) { loop.execute(body) }

        /// On the loop's thread: stops reading and closes the descriptor.
        func closeDescriptor() {
            loop.assertInEventLoop()
            guard !closed else { return }
            closed = true
            loop.setInterest(fd: fd, Interest(), for: self)
            Syscall.close(fd)
        }

        func loopStarted() {
            if !closed { loop.setInterest(fd: fd, Interest(readable: true), for: self) }
        }

        func loopStopped() { closeDescriptor() }

        func ready(fd: Int32, _ readiness: Readiness) {
            guard !closed else { return }
            // Room for at least 64 events with the longest names (16 + 256 bytes each).
            let capacity = 64 * 272
            var events: [(wd: Int32, event: Event)] = []
            withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 8) { buffer in
                guard let base = buffer.baseAddress else { return }
                while true {
                    guard let count = try? Syscall.read(fd, into: buffer), count > 0 else { break }
                    var offset = 0
                    while offset + 16 <= count {
                        let wd = base.load(fromByteOffset: offset, as: Int32.self)
                        let mask = base.load(fromByteOffset: offset + 4, as: UInt32.self)
                        let length = Int(base.load(fromByteOffset: offset + 12, as: UInt32.self))
                        var name: String?
                        if length > 0 {
                            name = String(cString: base.advanced(by: offset + 16).assumingMemoryBound(to: CChar.self))
                        }
                        events.append((wd, Event(mask: mask, name: name)))
                        offset += 16 + length
                    }
                    // Less than a full buffer: the queue was drained (no further read just to see EAGAIN).
                    if count < capacity - 272 { break }
                }
            }
            if !events.isEmpty { hub.deliver(events, from: self) }
        }
    }
}

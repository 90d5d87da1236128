// SPDX-License-Identifier: Apache-2.0
import Glibc
import SystemPackage

/// The doorbell's sockets (docs/contract.md section 9): a process's one endpoint, an unbound-
/// to-peers `AF_UNIX` datagram socket bound to a path, read on the process's loop
/// (``ProcessRuntime/loop``) like the inotify instance; and the one unbound socket the process rings
/// others' endpoints from. What a ring means is the `Wormhole` module's: this file moves bytes
/// and the kernel's word on who sent them.
package enum DoorbellSocket {
    /// One datagram as received, with the credentials the kernel attached (`SCM_CREDENTIALS`).
    package struct Ring: Sendable {
        /// The datagram's bytes.
        package var bytes: [UInt8]
        /// The sender's user ID, as the kernel vouches for it; `UInt32.max` when none came.
        package var uid: UInt32
        /// The sender's process ID (in this process's PID namespace; 0 when unknown).
        package var pid: Int32
    }

    /// What ringing one endpoint came to.
    package enum Outcome: Sendable, Equatable {
        /// The datagram is in the endpoint's queue.
        case delivered
        /// Nobody listens there (`ECONNREFUSED`: the file is left by a process that is gone;
        /// `ENOENT`: no file): the registration is stale.
        case stale(refused: Bool)
        /// The endpoint's queue is full (`EAGAIN`): its process is not reading now; the bus
        /// signal wakes it.
        case full
        /// Any other error (its `errno`).
        case failed(Int32)
    }

    /// The high bit of a signal's serial: set on the signal of a post that rang somebody (its
    /// sender chose the serial; libdbus numbers a connection's messages from 1). A signal without
    /// it was not rung, and its receiver need not look for a ring.
    package static let serialMark: UInt32 = 0x8000_0000

    /// The longest path a socket address holds (`sun_path` is 108 bytes with its NUL).
    package static let maximumPathLength = 107

    /// The largest datagram read; a longer one is dropped as malformed.
    package static let maximumDatagram = 2_048

    /// A socket to ring from, or why none could be made.
    private static func makeRingingSocket() -> Result<Int32, Errno> {
        Result { () throws(Errno) in try Syscall.unixDatagramSocket() }
    }

    /// The process's socket that rings others' endpoints (a field of `Wormhole`'s runtime).
    package final class Ringer: Sendable {
        /// The socket (made on first use; -1 before), held while a ring is sent so that it is
        /// never replaced under a sender.
        private let socket = Locked<Int32>(-1)

        package init() {}

        deinit { socket.withLock { if $0 >= 0 { Syscall.close($0) } } }

        /// Sends `bytes` to the endpoint bound at `address` (``address(_:)``), never waiting.
        ///
        /// A datagram waiting in an endpoint's queue is charged to the socket that sent it until it
        /// is read, so a stopped process's queue can fill the ringing socket's send buffer, and then
        /// every ring from it fails with `EAGAIN`, whoever it is for. On `EAGAIN` the process moves to
        /// a fresh ringing socket and tries once more: `EAGAIN` again means this endpoint's own queue
        /// is full (``Outcome/full``). The old socket is closed; the kernel keeps what it sent queued.
        /// The corresponding C function is `sendto` (with `MSG_DONTWAIT`).
        package func ring(_ bytes: UnsafeRawBufferPointer, to address: Address) -> Outcome {
            let address = address.value
            return socket.withLock { fd -> Outcome in
                if fd < 0 {
                    switch DoorbellSocket.makeRingingSocket() {
                    case .success(let made): fd = made
                    case .failure(let error): return .failed(error.rawValue)
                    }
                }
                let first = DoorbellSocket.send(bytes, to: address, from: fd)
                guard first == .full, case .success(let fresh) = DoorbellSocket.makeRingingSocket() else {
                    return first
                }
                Syscall.close(fd)
                fd = fresh
                return DoorbellSocket.send(bytes, to: address, from: fd)
            }
        }
    }

    private static func send(_ bytes: UnsafeRawBufferPointer, to address: sockaddr_un, from fd: Int32) -> Outcome {
        do throws(Errno) {
            try Syscall.sendDatagram(fd, bytes, to: address)
            return .delivered
        } catch .connectionRefused {
            return .stale(refused: true)
        } catch .noSuchFileOrDirectory {
            return .stale(refused: false)
        } catch .resourceTemporarilyUnavailable {
            return .full
        } catch {
            return .failed(error.rawValue)
        }
    }

    /// Whether a process is bound at the endpoint `address`: connecting a datagram socket to it
    /// sends nothing and succeeds only when somebody is bound there. `false`: nobody (the file is
    /// left by a process that is gone, `ECONNREFUSED`) or no file (`ENOENT`); nil when it cannot
    /// be said (any other error: then the endpoint is left alone).
    /// The corresponding C function is `connect`.
    package static func isBound(_ address: Address) -> Bool? {
        guard case .success(let fd) = makeRingingSocket() else { return nil }
        defer { Syscall.close(fd) }
        do throws(Errno) {
            try Syscall.connect(fd, to: address.value)
            return true
        } catch .connectionRefused, .noSuchFileOrDirectory {
            return false
        } catch {
            return nil
        }
    }

    /// An endpoint's socket address, made once and rung many times.
    package struct Address: Sendable {
        fileprivate var value: sockaddr_un
    }

    /// The socket address of `path`; nil when it does not fit `sun_path`.
    package static func address(_ path: String) -> Address? { socketAddress(path).map(Address.init) }

    private static func socketAddress(_ path: String) -> sockaddr_un? {
        let bytes = Array(path.utf8)
        guard bytes.count <= maximumPathLength else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        return address
    }

    /// The process's one endpoint (a field of `Wormhole`'s runtime), opened by
    /// ``open(path:handler:)`` and closed by ``close()``: a datagram socket bound at a path, with
    /// `SO_PASSCRED`, read on the process's loop. Its handler gets every datagram with its
    /// sender's credentials.
    package final class Endpoint: Sendable {
        private let state = Locked<Reader?>(nil)
        private let runtime: RuntimeLoop

        package init(loop: RuntimeLoop = ProcessRuntime.shared.loop) { runtime = loop }

        /// Whether it is open, and where.
        package var path: String? { state.withLock { $0?.path } }

        /// Binds a socket at `path` (which must not exist; a stale file is the caller's to
        /// remove) and reads it on the loop, calling `handler` there with each batch of rings.
        /// Does nothing when it is open already.
        package func open(path: String, handler: @escaping @Sendable ([Ring]) -> Void) throws(SystemFailure) {
            try state.withLock { reader throws(SystemFailure) in
                if reader != nil { return }
                reader = try Reader(path: path, runtime: runtime, handler: handler)
            }
        }

        /// Stops reading, closes the socket and removes its file.
        package func close() {
            guard
                let reader = state.withLock({ value in
                    defer { value = nil }
                    return value
                })
            else { return }
            try? Syscall.unlink(reader.path)
            reader.close()
        }
    }

    /// The bound socket on the loop.
    private final class Reader: EventLoopHandler, @unchecked Sendable {
        // @unchecked: `fd`, `path`, `loop` and `handler` are set in init; `closed` is loop-confined.
        let fd: Int32
        let path: String
        private let runtime: RuntimeLoop
        private let loop: EventLoop
        private let handler: @Sendable ([Ring]) -> Void
        private var closed = false

        init(path: String, runtime: RuntimeLoop, handler: @escaping @Sendable ([Ring]) -> Void) throws(SystemFailure) {
            self.path = path
            self.runtime = runtime
            self.handler = handler
            guard let address = DoorbellSocket.socketAddress(path) else {
                throw SystemFailure(call: "bind", code: ENAMETOOLONG, path: path, detail: "the path is over 107 bytes")
            }
            let fd: Int32
            do throws(Errno) {
                fd = try Syscall.unixDatagramSocket(nonBlocking: true)
            } catch {
                throw SystemFailure(call: "socket", code: error.rawValue, path: path)
            }
            do throws(Errno) {
                try Syscall.passCredentials(fd)
            } catch {
                Syscall.close(fd)
                throw SystemFailure(call: "setsockopt(SO_PASSCRED)", code: error.rawValue, path: path)
            }
            do throws(Errno) {
                try Syscall.bind(fd, to: address)
            } catch {
                Syscall.close(fd)
                throw SystemFailure(call: "bind", code: error.rawValue, path: path)
            }
            // Mode 0600 (bind made it with the umask's mode; changing the process's umask would
            // race other threads). Its directory is 0700 meanwhile, and the credentials check
            // stays the rule.
            try? Syscall.chmod(path, 0o600)
            self.fd = fd
            do throws(SystemFailure) {
                loop = try runtime.join()
            } catch {
                Syscall.close(fd)
                try? Syscall.unlink(path)
                throw error
            }
            loop.attach(self)
        }

        func close() { runtime.detach(self, from: loop) }

        func loopStarted() {
            if !closed { loop.setInterest(fd: fd, Interest(readable: true), for: self) }
        }

        func loopStopped() {
            guard !closed else { return }
            closed = true
            loop.setInterest(fd: fd, Interest(), for: self)
            Syscall.close(fd)
        }

        func ready(fd: Int32, _ readiness: Readiness) { readAll() }

        /// Loop thread: every queued datagram, handed over at once. Up to
        /// `Syscall.receiveManyMost` come in one system call; a call that returns fewer left the
        /// queue empty, so a lone ring costs one call, not a second one that finds nothing.
        func readAll() {
            guard !closed else { return }
            var rings: [Ring] = []
            let slots = Syscall.receiveManyMost
            withUnsafeTemporaryAllocation(byteCount: DoorbellSocket.maximumDatagram * slots, alignment: 8) { buffer in
                // Until the queue is drained (a short batch, `EAGAIN`, or any error).
                while true {
                    let received =
                        (try? Syscall.receiveManyWithCredentials(fd, into: buffer, slots: slots) {
                            bytes, uid, pid, truncated in
                            // Longer than any ring: not one.
                            if !truncated { rings.append(Ring(bytes: Array(bytes), uid: uid, pid: pid)) }
                        }) ?? 0
                    if received < slots { break }
                }
            }
            HopTrace.mark(.ringRead)
            if !rings.isEmpty { handler(rings) }
        }
    }
}

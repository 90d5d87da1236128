// SPDX-License-Identifier: Apache-2.0
internal import CWormholeSystem  // the doorbell's recvmmsg and its ancillary data
internal import Glibc
internal import SystemPackage

/// The doorbell's datagram socket (DoorbellSocket.swift): making it, binding, sending a ring,
/// receiving them with their senders' credentials.
extension Syscall {
    /// The corresponding C function is `socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC)`, with
    /// `SOCK_NONBLOCK` when `nonBlocking`.
    static func unixDatagramSocket(nonBlocking: Bool = false) throws(Errno) -> Int32 {
        let type = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let descriptor = Glibc.socket(AF_UNIX, nonBlocking ? type | Int32(SOCK_NONBLOCK.rawValue) : type, 0)
        try checked(descriptor)
        return descriptor
    }

    /// The corresponding C function is `setsockopt(SOL_SOCKET, SO_PASSCRED, 1)`: the kernel
    /// attaches each sender's credentials to what the socket receives.
    static func passCredentials(_ socket: Int32) throws(Errno) {
        var one: Int32 = 1
        try checked(setsockopt(socket, SOL_SOCKET, SO_PASSCRED, &one, socklen_t(MemoryLayout<Int32>.size)))
    }

    /// Runs `body` with `address` as the `sockaddr` the socket calls take.
    private static func withSocketAddress<Result>(
        _ address: sockaddr_un, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result
    ) -> Result {
        var address = address
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body($0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    /// The corresponding C function is `bind`.
    static func bind(_ socket: Int32, to address: sockaddr_un) throws(Errno) {
        try checked(withSocketAddress(address) { Glibc.bind(socket, $0, $1) })
    }

    /// The corresponding C function is `connect`.
    static func connect(_ socket: Int32, to address: sockaddr_un) throws(Errno) {
        _ = try retrying { withSocketAddress(address) { Glibc.connect(socket, $0, $1) } }
    }

    /// The corresponding C function is `sendto` with `MSG_DONTWAIT | MSG_NOSIGNAL`: sends
    /// `bytes` as one datagram to `address`, never waiting.
    static func sendDatagram(_ socket: Int32, _ bytes: UnsafeRawBufferPointer, to address: sockaddr_un) throws(Errno) {
        _ = try retrying {
            withSocketAddress(address) {
                Glibc.sendto(
                    socket, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL), $0, $1)
            }
        }
    }

    /// The most datagrams ``receiveManyWithCredentials(_:into:slots:each:)`` takes in one call.
    package static let receiveManyMost = Int(CWORMHOLE_RECEIVE_MANY_MOST)

    /// The corresponding C function is `recvmmsg` (with `MSG_DONTWAIT`, through the C shim that
    /// reads each datagram's ancillary data): up to `slots` queued datagrams in one call, each in
    /// its slot of `buffer` (`buffer.count / slots` bytes), handed to `each` in order with its
    /// sender's credentials (`truncated`: it was longer than its slot). Returns how many came: 0
    /// when none was queued (`EAGAIN`); fewer than `slots` when the queue was empty after them.
    static func receiveManyWithCredentials(
        _ socket: Int32, into buffer: UnsafeMutableRawBufferPointer, slots: Int,
        each: (_ bytes: UnsafeRawBufferPointer, _ uid: UInt32, _ pid: Int32, _ truncated: Bool) -> Void
    ) throws(Errno) -> Int {
        let slots = min(max(slots, 1), receiveManyMost)
        let slotLength = buffer.count / slots
        return try withUnsafeTemporaryAllocation(of: cwormhole_datagram.self, capacity: slots) {
            datagrams throws(Errno) -> Int in
            while true {
                let count = cwormhole_receive_many_with_credentials(
                    socket, buffer.baseAddress, slotLength, Int32(slots), datagrams.baseAddress)
                if count < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    if code == EAGAIN { return 0 }
                    throw Errno(rawValue: code)
                }
                for index in 0..<Int(count) {
                    let datagram = datagrams[index]
                    let start = index * slotLength
                    let length = min(Int(datagram.count), slotLength)
                    each(
                        UnsafeRawBufferPointer(rebasing: buffer[start..<(start + length)]), datagram.uid,
                        datagram.pid, datagram.truncated != 0)
                }
                return Int(count)
            }
        }
    }
}

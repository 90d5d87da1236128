// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Testing
import WormholeSystem

/// The doorbell's endpoint as any sender on the machine can reach it: a real socket, datagrams
/// sent with sendto(2)/sendmsg(2) from this process, read by the process's loop.
@Suite("Doorbell endpoint: bursts, oversized datagrams and passed descriptors")
struct DoorbellSocketTests {
    /// Sends `bytes` to `path` from `fd`, with `rights` (a descriptor to pass) when given.
    private static func send(_ bytes: [UInt8], to path: String, from fd: Int32, passing rights: Int32? = nil) throws {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
        }
        // A control message holding one descriptor: `struct cmsghdr` (length, level, type) then the
        // descriptor, padded to 8 bytes: what CMSG_SPACE(sizeof(int)) makes on 64-bit Linux.
        var control = [UInt8](repeating: 0, count: 24)
        if let rights {
            control.withUnsafeMutableBytes { raw in
                raw.storeBytes(of: UInt64(20), toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: Int32(SOL_SOCKET), toByteOffset: 8, as: Int32.self)
                raw.storeBytes(of: Int32(SCM_RIGHTS), toByteOffset: 12, as: Int32.self)
                raw.storeBytes(of: rights, toByteOffset: 16, as: Int32.self)
            }
        }
        var payload = bytes
        let sent = payload.withUnsafeMutableBytes { payloadBytes in
            control.withUnsafeMutableBytes { controlBytes in
                withUnsafeMutablePointer(to: &address) { addressPointer in
                    var vector = iovec(iov_base: payloadBytes.baseAddress, iov_len: payloadBytes.count)
                    return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                        var message = msghdr()
                        message.msg_name = UnsafeMutableRawPointer(addressPointer)
                        message.msg_namelen = socklen_t(MemoryLayout<sockaddr_un>.size)
                        message.msg_iov = vectorPointer
                        message.msg_iovlen = 1
                        if rights != nil {
                            message.msg_control = controlBytes.baseAddress
                            message.msg_controllen = controlBytes.count
                        }
                        return sendmsg(fd, &message, 0)
                    }
                }
            }
        }
        if sent < 0 { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    @Test("a burst longer than one read, an oversized datagram and one carrying a descriptor")
    func hostileAndBurst() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("doorbell-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("endpoint").path
        let received = BoundedWait<[DoorbellSocket.Ring]>([])
        let endpoint = DoorbellSocket.Endpoint()
        try endpoint.open(path: path) { rings in received.change { $0 += rings } }
        defer { endpoint.close() }

        let sender = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard sender >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(sender) }
        // More than one recvmmsg(2) takes (8), sent at once so that they queue together.
        let burst = (0..<(Syscall.receiveManyMost * 3 + 1)).map { Array("ring-\($0)".utf8) }
        for bytes in burst { try Self.send(bytes, to: path, from: sender) }
        // Longer than any ring: dropped, and what follows still arrives.
        try Self.send([UInt8](repeating: 0x41, count: DoorbellSocket.maximumDatagram + 1000), to: path, from: sender)
        try Self.send(Array("after-oversized".utf8), to: path, from: sender)
        // A descriptor passed along: the endpoint must close it, never keep it.
        var pipeEnds: [Int32] = [0, 0]
        try #require(pipe(&pipeEnds) == 0)
        defer { close(pipeEnds[0]) }
        try Self.send(Array("with-descriptor".utf8), to: path, from: sender, passing: pipeEnds[1])
        close(pipeEnds[1])
        try Self.send(Array("after-descriptor".utf8), to: path, from: sender)

        let expected =
            burst + [Array("after-oversized".utf8), Array("with-descriptor".utf8), Array("after-descriptor".utf8)]
        let rings = received.wait(until: .now() + .seconds(20)) { rings in
            rings.count >= expected.count ? rings : nil
        }
        let got = try #require(rings, "only \(received.read { $0.count }) of \(expected.count) datagrams arrived")
        #expect(got.map(\.bytes) == expected, "every ring once, in the order sent; the oversized one dropped")
        #expect(got.allSatisfy { $0.uid == getuid() && $0.pid == getpid() }, "the kernel's credentials")
        // Every copy of the pipe's write end is closed: its read end sees the end of the file.
        var readable = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
        try #require(poll(&readable, 1, 20_000) == 1, "the endpoint kept the passed descriptor open")
        var byte: UInt8 = 0
        #expect(read(pipeEnds[0], &byte, 1) == 0, "the passed descriptor was closed by the endpoint")
    }
}

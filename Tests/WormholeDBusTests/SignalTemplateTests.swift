// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Testing
import WormholeSystem

@testable import WormholeDBus

@Suite("Signal templates: a prebuilt signal with a UInt64 appended per emission")
struct SignalTemplateTests {
    static let base = Signal(
        path: ObjectPath(unchecked: "/org/example/Templates"),
        interface: InterfaceName(unchecked: "org.example.T.B1A2B"),
        member: MemberName(unchecked: "Posted"), arguments: [.string("com.example.a b/c \"ü\"")])

    @Test("the message is byte for byte the one built whole, serial included")
    func sameWireBytes() throws {
        let template = try SignalTemplate(Self.base)
        for (value, serial) in [(UInt64(0), UInt32(1)), (42, 7), (.max, 0x8000_0001), (1 << 40, 0xFFFF_FFFF)] {
            var whole = Self.base
            whole.arguments.append(.uint64(value))
            whole.serial = serial
            let expected = try #require(try MessageCoding.makeSignal(whole).wireBytes)
            let made = try #require(try template.make(appending: value, serial: serial).wireBytes)
            #expect(made == expected, "value \(value), serial \(serial)")
        }
    }

    @Test("without a serial, libdbus numbers it: the template itself never changes")
    func templateUnchanged() throws {
        let template = try SignalTemplate(Self.base)
        let first = try #require(try template.make(appending: 1, serial: nil).wireBytes)
        _ = try template.make(appending: 2, serial: 9)
        let again = try #require(try template.make(appending: 1, serial: nil).wireBytes)
        #expect(first == again)
        #expect(template.estimatedSize >= Self.base.estimatedSize + 8)
    }

    @Test("a template refuses the arguments a whole build refuses, naming the bad value")
    func refusesWhatBuildRefuses() {
        var bad = Self.base
        bad.arguments = [.string("nul \u{0} inside")]
        #expect(throws: BusError.self) { try MessageCoding.makeSignal(bad) }
        let error = #expect(throws: BusError.self) { try SignalTemplate(bad) }
        #expect(error?.code == .invalidString)
    }

    @Test("many threads emit from one template at once; every message is whole")
    func concurrentMakes() throws {
        let template = try SignalTemplate(Self.base)
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<500 {
                let value = UInt64(thread * 1_000 + index)
                var whole = Self.base
                whole.arguments.append(.uint64(value))
                whole.serial = 5
                let made = try? template.make(appending: value, serial: 5).wireBytes
                if made == nil || made != (try? MessageCoding.makeSignal(whole).wireBytes) {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        #expect(failures.withLock { $0 } == 0)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import WormholeDBus

/// Commands that exercise the D-Bus layer:
///
/// - `emit ADDRESS PATH INTERFACE MEMBER [ARG...]` emits one signal and flushes; each ARG
///   is `s:TEXT`, `t:UINT64`, `i:INT32` or `y:BYTE`.
/// - `listen ADDRESS INTERFACE COUNT [ARG0]` subscribes to signals on INTERFACE (with
///   `arg0=ARG0` if given), writes `ready` to standard error once the rule is active,
///   then prints each signal's arguments as one line and exits after COUNT signals.
let dbusCommands: [String: @Sendable ([String]) throws -> Void] = [
    "emit": { arguments in
        guard arguments.count >= 4 else { throw PeerError("emit ADDRESS PATH INTERFACE MEMBER [ARG...]") }
        let connection = try BusConnection(address: BusAddress(arguments[0]))
        let values = try arguments.dropFirst(4).map(parseValue)
        try connection.emit(
            Signal(
                path: ObjectPath(arguments[1]), interface: InterfaceName(arguments[2]),
                member: MemberName(arguments[3]), arguments: Array(values)))
        connection.flush()
    },
    "listen": { arguments in
        guard arguments.count >= 3, let count = Int(arguments[2]) else {
            throw PeerError("listen ADDRESS INTERFACE COUNT [ARG0]")
        }
        let connection = try BusConnection(address: BusAddress(arguments[0]))
        var rule = MatchRule(interface: try InterfaceName(arguments[1]))
        if arguments.count > 3 { rule.arguments[0] = arguments[3] }
        let done = DispatchSemaphore(value: 0)
        let seen = SeenCounter()
        let subscription = try connection.subscribe(rule, on: .serial) { signal in
            FileHandle.standardOutput.write(Data((signal.arguments.map(render).joined(separator: " ") + "\n").utf8))
            if seen.increment() == count { done.signal() }
        }
        printError("ready")
        done.wait()
        subscription.cancel()
    },
]

/// Counts deliveries; only touched on the handler's serial queue.
final class SeenCounter: @unchecked Sendable {
    private var value = 0
    func increment() -> Int {
        value += 1
        return value
    }
}

struct PeerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = "usage: " + description }
}

func parseValue(_ text: String) throws -> DBusValue {
    let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
    guard parts.count == 2 else { throw PeerError("ARG is TYPE:VALUE, got \(text)") }
    switch parts[0] {
    case "s": return .string(parts[1])
    case "t": if let value = UInt64(parts[1]) { return .uint64(value) }
    case "i": if let value = Int32(parts[1]) { return .int32(value) }
    case "y": if let value = UInt8(parts[1]) { return .byte(value) }
    default: break
    }
    throw PeerError("cannot parse argument \(text)")
}

func render(_ value: DBusValue) -> String {
    switch value {
    case .string(let text): "s:\(text)"
    case .uint64(let number): "t:\(number)"
    case .int32(let number): "i:\(number)"
    case .byte(let number): "y:\(number)"
    default: "\(value.signature):?"
    }
}

// libFuzzer target: match-rule escaping (MatchRule.description) on arbitrary argument values.
// Built with the WormholeDBus value files by Tests/fuzz.sh.
// Invariant: reading the rule back by the bus daemon's quoting rules (inside '…' everything is
// literal; outside, \' is a quote) gives exactly the value; the rule is valid or refused with a
// BusError naming it, never a crash.

/// The value of `key=` in `rule`, unquoted as dbus-daemon does (bus/signals.c), byte by byte
/// (by Characters, a quote after a prepended mark such as U+0602 would hide in one cluster).
private func value(of key: String, in rule: String) -> String? {
    let quote = UInt8(ascii: "'")
    var fields: [(name: [UInt8], value: [UInt8])] = []
    var name: [UInt8] = []
    var value: [UInt8] = []
    var inName = true
    var quoted = false
    var bytes = Array(rule.utf8)[...]
    while let byte = bytes.popFirst() {
        if inName {
            if byte == UInt8(ascii: "=") { inName = false } else { name.append(byte) }
        } else if quoted {
            if byte == quote { quoted = false } else { value.append(byte) }
        } else if byte == quote {
            quoted = true
        } else if byte == UInt8(ascii: "\\") && bytes.first == quote {
            value.append(bytes.removeFirst())
        } else if byte == UInt8(ascii: ",") {
            fields.append((name, value))
            (name, value, inName) = ([], [], true)
        } else {
            value.append(byte)
        }
    }
    fields.append((name, value))
    return fields.first { $0.name == Array(key.utf8) }.map { String(decoding: $0.value, as: UTF8.self) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMatchRule(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let string = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let rule = MatchRule(member: try! MemberName("Posted"), arguments: [0: string], argumentPaths: [1: string])
    let text = rule.description
    guard value(of: "arg0", in: text) == string, value(of: "arg1path", in: text) == string else {
        fatalError("rule \(text) does not read back as \(Array(string.utf8))")
    }
    do {
        try rule.validate()
    } catch {
        // A rule too long names the rule; a value libdbus cannot carry (NUL, bad UTF-8) names the value.
        if error.value != text && error.value != string { fatalError("refusal names neither rule nor value: \(error)") }
    }
    return 0
}

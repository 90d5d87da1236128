// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: match-rule escaping (MatchRule.description) on arbitrary argument values.
// Built with the WormholeDBus value files by Tests/fuzz.sh.
// Invariant: reading the rule back by the bus daemon's quoting rules (inside '…' everything is
// literal; outside, \' is a quote) gives exactly its fields: type 'signal', member 'Posted', and
// arg0 and arg1path each exactly the value, once; the rule is valid or refused with a BusError
// naming it or the value, never a crash.

/// Whether `rule`, split into `name=value` fields and unquoted as dbus-daemon does
/// (bus/signals.c), byte by byte (by Characters, a quote after a prepended mark such as U+0602
/// would hide in one cluster), holds exactly the fields `expected`, each once, in any order.
/// One pass, no allocation: each field's unquoted value is compared as it is read.
private func readsBack(
    _ rule: UnsafeBufferPointer<UInt8>, _ expected: [(name: StaticString, value: UnsafeBufferPointer<UInt8>)]
) -> Bool {
    let quote = UInt8(ascii: "'")
    var seen = [Bool](repeating: false, count: expected.count)
    var index = 0
    while true {
        // The name, up to '='.
        let nameStart = index
        while index < rule.count && rule[index] != UInt8(ascii: "=") { index += 1 }
        guard index < rule.count else { return false }
        let name = UnsafeBufferPointer(rebasing: rule[nameStart..<index])
        guard
            let field = expected.firstIndex(where: { field in
                field.name.withUTF8Buffer { $0.elementsEqual(name) }
            }), !seen[field]
        else { return false }
        seen[field] = true
        let value = expected[field].value
        index += 1
        // The value, up to an unquoted ',' or the end, compared as it is unquoted.
        var matched = 0
        var same = true
        var quoted = false
        var comma = false
        func take(_ byte: UInt8) {
            if same && matched < value.count && value[matched] == byte { matched += 1 } else { same = false }
        }
        while index < rule.count {
            let byte = rule[index]
            index += 1
            if quoted {
                if byte == quote { quoted = false } else { take(byte) }
            } else if byte == quote {
                quoted = true
            } else if byte == UInt8(ascii: "\\") && index < rule.count && rule[index] == quote {
                take(quote)
                index += 1
            } else if byte == UInt8(ascii: ",") {
                comma = true
                break
            } else {
                take(byte)
            }
        }
        // An unbalanced quote is refused by the daemon.
        guard same && matched == value.count && !quoted else { return false }
        if !comma { break }
    }
    return !seen.contains(false)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMatchRule(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    var string = String(decoding: input, as: UTF8.self)
    let rule = MatchRule(member: try! MemberName("Posted"), arguments: [0: string], argumentPaths: [1: string])
    var text = rule.description
    let signal: StaticString = "signal"
    let posted: StaticString = "Posted"
    let ok = text.withUTF8 { bytes in
        string.withUTF8 { value in
            signal.withUTF8Buffer { signal in
                posted.withUTF8Buffer { posted in
                    readsBack(bytes, [("type", signal), ("member", posted), ("arg0", value), ("arg1path", value)])
                }
            }
        }
    }
    guard ok else { fatalError("rule \(text) does not read back as \(Array(string.utf8))") }
    do {
        try rule.validate()
    } catch {
        // A rule too long names the rule; a value libdbus cannot carry (NUL, bad UTF-8) names the value.
        if error.value != text && error.value != string { fatalError("refusal names neither rule nor value: \(error)") }
    }
    return 0
}

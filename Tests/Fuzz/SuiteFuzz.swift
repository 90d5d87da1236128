// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the shared-defaults suite parser (SuiteJSON.decodeSuite, contract §5 v1.2),
// which every reader and writer runs over a file any process may have written. Built with the
// whole Wormhole module by Tests/fuzz.sh (target `suite`).
//
// Invariants, for every input:
// - nothing crashes (deep nesting is an error, not a stack overflow);
// - an input that parses writes back (encodeSuite) to a file that parses to the same contents:
//   the same values, and every unknown value (an unknown `$` tag, a tag whose content this
//   version does not read, null, an integer past 64 bits) byte for byte; writing that file
//   again gives the same bytes (a writer changing nothing else changes nothing);
// - every unknown value is itself JSON (JSONSyntax.check accepts it);
// - an input that does not parse is refused with a byte offset inside it (or at its end);
// - an input starting with a byte-order mark never parses.

import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSuite(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Data(bytes: data, count: size)
    let contents: SuiteJSON.Contents
    do throws(SuiteJSON.ParseError) {
        contents = try SuiteJSON.decodeSuite(input)
    } catch {
        guard error.offset >= 0, error.offset <= size, !error.reason.description.isEmpty else {
            fatalError("refused with offset \(error.offset) of \(size): \(error.reason)")
        }
        return 0
    }
    if input.starts(with: [0xEF, 0xBB, 0xBF]) { fatalError("a byte-order mark was accepted") }
    for (key, raw) in contents.unknown {
        if contents.values[key] != nil { fatalError("key \(key) both known and unknown") }
        if let failure = raw.withUnsafeBytes({ JSONSyntax.check($0) }) {
            fatalError("unknown value of \(key) is not JSON (\(failure)): \(String(decoding: raw, as: UTF8.self))")
        }
    }
    let written = SuiteJSON.encodeSuite(contents)
    let again: SuiteJSON.Contents
    do throws(SuiteJSON.ParseError) {
        again = try SuiteJSON.decodeSuite(written)
    } catch {
        fatalError("the suite written back does not parse: \(error) in \(String(decoding: written, as: UTF8.self))")
    }
    if again.unknown != contents.unknown { fatalError("unknown values changed when written back") }
    if again.values.keys.sorted() != contents.values.keys.sorted() { fatalError("keys changed when written back") }
    for (key, value) in contents.values where !same(value, again.values[key]) {
        fatalError("value of \(key) changed: \(value) became \(String(describing: again.values[key]))")
    }
    if SuiteJSON.encodeSuite(again) != written { fatalError("writing the suite twice gives other bytes") }
    return 0
}

/// Equal, NaN included (a stored NaN reads back as NaN).
private func same(_ a: PropertyListValue, _ b: PropertyListValue?) -> Bool {
    guard let b else { return false }
    switch (a, b) {
    case (.double(let x), .double(let y)): return x == y || x.isNaN && y.isNaN
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
    case (.dictionary(let x), .dictionary(let y)):
        return x.count == y.count && x.allSatisfy { key, value in same(value, y[key]) }
    default: return a == b
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Wormhole
import WormholeDBus

/// Commands that load a sender toward slow receivers (contract v1.2 section 7):
///
/// - `flood-transient ROOT GROUP IDENTIFIER COUNT SIZE BUS MAILBOX EVERY`: sends COUNT transient
///   messages `{"seq":N,"pad":"xx…"}` of about SIZE bytes to IDENTIFIER (`passTransientMessage`),
///   and after every EVERY of them passes `{"seq":N}` to the mailbox MAILBOX (`passMessage`).
///   A refused transient message (`queueFull`) is counted, not a failure. Prints one line:
///   `accepted=… refused=… last=… slowest_ms=… peak_rss_kb=… mailbox_last=…`, where `last` is the
///   seq of the last accepted transient message, `slowest_ms` the longest single send call and
///   `peak_rss_kb` the process's peak resident memory (`VmHWM`). Then it waits for the end of
///   its standard input before it exits, so that what it accepted can still drain to a
///   receiver that is continued meanwhile (an exiting process gives up what the bus did not
///   take within the drain's bound).
let flowCommands: [String: @Sendable ([String]) throws -> Void] = [
    "flood-transient": floodTransient
]

private struct Padded: Encodable {
    var seq: Int
    var pad: String
}

private func floodTransient(_ arguments: [String]) throws {
    guard arguments.count == 8, let count = Int(arguments[3]), let size = Int(arguments[4]),
        let every = Int(arguments[7]),
        count > 0, size > 0, every > 0
    else { throw PeerError("flood-transient ROOT GROUP IDENTIFIER COUNT SIZE BUS MAILBOX EVERY") }
    let wormhole = try MessageCenter(
        applicationGroupIdentifier: GroupIdentifier(arguments[1]), containerRoot: arguments[0],
        busAddress: BusAddress(arguments[5]))
    let identifier = arguments[2]
    let mailbox = arguments[6]
    let pad = String(repeating: "x", count: max(0, size - 24))
    var accepted = 0
    var refused = 0
    var last = -1
    var mailboxLast = -1
    var slowest: Duration = .zero
    let clock = ContinuousClock()
    for seq in 0..<count {
        let start = clock.now
        do {
            try wormhole.passTransientMessage(Padded(seq: seq, pad: pad), identifier: MessageIdentifier(identifier))
            accepted += 1
            last = seq
        } catch let error as BusError where error.code == .queueFull {
            refused += 1
        }
        slowest = max(slowest, clock.now - start)
        if (seq + 1) % every == 0 {
            let report = try wormhole.passMessage(["seq": seq], identifier: MessageIdentifier(mailbox))
            if report.notificationError == nil { mailboxLast = seq }
        }
    }
    let milliseconds = slowest.components.seconds * 1_000 + slowest.components.attoseconds / 1_000_000_000_000_000
    let line =
        "accepted=\(accepted) refused=\(refused) last=\(last) slowest_ms=\(milliseconds) peak_rss_kb=\(peakResidentKilobytes()) "
        + "mailbox_last=\(mailboxLast) counted=\(wormhole.refusedTransientMessages)\n"
    FileHandle.standardOutput.write(Data(line.utf8))
    while readLine() != nil {}
    if let error = wormhole.flush(timeout: .seconds(30)) { printError("flood-transient: flush: \(error)") }
}

/// `VmHWM` of /proc/self/status: the peak resident set, in kB.
private func peakResidentKilobytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
    }
    return -1
}

/// `post-storm ROOT GROUP NAME MAILBOX COUNT BUS`: posts NAME COUNT times with states 1…COUNT
/// (`DarwinNotificationCenter.post`), passes `{"n":N}` to the mailbox MAILBOX after every
/// 100,000th post and `{"n":"last"}` at the end, then prints `posted=… refused=… slowest_ms=…`.
let stormCommands: [String: @Sendable ([String]) throws -> Void] = [
    "post-storm": postStorm
]

private func postStorm(_ arguments: [String]) throws {
    guard arguments.count == 6, let count = Int(arguments[4]), count > 0 else {
        throw PeerError("post-storm ROOT GROUP NAME MAILBOX COUNT BUS")
    }
    let bus = try BusAddress(arguments[5])
    let wormhole = try MessageCenter(
        applicationGroupIdentifier: GroupIdentifier(arguments[1]), containerRoot: arguments[0], busAddress: bus)
    let center = try wormhole.notificationCenter()
    let name = try NotificationName(arguments[2])
    var posted = 0
    var refused = 0
    var slowest: Duration = .zero
    let clock = ContinuousClock()
    for state in 1...count {
        let start = clock.now
        do {
            try center.post(name, state: UInt64(state))
            posted += 1
        } catch let error as BusError where error.code == .queueFull {
            refused += 1
        }
        slowest = max(slowest, clock.now - start)
        if state % 100_000 == 0 {
            _ = try wormhole.passMessage(["n": state], identifier: MessageIdentifier(arguments[3]))
        }
    }
    _ = try wormhole.passMessage(["n": "last"], identifier: MessageIdentifier(arguments[3]))
    _ = wormhole.flush()
    let milliseconds = slowest.components.seconds * 1_000 + slowest.components.attoseconds / 1_000_000_000_000_000
    print("posted=\(posted) refused=\(refused) slowest_ms=\(milliseconds)")
}

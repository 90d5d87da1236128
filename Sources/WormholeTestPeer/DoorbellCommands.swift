// SPDX-License-Identifier: Apache-2.0
import Foundation
import Wormhole
import WormholeDBus

/// Commands that exercise the doorbell (docs/contract.md section 9) from other processes; the
/// doorbell's directory is `$XDG_RUNTIME_DIR/wormhole/doorbell` (tests give the peers one).
///
/// - `doorbell-observe BUS NAME... [--prefix] [--bus-only] [--also-bus-only] [--absorbed] [--events]`: observes
///   each NAME (a prefix with `--prefix`) on the I/O thread; writes `ready endpoint=PATH|none bus=HEX`
///   to standard error once active, then one line `NAME STATE` per delivery; on the state 2^64-1
///   it writes `rings received=N refused=N` (and, with `--absorbed`, `absorbed=N`: the signals
///   its connection dropped undecoded as duplicates of rings) and exits. With `--also-bus-only`
///   a second, bus-only center of the same process observes NAME too and writes
///   `bus-only NAME STATE` per delivery (it ignores the state 2^64-1). With `--events` it also writes
///   `catchUp NAME` for each catch-up and `disconnected`/`reconnected` for its connection's events.
/// - `doorbell-post BUS NAME STATE... [--bus-only] [--on-input] [--each-input] [--flush-wait] [--names] [--close-first]`:
///   posts NAME once per STATE, flushes, writes `rang sent=N stale=N` and exits. With `--names`,
///   NAME is a comma-separated list, each posted once per STATE, and a second line says
///   `kept=N descriptors=N` (registration listings kept, open file descriptors). With `--on-input`
///   it connects, writes `connected` to standard error and waits for a line on standard input
///   before posting; with `--each-input` it waits for a line before each post, and writes the
///   counters after each; with `--flush-wait` the flush may take a minute (the test stops the
///   bus meanwhile). With `--close-first` it closes its center first, so that every post throws,
///   and writes `rang sent=N stale=N notsent=N`.
/// - `post-sequence BUS NAME COUNT SPACING_US`: posts NAME with the states 1 to COUNT, one every
///   SPACING_US microseconds (a deliberate spacing, for the order fault script), going on when a
///   post throws; writes `notsent STATE` for each post that reported the notification as not sent,
///   `halfway` once half of them are posted, then, after a flush, `posted N notsent M` (and
///   `unconfirmed: WHY` when the flush failed).
let doorbellCommands: [String: @Sendable ([String]) throws -> Void] = [
    "doorbell-observe": doorbellObserve,
    "doorbell-post": doorbellPost,
    "post-sequence": postSequence,
]

private func postSequence(_ arguments: [String]) throws {
    guard arguments.count == 4, let count = UInt64(arguments[2]), let spacing = Int(arguments[3]), spacing >= 0 else {
        throw PeerError("post-sequence BUS NAME COUNT SPACING_US")
    }
    let center = try DarwinNotificationCenter(busAddress: try BusAddress(arguments[0]))
    let name = try NotificationName(arguments[1])
    var notSent: UInt64 = 0
    var next = ContinuousClock.now
    for state in 1...max(1, count) where count > 0 {
        next = next.advanced(by: .microseconds(spacing))
        do {
            try center.post(name, state: state)
        } catch {
            notSent += 1
            printLine("notsent \(state)")
        }
        if state == count / 2 { printLine("halfway") }
        let now = ContinuousClock.now
        if now < next {
            let left = (next - now).components
            var wait = timespec(tv_sec: Int(left.seconds), tv_nsec: Int(left.attoseconds / 1_000_000_000))
            nanosleep(&wait, nil)
        }
    }
    if let error = center.flush(timeout: .seconds(10)) { printLine("unconfirmed: \(error)") }
    // Posts whose queued signal a newer one replaced while the socket was full (contract §7):
    // an observer not rung for them gets the newer one only.
    printLine("replaced \(center.connection.replacedSignals)")
    printLine("posted \(count - notSent) notsent \(notSent)")
}

private func doorbellObserve(_ arguments: [String]) throws {
    let flags = Set(arguments.filter { $0.hasPrefix("--") })
    let positional = arguments.filter { !$0.hasPrefix("--") }
    guard positional.count >= 2 else {
        throw PeerError("doorbell-observe BUS NAME... [--prefix] [--bus-only] [--also-bus-only] [--absorbed]")
    }
    let address = try BusAddress(positional[0])
    let center = try DarwinNotificationCenter(
        busAddress: address, wake: flags.contains("--bus-only") ? .busOnly : .doorbell)
    let name = try NotificationName(positional[1])
    let handler: @Sendable (DarwinNotification) -> Void = { note in
        if flags.contains("--events"), note.reason == .catchUp {
            printLine("catchUp \(note.name.rawValue)")
            return
        }
        guard let state = note.state else { return }
        if state == UInt64.max {
            let counters = DoorbellStatus.counters
            printLine("rings received=\(counters?.received ?? 0) refused=\(counters?.refused ?? 0)")
            if flags.contains("--absorbed") { printLine("absorbed=\(center.connection.duplicatesAbsorbed)") }
            exit(0)
        }
        printLine("\(note.name.rawValue) \(state)")
    }
    var observer: [Subscription] = []
    for name in try [name] + positional.dropFirst(2).map({ try NotificationName($0) }) {
        observer.append(
            flags.contains("--prefix")
                ? try center.listen(prefix: name, on: .ioThread, handler: handler)
                : try center.listen(name: name, on: .ioThread, handler: handler))
    }
    var second: Subscription?
    if flags.contains("--also-bus-only") {
        let quiet = try DarwinNotificationCenter(busAddress: address, wake: .busOnly)
        second = try quiet.listen(name: name, on: .ioThread) { note in
            guard let state = note.state, state != UInt64.max else { return }
            printLine("bus-only \(note.name.rawValue) \(state)")
        }
    }
    // `--events`: the connection's losses and returns, in the order of the deliveries (all on the
    // I/O thread), for counting one catch-up per reconnect.
    let events =
        flags.contains("--events")
        ? center.connection.onEvent(on: .ioThread) { event in
            printLine(event == .disconnected ? "disconnected" : "reconnected")
        } : nil
    let bus = String(DoorbellStatus.busKey(of: address), radix: 16)
    printError("ready endpoint=\(DoorbellStatus.endpoint ?? "none") bus=\(bus)")
    serveForever(keeping: (observer, second, events))
}

private func doorbellPost(_ arguments: [String]) throws {
    let flags = Set(arguments.filter { $0.hasPrefix("--") })
    let positional = arguments.filter { !$0.hasPrefix("--") }
    guard positional.count >= 3 else {
        throw PeerError(
            "doorbell-post BUS NAME STATE... [--bus-only] [--on-input] [--each-input] [--flush-wait] [--names]")
    }
    let center = try DarwinNotificationCenter(
        busAddress: try BusAddress(positional[0]), wake: flags.contains("--bus-only") ? .busOnly : .doorbell)
    let names = try (flags.contains("--names") ? positional[1].split(separator: ",").map(String.init) : [positional[1]])
        .map { try NotificationName($0) }
    if flags.contains("--on-input") {
        printError("connected")
        _ = readLine()
    }
    if flags.contains("--close-first") {
        // Every post throws (the center is closed): none may ring anybody.
        center.close()
        var notSent = 0
        for text in positional.dropFirst(2) {
            guard let state = UInt64(text) else { throw PeerError("STATE is an unsigned integer, got \(text)") }
            for name in names {
                do { try center.post(name, state: state) } catch { notSent += 1 }
            }
        }
        let counters = DoorbellStatus.counters
        printLine("rang sent=\(counters?.sent ?? 0) stale=\(counters?.staleRemoved ?? 0) notsent=\(notSent)")
        return
    }
    for text in positional.dropFirst(2) {
        guard let state = UInt64(text) else { throw PeerError("STATE is an unsigned integer, got \(text)") }
        if flags.contains("--each-input") { _ = readLine() }
        for name in names { try center.post(name, state: state) }
        if flags.contains("--each-input") {
            let counters = DoorbellStatus.counters
            printLine("rang sent=\(counters?.sent ?? 0) stale=\(counters?.staleRemoved ?? 0)")
        }
    }
    // `--flush-wait`: a minute (the bus may be stopped by the test meanwhile), else the default.
    let timeout: Duration = flags.contains("--flush-wait") ? .seconds(60) : DarwinNotificationCenter.defaultFlushTimeout
    if let error = center.flush(timeout: timeout) { throw error }
    let counters = DoorbellStatus.counters
    printLine("rang sent=\(counters?.sent ?? 0) stale=\(counters?.staleRemoved ?? 0)")
    if flags.contains("--names") {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
        printLine("kept=\(DoorbellStatus.keptListings ?? 0) descriptors=\(descriptors)")
    }
}

/// One line on standard output, written at once.
private func printLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Logging
import Synchronization
import Wormhole
import WormholeDBus

/// Commands that send once and exit without a flush (the drain at exit must put the signal on
/// the bus):
///
/// - `send-once KIND ROOT GROUP ID BUS MODE`: one send of KIND (`mailbox`, `journal`, `post`,
///   `defaults`, `transient`) for ID, without calling `flush`, then the process exits. MODE
///   `release`: the facade is released before `exit(0)` (its connection closes on its own);
///   `keep`: the facade is kept alive in a global until the process exits; `return`: kept and
///   the process returns from `main` (top-level code ends).
///   Mailbox: `ID.json` in GROUP's `wormhole` directory, name `GROUP/wormhole/ID`. Journal: the
///   journal of ID, name `GROUP/wormhole/ID/journal`. Post: the name `GROUP/post/ID`. Defaults:
///   key ID of GROUP's default suite, name `GROUP/Preferences/GROUP/ID`. Transient: `Message`
///   with name `GROUP/wormhole/ID`.
/// - `post-exit-in-handler BUS NAME`: observes `NAME/trigger` with a handler on the I/O thread,
///   posts it, and in the handler posts `NAME` and calls `exit(0)` there (the drain at exit then
///   runs on the connection's own I/O thread).
/// - `journal-exit MODE ROOT GROUP ID BUS`: appends a record to journal ID and flushes (the first
///   post, which connects), then appends a second one and exits without a flush: from the main
///   thread (MODE `main`), or from a handler on the I/O thread (MODE `handler`: the handler of
///   `GROUP/trigger/ID`, posted by the command) that calls `exit(0)` right after the append.
let exitCommands: [String: @Sendable ([String]) throws -> Void] = [
    "send-once": sendOnce,
    "post-exit-in-handler": postExitInHandler,
    "journal-exit": journalExit,
]

private func journalExit(_ arguments: [String]) throws {
    guard arguments.count == 5, ["main", "handler"].contains(arguments[0]) else {
        throw PeerError("journal-exit main|handler ROOT GROUP ID BUS")
    }
    let (mode, root, group, identifier) = (arguments[0], arguments[1], arguments[2], arguments[3])
    let wormhole = try MessageCenter(
        applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root,
        busAddress: try BusAddress(arguments[4]))
    let journal = try wormhole.journal(MessageIdentifier(identifier))
    try journal.append(["n": 1])
    if let error = journal.flush() { throw PeerError("first append not posted: \(error)") }
    if mode == "main" {
        try journal.append(["n": 2])
        exit(0)
    }
    let center = try wormhole.notificationCenter()
    let trigger = try NotificationName("\(group)/trigger/\(identifier)")
    let observer = try center.listen(name: trigger, on: .ioThread) { _ in
        exitAfter("journal-exit") { try journal.append(["n": 2]) }
    }
    try center.post(trigger)
    serveForever(keeping: observer)
}

private func postExitInHandler(_ arguments: [String]) throws {
    guard arguments.count == 2 else { throw PeerError("post-exit-in-handler BUS NAME") }
    let center = try DarwinNotificationCenter(busAddress: try BusAddress(arguments[0]))
    let name = try NotificationName(arguments[1])
    let trigger = try NotificationName(arguments[1] + "/trigger")
    let observer = try center.listen(name: trigger, on: .ioThread) { _ in
        exitAfter("post-exit-in-handler") { try center.post(name) }
    }
    try center.post(trigger)
    serveForever(keeping: observer)
}

/// Whether `main` should return instead of calling `exit(0)` (mode `return`).
let returnFromMain = Atomic<Bool>(false)

private func sendOnce(_ arguments: [String]) throws {
    guard arguments.count == 6, ["release", "keep", "return"].contains(arguments[5]) else {
        throw PeerError("send-once KIND ROOT GROUP ID BUS release|keep|return")
    }
    let (kind, root, group, identifier) = (arguments[0], arguments[1], arguments[2], arguments[3])
    let bus = try BusAddress(arguments[4])
    var logger = Logger(label: "wormhole-test-peer")
    logger.logLevel = .warning
    let facade: AnyObject
    switch kind {
    case "mailbox":
        let wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root, busAddress: bus, logger: logger)
        let report = try wormhole.passMessage(["id": identifier], identifier: MessageIdentifier(identifier))
        if let error = report.notificationError { throw PeerError("not posted: \(error)") }
        facade = wormhole
    case "journal":
        let wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root, busAddress: bus, logger: logger)
        let journal = try wormhole.journal(MessageIdentifier(identifier))
        try journal.append(["id": identifier])
        facade = journal
    case "post":
        let center = try DarwinNotificationCenter(busAddress: bus, logger: logger)
        try center.post(NotificationName("\(group)/post/\(identifier)"))
        facade = center
    case "defaults":
        let defaults = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root, busAddress: bus, logger: logger)
        let report = try defaults.set(identifier, forKey: identifier)
        if let error = report.notificationError { throw PeerError("not posted: \(error)") }
        facade = defaults
    case "transient":
        let wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), containerRoot: root, busAddress: bus, logger: logger)
        try wormhole.passTransientMessage(["id": identifier], identifier: MessageIdentifier(identifier))
        facade = wormhole
    default:
        throw PeerError("send-once: unknown kind '\(kind)' (mailbox, journal, post, defaults, transient)")
    }
    // Kept alive until the process exits: one reference that is never released.
    if arguments[5] != "release" { _ = Unmanaged.passRetained(facade) }
    if arguments[5] == "return" { returnFromMain.store(true, ordering: .relaxed) }
}

/// Runs `body` (in a handler) and exits: 0 when it returned, 1 (naming `command`) when it threw.
private func exitAfter(_ command: String, _ body: () throws -> Void) -> Never {
    do {
        try body()
    } catch {
        printError("\(command): \(error)")
        exit(1)
    }
    exit(0)
}

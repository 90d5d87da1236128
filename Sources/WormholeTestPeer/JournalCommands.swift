// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Wormhole
import WormholeDBus

/// Commands that exercise the journal from another process:
///
/// - `journal-append ROOT GROUP IDENTIFIER COUNT BATCH BUS [hold]`: appends `{"p":PID,"i":I}` for I
///   from 0, BATCH records per `append(contentsOf:)`, COUNT records in all (0: until killed),
///   writing `SEQUENCE PID I` to standard output (one `write(2)` per batch) once each batch has
///   returned. With `hold`, it then waits until it is killed or its standard input ends (kill
///   tests that must not keep a core busy, nor outlive a crashed test process).
/// - `journal-consume ROOT GROUP IDENTIFIER CONSUMER LAST BUS`: a durable consumer (from the
///   beginning) through `Journal.listen`; writes `SEQUENCE REDELIVERY(0|1) MESSAGE` per record as the
///   handler runs, and exits 0 after the record LAST, at once when the consumer had already
///   acknowledged LAST, or when its standard input ends.
/// - `journal-fill ROOT GROUP IDENTIFIER LIMIT BUS`: a full disk, simulated with `RLIMIT_FSIZE` = LIMIT
///   bytes (`SIGXFSZ` ignored, so a write past it fails with `EFBIG`): appends 1000-byte records
///   until an append fails, then writes `LAST_SEQUENCE` and the error's code on one line and exits 0.
let journalCommands: [String: @Sendable ([String]) throws -> Void] = [
    "journal-append": journalAppend,
    "journal-consume": journalConsume,
    "journal-fill": journalFill,
]

private func writeOut(_ text: String) {
    let bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress! + offset, bytes.count - offset) }
        if written < 0 {
            if errno == EINTR { continue }
            exit(1)
        }
        offset += written
    }
}

private func journalAppend(_ arguments: [String]) throws {
    guard arguments.count == 6 || (arguments.count == 7 && arguments[6] == "hold"), let count = Int(arguments[3]),
        let batch = Int(arguments[4]), batch >= 1
    else {
        throw PeerError("journal-append ROOT GROUP IDENTIFIER COUNT BATCH BUS [hold]")
    }
    let journal = try openJournal(arguments, busAt: 5)
    let pid = Int(getpid())
    var next = 0
    while count == 0 || next < count {
        let size = count == 0 ? batch : min(batch, count - next)
        let messages = (next..<(next + size)).map { ["p": pid, "i": $0] }
        let range = try journal.append(contentsOf: messages)
        var lines = ""
        for (offset, sequence) in range.enumerated() { lines += "\(sequence) \(pid) \(next + offset)\n" }
        writeOut(lines)
        next += size
    }
    if let error = journal.flush() { throw PeerError("appended but not posted: \(error)") }
    if arguments.count == 7 { exitAtEndOfInput() }
}

/// Blocks until standard input ends (the test closed it, or the test process is gone), then exits:
/// a peer that waits to be killed never outlives a test process that crashed.
private func exitAtEndOfInput() -> Never {
    var byte: UInt8 = 0
    while true {
        let count = read(STDIN_FILENO, &byte, 1)
        if count == 0 || (count < 0 && errno != EINTR) { exit(0) }
    }
}

private func journalConsume(_ arguments: [String]) throws {
    guard arguments.count == 6, let last = UInt64(arguments[4]) else {
        throw PeerError("journal-consume ROOT GROUP IDENTIFIER CONSUMER LAST BUS")
    }
    let journal = try openJournal(arguments, busAt: 5)
    let done = DispatchSemaphore(value: 0)
    let listener = try journal.listen(from: .beginning, consumer: arguments[3], as: JSONDocument.self) { result in
        switch result {
        case .success(let record):
            writeOut("\(record.sequence) \(record.isRedelivery ? 1 : 0) \(record.message.compactText)\n")
            if record.sequence == last { done.signal() }
        case .failure(let error):
            printError("journal-consume: \(error)")
            exit(2)
        }
    }
    // The test process gone (standard input closed): stop too.
    Thread { exitAtEndOfInput() }.start()
    // An earlier run killed after it had already acknowledged LAST leaves nothing to deliver
    // (LAST 0 waits until killed). The cursor is read once this listener holds the consumer's
    // lock, so no other run can move it after.
    if last > 0, let acknowledged = try journal.status().consumers[arguments[3]], acknowledged >= last {
        listener.cancel()
        return
    }
    done.wait()
    // Returning exits the process: the listener's exit hook waits for the handler of LAST to
    // return and stores the cursor through it (as on the end of standard input).
    withExtendedLifetime(listener) {}
}

private func journalFill(_ arguments: [String]) throws {
    guard arguments.count == 5, let limit = Int(arguments[3]) else {
        throw PeerError("journal-fill ROOT GROUP IDENTIFIER LIMIT BUS")
    }
    let journal = try openJournal(arguments, busAt: 4)
    signal(SIGXFSZ, SIG_IGN)
    var bound = rlimit(rlim_cur: rlim_t(limit), rlim_max: rlim_t(limit))
    guard setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &bound) == 0 else {
        throw PeerError("setrlimit failed: errno \(errno)")
    }
    let filler = String(repeating: "x", count: 1000)
    var last: UInt64 = 0
    while true {
        do {
            last = try journal.append(["fill": filler])
        } catch let error as WormholeError {
            writeOut("\(last) \(error.code)\n")
            return
        }
    }
}

/// The journal `ARGUMENTS[2]` of the group `ARGUMENTS[1]` under the container root `ARGUMENTS[0]`,
/// on the bus at `ARGUMENTS[bus]`: what every journal command starts with.
private func openJournal(_ arguments: [String], busAt bus: Int) throws -> Journal {
    try MessageCenter(
        applicationGroupIdentifier: GroupIdentifier(arguments[1]), containerRoot: arguments[0],
        busAddress: BusAddress(arguments[bus])
    ).journal(MessageIdentifier(arguments[2]))
}

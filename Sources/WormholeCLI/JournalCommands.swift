// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import Wormhole
import WormholeDBus
import WormholeSystem

/// Journal errors that are the user's input, not the journal's state: exit 64 like other usage errors.
func withJournalCLIErrors<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as WormholeError where [.recordTooLarge, .invalidConsumer, .invalidPosition].contains(error.code)
    {
        throw CLIFailure(message: error.message, status: 64)
    } catch {
        throw cliFailure(error)
    }
}

extension WormholeOptions {
    /// The journal of `identifier` in this wormhole, every name validated first.
    func journal(_ identifier: String) throws -> Journal {
        let wormhole = try wormhole(identifiers: [identifier])
        return try withJournalCLIErrors { try wormhole.journal(MessageIdentifier(identifier)) }
    }
}

/// `ID --group G [--directory D]`: the one journal that `journal stat`, `check` and `trim` work on.
struct JournalTarget: ParsableArguments {
    @Argument(help: "The message identifier.")
    var identifier: String

    @OptionGroup var options: WormholeOptions

    /// The identifier's journal, every name validated first.
    func journal() throws -> Journal { try options.journal(identifier) }
}

/// `wormholectl send --journal --group G [--directory D] ID [JSON]` (contract §6): appends one record.
struct JournalSend {
    var identifier: String
    var json: String?
    var options: WormholeOptions

    func run() throws {
        let journal = try options.journal(identifier)
        let text =
            try json ?? String(decoding: readStandardInput(limit: .max, identifier: "standard input"), as: UTF8.self)
        let bytes = Data(PathText.trimmingWhitespace(text).utf8)
        try withJournalCLIErrors {
            let document: JSONDocument
            do {
                document = try JSONDocument(data: bytes)
            } catch let error as WormholeError {
                throw WormholeError(.invalidJSON, value: identifier, "message for '\(identifier)' is \(error.message)")
            }
            try journal.append(document)
        }
        if let error = journal.flush(timeout: OneShot.flushTimeout) {
            writeError("wormhole: warning: record appended, but the notification was not sent: \(error)")
        }
    }
}

/// Wakes `journal listen`'s printing thread: a flag each wake-up sets and each wait takes, so
/// wake-ups that come while it prints make one more read (it reads until nothing is left before
/// it waits). The wait has no deadline of its own on purpose: the command serves until `--count`,
/// `--timeout` or a signal ends the process.
private final class JournalWake: Sendable {
    private let woken = BoundedWait(false)

    func signal() { woken.change { $0 = true } }

    func wait() {
        _ = woken.wait(until: .distantFuture) { woken -> Bool? in
            guard woken else { return nil }
            woken = false
            return true
        }
    }
}

/// `wormholectl listen --journal …` (contract §6): the readiness line, then one line per record,
/// `{"identifier":"ID","sequence":N,"message":<the message>}`, in sequence order.
struct JournalListen {
    var identifier: String
    var consumer: String?
    var from: JournalPosition
    var count: Int?
    var timeout: Double?
    var options: WormholeOptions

    /// `start`, `end` or a sequence number (at least 1).
    static func position(_ text: String) -> JournalPosition? {
        switch text {
        case "start": return .beginning
        case "end": return .end
        default:
            guard text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let sequence = UInt64(text), sequence >= 1 else {
                return nil
            }
            return .sequence(sequence)
        }
    }

    func run() throws -> Never {
        armTimeout(timeout, countGiven: count != nil)
        let wormhole = try options.wormhole(identifiers: [identifier])
        let journal = try withJournalCLIErrors { try wormhole.journal(MessageIdentifier(identifier)) }
        let wake = JournalWake()
        // The wake-ups first, then the cursor: nothing appended after the cursor's start is missed.
        // Without a bus the journal directory wakes it until the bus can be reached.
        let observer = try withCLIErrors { try journal.onAppend { wake.signal() } }
        let reader = try withJournalCLIErrors { try journal.makeConsumer(from: from, consumer: consumer) }
        let writer = LineWriter()
        let (name, limit) = (identifier, count)
        // Lost: said at once. Back: said by the printing thread once it has printed what was
        // appended meanwhile (the observer's catch-up wakes it; so does this).
        let lines = JournalBusLines(reports: BusReports(.journal, address: try options.bus.addressIfAny()))
        let watching = lines.reports.watch(wormhole) {
            lines.back.store(true, ordering: .releasing)
            wake.signal()
        }
        announceReadyAndServe(keeping: (wormhole, observer, reader, watching, lines)) {
            lines.reports.sayWhereListening(wormhole)
            DetachedThread.start(name: "journal-listen") {
                Self.serve(reader, identifier: name, count: limit, writer: writer, wake: wake, lines: lines)
            }
        }
    }

    /// Prints every record from the cursor on each wake; a gap or damage is one line on standard
    /// error (after a gap, printing goes on at the first available record).
    private static func serve(
        _ reader: JournalPackageConsumer, identifier: String, count: Int?, writer: LineWriter, wake: JournalWake,
        lines: JournalBusLines
    ) -> Never {
        var printed = 0
        while true {
            let batch: [JournalRecord<JSONDocument>]
            do {
                batch = try reader.nextBatch()
            } catch let error as WormholeError where error.code == .journalGap || error.code == .journalDamaged {
                // One line per range (contract §6, v1.2): `wormhole: records A..B …`, then on.
                writeError("wormhole: \(error.message)")
                continue
            } catch {
                writeError("wormhole: \(identifier): \(error)")
                wake.wait()
                continue
            }
            if batch.isEmpty {
                // Everything readable is printed: the bus's return can be said now.
                if lines.back.exchange(false, ordering: .acquiringAndReleasing) { lines.reports.writeBackLine() }
                wake.wait()
                continue
            }
            for record in batch {
                writer.writeLine { line in
                    line.raw(#"{"identifier":"#)
                    line.string(identifier)
                    line.raw(#","sequence":"#)
                    line.number(record.sequence)
                    line.raw(#","message":"#)
                    record.message.appendCompact(to: &line.bytes)
                    line.raw("}")
                }
                printed += 1
                lines.reports.caughtUpOne()
                if let count, printed >= count {
                    do {
                        try reader.acknowledge(through: record.sequence)
                    } catch {
                        writeError("wormhole: \(identifier): cannot store the consumer's cursor: \(error)")
                        exit(1)
                    }
                    exit(0)
                }
            }
        }
    }
}

/// `wormholectl journal stat|trim --group G [--directory D] ID` (contract §6).
struct JournalCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "journal",
        abstract: "Inspect and trim an identifier's journal (see also send --journal and listen --journal).",
        subcommands: [JournalStatCommand.self, JournalCheckCommand.self, JournalTrimCommand.self])
}

/// Appends `"damaged":[{"from":A,"to":B,"file":F,"reason":R},…]` to a line.
private func appendDamaged(_ damaged: [JournalDamage], to line: inout JSONLine) {
    line.raw(#""damaged":"#)
    line.array(damaged) { line, damage in
        line.raw(#"{"from":"#)
        line.number(damage.from)
        line.raw(#","to":"#)
        line.number(damage.to)
        line.raw(#","file":"#)
        line.string(damage.file)
        line.raw(#","reason":"#)
        line.string(damage.reason.rawValue)
        line.raw(#","detail":"#)
        line.string(damage.detail)
        line.raw("}")
    }
}

/// Writes a journal's status as one line of JSON.
private func statusLine(_ identifier: String, _ status: JournalStatus, removed: [String]? = nil) -> String {
    var line = JSONLine(bytes: [])
    line.raw(#"{"identifier":"#)
    line.string(identifier)
    let counts: [(name: StaticString, value: UInt64)] = [
        (#","first":"#, status.first), (#","last":"#, status.last), (#","records":"#, status.count),
        (#","bytes":"#, UInt64(status.bytes)), (#","segments":"#, UInt64(status.segments.count)),
    ]
    for count in counts {
        line.raw(count.name)
        line.number(count.value)
    }
    line.raw(#","consumers":"#)
    line.object(status.consumers) { $0.number($1) }
    if !status.badConsumers.isEmpty {
        line.raw(#","badConsumers":"#)
        line.object(status.badConsumers) { $0.string($1) }
    }
    line.raw(",")
    appendDamaged(status.damaged, to: &line)
    if let removed {
        line.raw(#","removed":"#)
        line.array(removed) { $0.string($1) }
    }
    line.raw("}")
    return String(decoding: line.bytes, as: UTF8.self)
}

/// `wormholectl journal stat --group G [--directory D] ID`.
struct JournalStatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stat",
        abstract: "Print one JSON object: first, last, records, bytes, segments and each consumer's cursor.",
        discussion: "A journal that was never written prints first 1, last 0.")

    @OptionGroup var target: JournalTarget

    func run() throws {
        let status = try withJournalCLIErrors { try target.journal().status() }
        writeOutput(statusLine(target.identifier, status))
    }
}

/// `wormholectl journal check --group G [--directory D] ID`: exit 0 when whole, 1 when damaged, 2
/// on other errors (contract §6, v1.2).
struct JournalCheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Read every frame; print the damaged ranges; exit 0 when whole, 1 when damaged.",
        discussion: """
            Prints one JSON object like `journal stat` (with "damaged", a list of \
            {"from":A,"to":B,"file":F,"reason":R}; reasons: missing, truncated, foreign, checksum), \
            then, on standard error, one line per damaged range. Exits 0 when nothing is damaged, \
            1 when something is, 2 on other errors (64 for bad arguments).
            """)

    @OptionGroup var target: JournalTarget

    func run() throws {
        let identifier = target.identifier
        let status: JournalStatus
        do {
            status = try withJournalCLIErrors { try target.journal().status() }
        } catch {
            // 64 for bad arguments like every command; 2 for anything else that stops the check.
            let failure = cliFailure(error)
            throw CLIFailure(message: failure.message, status: failure.status == 64 ? 64 : 2)
        }
        writeOutput(statusLine(identifier, status))
        guard status.damaged.isEmpty else {
            for damage in status.damaged {
                writeError(
                    "wormhole: records \(damage.from)..\(damage.to) of journal '\(identifier)': \(damage.reason.rawValue), "
                        + "file \(damage.file)\(damage.detail.isEmpty ? "" : " (\(damage.detail))")")
            }
            throw CLIFailure(
                message: "journal '\(identifier)' has \(status.damaged.count) damaged range(s)", status: 1)
        }
    }
}

/// `wormholectl journal trim --group G [--directory D] ID [--max-bytes N] [--max-age S] [--max-records N]`.
struct JournalTrimCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trim",
        abstract: "Remove whole segments, oldest first (never the last), by the limits given.",
        discussion: "Prints the status afterwards as `journal stat` does, with the removed files in \"removed\".")

    @OptionGroup var target: JournalTarget

    @Option(help: "Remove oldest segments while all segments together are larger than this many bytes.")
    var maxBytes: Int?

    @Option(help: "Remove segments last written more than this many seconds ago.")
    var maxAge: Double?

    @Option(help: "Remove segments whose records are all older than the newest N.")
    var maxRecords: UInt64?

    func validate() throws {
        if maxBytes == nil && maxAge == nil && maxRecords == nil {
            throw ValidationError("give at least one of --max-bytes, --max-age, --max-records")
        }
        if let maxBytes, maxBytes < 0 { throw ValidationError("--max-bytes must not be negative, not \(maxBytes)") }
        if let maxAge, !(maxAge >= 0) { throw ValidationError("--max-age must be a number of seconds, not \(maxAge)") }
    }

    func run() throws {
        let journal = try target.journal()
        let retention = Journal.Retention(maximumBytes: maxBytes, maximumAge: maxAge, maximumRecords: maxRecords)
        let removed = try withJournalCLIErrors { try journal.trim(retention) }
        let status = try withJournalCLIErrors { try journal.status() }
        writeOutput(statusLine(target.identifier, status, removed: removed))
    }
}

/// What the printing thread of `listen --journal` needs to say the bus is back.
final class JournalBusLines: Sendable {
    let reports: BusReports
    /// The bus is back; the line is written once what was appended meanwhile is printed.
    let back = Atomic<Bool>(false)

    init(reports: BusReports) { self.reports = reports }
}

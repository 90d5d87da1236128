// SPDX-License-Identifier: Apache-2.0
import Glibc
import Histogram
import Wormhole
import WormholeDBus

/// The command-line tool as scripts see it: `wormholectl observe` and `wormholectl listen` writing
/// to a pipe, against `wormhole-floor observe` and `listen` doing the same in C. This process
/// posts (and, for `listen`, has written the mailbox file before the timer starts) and times
/// until the child's line is read from the pipe.
struct CLISuite: BenchSuite {
    let context: BenchContext

    static let group = "group.org.wormhole.bench"

    func run() throws {
        let (perRound, warm) = context.rounds(of: options.roundTrips)
        let wormhole = try Executables.sibling("wormholectl")
        let floor = try Executables.sibling("wormhole-floor")
        let poster = try DarwinNotificationCenter(busAddress: address)
        let names = BenchNames()
        var next: UInt64 = 1

        /// One round: a fresh child, ready, then the timed posts; the child is stopped after.
        func round(
            _ executable: String, _ arguments: [String], environment: [String: String] = [:],
            prepare: (UInt64) throws -> [UInt8], post: (UInt64) throws -> Void
        ) throws -> Histogram<UInt64> {
            let child = try ChildProcess(executable: executable, arguments: arguments, environment: environment)
            defer { child.terminate() }
            try child.waitForReady()
            defer { next += UInt64(warm + perRound) }
            return try LineTiming.run(child, first: next, count: perRound, warmup: warm, prepare: prepare, post: post)
        }

        Console.output(
            "\ncommand-line tool: post here, then read the child's line from its stdout pipe (one-way, not halved)")
        Console.output("\(options.roundTrips) posts per row; each round starts a fresh child")
        Console.output(BenchRow.header)

        // observe: {"name":"NAME","state":N,"reason":"posted"} per post.
        Console.progress("cli: wormholectl observe against wormhole-floor observe")
        let name = try NotificationName(names.name("cli"))
        let observeLine = { (state: UInt64) in
            Array("{\"name\":\"\(name.rawValue)\",\"state\":\(state),\"reason\":\"posted\"}".utf8)
        }
        let postName = { (state: UInt64) in try poster.post(name, state: state) }
        let observed = try AlternatingRounds(label: "cli observe", rounds: options.rounds).measure([
            .init(name: "floor") {
                try round(floor, ["observe", address.rawValue, name.rawValue], prepare: observeLine, post: postName)
            },
            .init(name: "wormhole") {
                try round(
                    wormhole, ["observe", name.rawValue, "--bus-address", address.rawValue], prepare: observeLine,
                    post: postName)
            },
        ])
        let observeFloor = BenchRow(label: "wormhole-floor observe", histogram: observed[0], isRoundTrip: false)
        let observeOurs = BenchRow(label: "wormhole observe", histogram: observed[1], isRoundTrip: false)
        // Issue 23's goals: observe p50 within 1.05x of C on the bus path, listen within 1.15x.
        report.publish([(observeFloor, nil, nil), (observeOurs, observeFloor, 1.05)], suite: "cli")

        // listen: the mailbox file is written before the timer starts; the post wakes the child,
        // which reads it and prints {"identifier":"ID","message":<the file>,"reason":"posted","sentAt":N}.
        Console.progress("cli: wormholectl listen against wormhole-floor listen")
        let scratch = try ScratchDirectory("cli")
        let root = scratch.path + "/containers"
        let mailboxDirectory = try scratch.makeDirectory("containers/\(Self.group)/wormhole")
        let identifier = "cli-\(names.tag)"
        let mailboxName = try NotificationName("\(Self.group)/wormhole/\(identifier)")
        let writeMailbox = { (state: UInt64) throws -> [UInt8] in
            let message = "{\"seq\":\(state)}"
            try Self.replaceFile(mailboxDirectory + "/\(identifier).json", with: Array(message.utf8))
            return Array(
                "{\"identifier\":\"\(identifier)\",\"message\":\(message),\"reason\":\"posted\",\"sentAt\":\(state)}"
                    .utf8)
        }
        let postMailbox = { (state: UInt64) in try poster.post(mailboxName, state: state) }
        let listened = try AlternatingRounds(label: "cli listen", rounds: options.rounds).measure([
            .init(name: "floor") {
                try round(
                    floor, ["listen", address.rawValue, mailboxDirectory, "\(Self.group)/wormhole", identifier],
                    prepare: writeMailbox, post: postMailbox)
            },
            .init(name: "wormhole") {
                try round(
                    wormhole, ["listen", "--group", Self.group, identifier, "--bus-address", address.rawValue],
                    environment: ["WORMHOLE_CONTAINER_ROOT": root], prepare: writeMailbox, post: postMailbox)
            },
        ])
        let listenFloor = BenchRow(label: "wormhole-floor listen", histogram: listened[0], isRoundTrip: false)
        let listenOurs = BenchRow(label: "wormhole listen", histogram: listened[1], isRoundTrip: false)
        report.publish([(listenFloor, nil, nil), (listenOurs, listenFloor, 1.15)], suite: "cli")

        report.goal(
            "cli", "wormhole observe p50 / floor p50", ratio: observeOurs.median / observeFloor.median, target: 1.05)
        report.goal(
            "cli", "wormhole observe p99 / floor p99", ratio: observeOurs.percentile(99) / observeFloor.percentile(99),
            target: 1.5)
        report.goal(
            "cli", "wormhole listen p50 / floor p50", ratio: listenOurs.median / listenFloor.median, target: 1.15)

        if options.sandboxed {
            try runSandboxed(wormhole: wormhole) { executable, arguments, line, post in
                try round(executable, arguments, prepare: line, post: post)
            }
        }
    }

    /// Replaces `path` atomically with `bytes` (a temporary file in the same directory, mode
    /// 0600, then rename), as a Wormhole sender stores a message.
    static func replaceFile(_ path: String, with bytes: [UInt8]) throws {
        let temporary = path + ".bench-tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BenchFailure("cannot create \(temporary): errno \(errno)") }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary, path) == 0 else {
            throw BenchFailure("cannot write \(path): errno \(errno)")
        }
    }
}

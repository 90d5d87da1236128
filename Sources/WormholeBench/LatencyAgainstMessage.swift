// SPDX-License-Identifier: Apache-2.0
import Histogram
import WormholeDBus

/// One side of a ping-pong with a helper process (the defaults and journal suites' sessions):
/// `run` times `count` round trips after `warmup` untimed ones.
protocol RoundTripSession: AnyObject {
    func run(count: Int, warmup: Int) throws -> Histogram<UInt64>
    func stop()
}

extension DefaultsSession: RoundTripSession {}
extension JournalSession: RoundTripSession {}
extension MessageSession: RoundTripSession {}

/// A latency across processes (`action`, such as `set -> observer`) measured against
/// `passMessage` → listener (100 B) in the same rounds, alternating (``AlternatingRounds``): both
/// rows printed and added to the report under `suite`, ours as `label`, with the goal
/// `<action without spaces> p50 / passMessage p50` of 1.3. The caller adds its own figures.
func latencyAgainstMessage(
    _ context: BenchContext, suite: String, action: String, label: String, roundTrips: Int,
    session makeSession: (_ address: BusAddress, _ root: String) throws -> any RoundTripSession
) throws -> (message: BenchRow, ours: BenchRow) {
    let options = context.options
    let goal = action.filter { $0 != " " }
    Console.output("\n\(action) in another process, against passMessage (100 B) -> listener")
    Console.output(BenchRow.header)
    let work = try ScratchDirectory(suite)
    let root = work.path + "/containers"
    let session = try makeSession(context.address, root)
    let messages = try MessageSession(address: context.address, root: root, size: 100)
    let (perRound, warm) = context.rounds(of: roundTrips)
    let merged = try AlternatingRounds(label: "\(suite) latency", rounds: options.rounds).measure([
        .init(name: "message") { try messages.run(count: perRound, warmup: warm) },
        .init(name: suite) { try session.run(count: perRound, warmup: warm) },
    ])
    session.stop()
    messages.stop()
    withExtendedLifetime(work) {}
    let message = BenchRow(label: "passMessage -> listener, 100 B", histogram: merged[0])
    let ours = BenchRow(label: label, histogram: merged[1])
    context.report.publishPair(message, ours, target: 1.3, suite: suite, goal: "\(goal) p50 / passMessage p50")
    return (message, ours)
}

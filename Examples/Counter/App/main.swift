// SPDX-License-Identifier: Apache-2.0
// The "app" side of MMWormhole's counter example: listens on `button` and shows
// each button number as it arrives, with how long it took to cross.
//
//   counter-app --group GROUP [--presses N] [--bus-address ADDRESS]
//
// It first shows the message already waiting in the mailbox (sent while the app
// was not running), then each new one. Exits after N presses (default 5).
import Dispatch
import Glibc
import Wormhole

struct ButtonMessage: Codable, Sendable {
    var buttonNumber: Int
}

/// Writes a line at once (stdout is a pipe in the demo, where print would buffer). The example
/// needs nothing of Foundation beyond what Wormhole brings (FoundationEssentials), which keeps an
/// idle listener small (docs/performance.md, memory).
func say(_ line: String, to fd: Int32 = STDOUT_FILENO) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func nowNanoseconds() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

guard let group = option("--group") else {
    say("usage: counter-app --group GROUP [--presses N] [--bus-address ADDRESS]", to: STDERR_FILENO)
    exit(64)
}
let presses = option("--presses").flatMap(Int.init) ?? 5
/// The listener, kept for the life of the program once it serves.
nonisolated(unsafe) var servedListener: Subscription?

do {
    let wormhole = try MessageCenter(
        applicationGroupIdentifier: GroupIdentifier(group), busAddress: try option("--bus-address").map(BusAddress.init)
    )
    // Handlers run on the listener's own serial queue (the default delivery). Keep the
    // listener: releasing it would stop it.
    let listener = try wormhole.listen(
        identifier: "button", as: ButtonMessage.self,
        options: .init(deliversStoredMessageOnStart: true)
    ) { delivery in
        switch (delivery.result, delivery.reason) {
        case (.success(let message), .stored):
            say("app:   mailbox already held button \(message.buttonNumber)")
        case (.success(let message), _):
            let latency = delivery.sentAt.map { "\((nowNanoseconds() &- $0 + 500) / 1000) µs" } ?? "?"
            say("app:   button \(message.buttonNumber) arrived after \(latency)")
            if message.buttonNumber >= presses { exit(0) }
        case (.failure(let error), _):
            say("app:   could not read the button: \(error)")
        }
    }
    say("ready", to: STDERR_FILENO)
    // Kept in a global for as long as the program serves (a local's lifetime extended over
    // dispatchMain(), which never returns, may end early in an optimised build).
    servedListener = listener
    dispatchMain()
} catch {
    say("counter-app: \(error)", to: STDERR_FILENO)
    exit(1)
}

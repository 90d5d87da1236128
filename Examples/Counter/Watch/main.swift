// SPDX-License-Identifier: Apache-2.0
// The "watch" side of MMWormhole's counter example: each button press stores
// {"buttonNumber": N} under the identifier `button` and wakes the app.
//
//   counter-watch --group GROUP [--presses N] [--bus-address ADDRESS]
//
// The bus is the session bus unless --bus-address is given; the container root
// comes from WORMHOLE_CONTAINER_ROOT (or XDG_DATA_HOME, HOME).
import Foundation
import Wormhole

struct ButtonMessage: Codable {
    var buttonNumber: Int
}

/// Writes a line at once (stdout is a pipe in the demo, where print would buffer).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

guard let group = option("--group") else {
    FileHandle.standardError.write(
        Data("usage: counter-watch --group GROUP [--presses N] [--bus-address ADDRESS]\n".utf8))
    exit(64)
}
let presses = option("--presses").flatMap(Int.init) ?? 5

do {
    let wormhole = try MessageCenter(
        applicationGroupIdentifier: GroupIdentifier(group), busAddress: try option("--bus-address").map(BusAddress.init)
    )
    for number in 1...presses {
        let report = try wormhole.passMessage(ButtonMessage(buttonNumber: number), identifier: "button")
        say(
            "watch: pressed button \(number)"
                + (report.notificationError == nil ? "" : " (stored; app not notified: bus down)"))
        wormhole.flush()
        // A person pressing a button now and then, not a wait for an event.
        usleep(150_000)
    }
} catch {
    FileHandle.standardError.write(Data("counter-watch: \(error)\n".utf8))
    exit(1)
}

// SPDX-License-Identifier: Apache-2.0
// Lines, the shell app of scenario 1, in a terminal: shows every line LineGrabber hands it the
// moment it arrives (no "Load latest" button), and at start the line that arrived while it was
// closed. Each line typed on standard input is an answer back to the extension (`toExtension`).
//
//   lines [--group GROUP] [--bus-address ADDRESS]
//
// The group is group.com.example.lines unless --group or LINES_GROUP says otherwise.
import Dispatch
import Foundation
import LineChannel

func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func describe(_ line: Line) -> String {
    let age = max(0, Date().timeIntervalSince1970 - line.sentAt)
    let ago = age < 1 ? String(format: "%.0f ms ago", age * 1000) : String(format: "%.0f s ago", age)
    return "\"\(line.text)\"" + (line.url.map { " from \($0)" } ?? "") + " (\(ago))"
}

do {
    let channel = try makeLineChannel(group: option("--group"), busAddress: option("--bus-address"))
    let inbox = try channel.receive(.toShell, includingStored: true) { line, wasStored in
        say(wasStored ? "lines: while Lines was closed: \(describe(line))" : "lines: \(describe(line))")
    }
    FileHandle.standardError.write(Data("ready\n".utf8))
    let reader = Thread {
        while let text = readLine() {
            guard !text.isEmpty else { continue }
            do {
                try channel.send(Line(text: text), .toExtension)
                say("lines: answered \"\(text)\"")
            } catch {
                say("lines: cannot answer: \(error)")
            }
        }
        withExtendedLifetime(inbox) { exit(0) }
    }
    reader.start()
    dispatchMain()
} catch {
    FileHandle.standardError.write(Data("lines: \(error)\n".utf8))
    exit(1)
}

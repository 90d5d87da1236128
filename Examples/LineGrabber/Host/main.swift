// SPDX-License-Identifier: Apache-2.0
// LineGrabber's native-messaging host: the part of the browser extension that runs as a
// program. Chromium and Firefox start it when the extension calls `sendNativeMessage` or
// `connectNative`, and speak the native-messaging protocol on its standard input and output:
// each message is a 4-byte length in native byte order, then that many bytes of UTF-8 JSON.
//
// From the extension:  {"line": "text", "url": "https://…"}  → stored as `toShell`, Lines woken;
//                      reply {"ok": true, "id": …, "toExtension": <Lines' latest answer or null>}
//                      {"get": "toExtension"}               → reply {"ok": true, "toExtension": …}
// While the browser keeps the port open (`connectNative`), each answer Lines writes to
// `toExtension` is also pushed as {"toExtension": …}. The host exits when standard input closes.
//
// Browsers start it with no options and the user's environment: the group is
// `group.com.example.lines` unless LINES_GROUP says otherwise; the bus is the session bus unless
// LINES_BUS_ADDRESS is set.
import Foundation
import Glibc
import LineChannel
import Synchronization

/// Chromium's limit for a message from the host; larger replies would end the connection.
let maximumReply = 1024 * 1024
/// What we accept from the browser (Chromium sends at most 64 MiB).
let maximumRequest = 64 * 1024 * 1024

/// Writes framed messages to standard output; replies and pushes may come from two threads.
let output = Mutex<Void>(())

func sendToBrowser(_ object: [String: Any]) {
    guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes]) else {
        return
    }
    if data.count > maximumReply {
        data = Data(#"{"ok":false,"error":"reply over 1 MB"}"#.utf8)
    }
    var length = UInt32(data.count)  // native byte order, as the protocol says
    output.withLock { _ in
        writeAll(withUnsafeBytes(of: &length) { Array($0) })
        writeAll(Array(data))
    }
}

func writeAll(_ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress! + offset, bytes.count - offset) }
        if written < 0 {
            if errno == EINTR { continue }
            exit(0)  // the browser went away
        }
        offset += written
    }
}

/// Reads exactly `count` bytes; nil at end of input.
func readExactly(_ count: Int) -> [UInt8]? {
    var bytes = [UInt8](repeating: 0, count: count)
    var offset = 0
    while offset < count {
        let got = bytes.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress! + offset, count - offset) }
        if got < 0 && errno == EINTR { continue }
        if got <= 0 { return nil }
        offset += got
    }
    return bytes
}

func log(_ text: String) {
    // Standard error goes to the browser's log (chrome --enable-logging), never to the page.
    FileHandle.standardError.write(Data("line-grabber-host: \(text)\n".utf8))
}

func json(_ line: Line?) -> Any {
    guard let line else { return NSNull() }
    var object: [String: Any] = ["id": line.id, "text": line.text, "sentAt": line.sentAt]
    if let url = line.url { object["url"] = url }
    return object
}

/// A value from the browser as JSON, cut at 200 characters, to name it in an error.
func shown(_ value: Any) -> String {
    guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]),
        let text = String(data: data, encoding: .utf8)
    else { return "\(value)" }
    return text.count > 200 ? text.prefix(200) + "…" : text
}

signal(SIGPIPE, SIG_IGN)
let channel: any LineChannel
do {
    channel = try makeLineChannel(busAddress: ProcessInfo.processInfo.environment["LINES_BUS_ADDRESS"])
} catch {
    log("\(error)")
    sendToBrowser(["ok": false, "error": "\(error)"])
    exit(1)
}

// Lines' answers, pushed while the port is open.
let answers = try? channel.receive(.toExtension, includingStored: false) { line, _ in
    sendToBrowser(["toExtension": json(line)])
}

while let header = readExactly(4) {
    let length = Int(header.withUnsafeBytes { $0.load(as: UInt32.self) })
    guard length <= maximumRequest, let body = readExactly(length) else {
        log("a message of \(length) bytes is over the limit or cut short; closing")
        exit(1)
    }
    guard let request = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
        sendToBrowser(["ok": false, "error": "not a JSON object"])
        continue
    }
    do {
        if let text = request["line"] as? String {
            let line = Line(text: text, url: request["url"] as? String)
            try channel.send(line, .toShell)
            sendToBrowser(["ok": true, "id": line.id, "toExtension": json(try channel.latest(.toExtension))])
        } else if request["get"] as? String == "toExtension" {
            sendToBrowser(["ok": true, "toExtension": json(try channel.latest(.toExtension))])
        } else if let value = request["line"] {
            sendToBrowser(["ok": false, "error": "\"line\" must be a string, not \(shown(value))"])
        } else {
            let expected = "expected {\"line\": TEXT} or {\"get\": \"toExtension\"}"
            sendToBrowser(["ok": false, "error": "\(expected), not \(shown(request))"])
        }
    } catch {
        log("\(error)")
        sendToBrowser(["ok": false, "error": "\(error)"])
    }
}
withExtendedLifetime(answers) { exit(0) }

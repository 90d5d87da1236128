// The interop recipes of docs/interop.md, each run against a private bus: Python (the package in
// Python/, `python3 -m wormhole_py`, and a bare dbus-python send), the shell tools (dbus-send,
// gdbus emit, busctl emit) and the monitors (dbus-monitor, busctl monitor), talking to the real
// `wormholectl` binary. A recipe whose tool or Python module is missing here is skipped, saying what
// to install.

import Dispatch
import Foundation
import FoundationXML
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// What this machine has: the tools and Python modules the recipes use.
enum Interop {
    /// Debian's Python, which sees the modules of `apt install python3-dbus python3-gi` (a
    /// `python3` earlier on PATH, such as pyenv's, may not).
    static let python = "/usr/bin/python3"

    static func pythonImports(_ modules: String) -> Bool {
        guard FileManager.default.isExecutableFile(atPath: python) else { return false }
        return (try? run(python, ["-c", "import \(modules)"]))?.status == 0
    }

    static func hasTool(_ name: String) -> Bool {
        (try? run("/usr/bin/env", ["sh", "-c", "command -v \(name)"]))?.status == 0
    }

    static let hasDBusPython = pythonImports("dbus, dbus.mainloop.glib; from gi.repository import GLib")
    static let hasGio = pythonImports("gi; from gi.repository import Gio, GLib")

    /// The Python package's directory (its command line runs from it with `python3 -m wormhole_py`).
    static let package = repositoryRoot.path + "/Python"
    static let hasPackage = hasGio && FileManager.default.fileExists(atPath: package + "/wormhole_py/__init__.py")
}

/// The recipes use the README's fixed names, and the monitors show every post on the bus: the
/// tests share the suite's bus one at a time.
@Suite(
    "interop recipes (README): Python, shell tools and monitors against the wormholectl binary", .sharedBus, .serialized
)
struct InteropTests {
    let bus: TestBus
    let runtime: TemporaryDirectory
    init() throws {
        bus = try TestBus.shared()
        runtime = try TemporaryDirectory("interop")
    }

    /// The recipes use the session bus: here it is the private one.
    var environment: [String: String] {
        ["DBUS_SESSION_BUS_ADDRESS": bus.address.rawValue, "XDG_RUNTIME_DIR": runtime.path]
    }

    func start(_ executable: String, _ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(executable, arguments, environment: environment)
    }

    func wormhole(_ arguments: [String]) throws -> ChildProcess {
        try start(try productPath("wormholectl"), arguments)
    }

    /// Waits for the line on standard error that says the child listens (`ready`, or the given one).
    func ready(_ child: ChildProcess, _ line: String = "ready") async throws {
        let seen = try await within("'\(line)' on standard error") {
            await child.stderrLines.firstLine { $0.hasSuffix(line) }
        }
        if seen == nil { throw TestFailure("the child ended before '\(line)': \(child.outputSoFar)") }
    }

    /// Waits for the child to exit; kills it (and so fails the test) if it has not after the guard.
    func finish(_ child: ChildProcess) async throws -> ProcessOutput {
        let killer = Task {
            try? await Task.sleep(for: .seconds(waitGuardSeconds))
            if !Task.isCancelled { child.signal(SIGKILL) }
        }
        defer { killer.cancel() }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: child.wait()) }
        }
    }

    /// Runs a command to completion and expects exit 0.
    func succeed(_ executable: String, _ arguments: [String]) async throws {
        let output = try await finish(try start(executable, arguments))
        #expect(output.status == 0, "\(arguments): \(output.stderr)")
    }

    func shell(_ command: String) async throws {
        try await succeed("/usr/bin/env", ["bash", "-c", command])
    }

    static func observeLine(_ name: String, _ state: UInt64?) -> String {
        #"{"name":"\#(name)","state":\#(state.map(String.init) ?? "null"),"reason":"posted"}"#
    }

    // MARK: Python

    /// `python3 -m wormhole_py ARGUMENTS` (the package's `wormhole-py`), from the checkout.
    func python(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(
            Interop.python, ["-m", "wormhole_py"] + arguments,
            environment: environment.merging(["PYTHONPATH": Interop.package]) { $1 })
    }

    @Test(
        "the Python package's observer gets wormholectl post and dbus-send; its post reaches wormholectl observe with its state",
        .enabled(
            if: Interop.hasPackage,
            "GLib's Python bindings are not importable by /usr/bin/python3 (Debian: apt install python3-gi)"))
    func pythonPackageBothWays() async throws {
        let observer = try python(["observe", "com.example.py", "--count", "2"])
        try await ready(observer)
        try await succeed(try productPath("wormholectl"), ["post", "com.example.py", "--state", "5"])
        try await shell(
            "dbus-send --session --type=signal /org/wormhole/Notify1 org.wormhole.Notify1.Posted string:com.example.py")
        let output = try await finish(observer)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(
            output.stdout == Self.observeLine("com.example.py", 5) + "\n" + Self.observeLine("com.example.py", nil)
                + "\n")

        let wormholeObserver = try wormhole(["observe", "com.example.py2", "--count", "1"])
        try await ready(wormholeObserver)
        let posted = try await finish(try python(["post", "com.example.py2", "--state", "11"]))
        #expect(posted.status == 0, "\(posted.stderr)")
        let observed = try await finish(wormholeObserver)
        #expect(observed.stdout == Self.observeLine("com.example.py2", 11) + "\n", "\(observed.stderr)")
    }

    @Test(
        "dbus-python: a plain Python int goes as int32, which wormholectl observe accepts as the state",
        .enabled(
            if: Interop.hasDBusPython,
            "dbus-python is not importable by /usr/bin/python3 (Debian: apt install python3-dbus python3-gi)"))
    func dbusPythonPosts() async throws {
        let observer = try wormhole(["observe", "com.example.py", "--count", "1"])
        try await ready(observer)
        try await succeed(
            Interop.python,
            [
                "-c",
                "import dbus; m = dbus.lowlevel.SignalMessage('/org/wormhole/Notify1', 'org.wormhole.Notify1', 'Posted'); "
                    + "m.append('com.example.py', 5); b = dbus.SessionBus(); b.send_message(m); b.flush()",
            ])
        let output = try await finish(observer)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout == Self.observeLine("com.example.py", 5) + "\n")
    }

    // MARK: Shell

    @Test("dbus-send on the plain interface and on the bucket reaches wormholectl observe")
    func dbusSendRecipe() async throws {
        let observer = try wormhole(["observe", "com.example.sh", "--count", "2"])
        try await ready(observer)
        let bucket = NotifyContract.bucketInterface(for: "com.example.sh")
        try await shell(
            "dbus-send --session --type=signal /org/wormhole/Notify1 org.wormhole.Notify1.Posted string:com.example.sh")
        try await shell(
            "dbus-send --session --type=signal /org/wormhole/Notify1 \(bucket).Posted string:com.example.sh uint64:3")
        let output = try await finish(observer)
        #expect(
            output.stdout == Self.observeLine("com.example.sh", nil) + "\n" + Self.observeLine("com.example.sh", 3)
                + "\n")
    }

    @Test(
        "gdbus emit reaches wormholectl observe",
        .enabled(if: Interop.hasTool("gdbus"), "gdbus is not installed (Debian: libglib2.0-bin)"))
    func gdbusEmitRecipe() async throws {
        let observer = try wormhole(["observe", "com.example.sh", "--count", "1"])
        try await ready(observer)
        try await shell(
            #"gdbus emit --session --object-path /org/wormhole/Notify1 --signal org.wormhole.Notify1.Posted "'com.example.sh'" "uint64 4""#
        )
        let output = try await finish(observer)
        #expect(output.stdout == Self.observeLine("com.example.sh", 4) + "\n", "\(output.stderr)")
    }

    @Test(
        "busctl emit (--user, and --address= for a private bus) reaches wormholectl observe",
        .enabled(if: Interop.hasTool("busctl"), "busctl is not installed (Debian: systemd)"))
    func busctlEmitRecipe() async throws {
        let observer = try wormhole(["observe", "com.example.sh", "--count", "2"])
        try await ready(observer)
        try await shell("busctl --user emit /org/wormhole/Notify1 org.wormhole.Notify1 Posted st com.example.sh 5")
        try await shell(
            "busctl --address=\"$DBUS_SESSION_BUS_ADDRESS\" emit /org/wormhole/Notify1 org.wormhole.Notify1 Posted s com.example.sh"
        )
        let output = try await finish(observer)
        #expect(
            output.stdout == Self.observeLine("com.example.sh", 5) + "\n" + Self.observeLine("com.example.sh", nil)
                + "\n")
    }

    // MARK: Monitors

    @Test("dbus-monitor with the recipe's filter shows a post of wormholectl post")
    func dbusMonitorRecipe() async throws {
        let monitor = try start(
            "/usr/bin/env",
            ["dbus-monitor", "--session", "type='signal',path='/org/wormhole/Notify1',member='Posted'"])
        // dbus-monitor's own NameLost (it gave up its name to become a monitor) says it is monitoring.
        let becameMonitor = try await within("dbus-monitor to start") {
            await monitor.stdoutLines.firstLine { $0.contains("member=NameLost") }
        }
        #expect(becameMonitor != nil, "\(monitor.outputSoFar)")
        try await succeed(try productPath("wormholectl"), ["post", "com.example.mon", "--state", "6"])
        let seen = try await within("the post in dbus-monitor's output") {
            var lines: [String] = []
            for await line in monitor.stdoutLines {
                lines.append(line)
                if line.contains("uint64 6") { break }
            }
            return lines
        }
        monitor.signal(SIGKILL)  // its SIGTERM may be blocked, inherited from this process
        _ = try await finish(monitor)
        let text = seen.joined(separator: "\n")
        #expect(
            text.contains("interface=\(NotifyContract.bucketInterface(for: "com.example.mon")); member=Posted"),
            "\(text)")
        #expect(text.contains(#"string "com.example.mon""#), "\(text)")
    }

    @Test(
        "busctl monitor with the recipe's match shows a post of wormholectl post",
        .enabled(if: Interop.hasTool("busctl"), "busctl is not installed (Debian: systemd)"))
    func busctlMonitorRecipe() async throws {
        let monitor = try start(
            "/usr/bin/env",
            ["busctl", "--user", "monitor", "--match", "type='signal',path='/org/wormhole/Notify1',member='Posted'"])
        try await ready(monitor, "Monitoring bus message stream.")
        try await succeed(try productPath("wormholectl"), ["post", "com.example.mon", "--state", "8"])
        let seen = try await within("the post in busctl's output") {
            var lines: [String] = []
            for await line in monitor.stdoutLines {
                lines.append(line)
                if line.contains("UINT64 8") { break }
            }
            return lines
        }
        monitor.signal(SIGKILL)  // its SIGTERM may be blocked, inherited from this process
        _ = try await finish(monitor)
        let text = seen.joined(separator: "\n")
        #expect(text.contains("Member=Posted"), "\(text)")
        #expect(text.contains(#"STRING "com.example.mon";"#), "\(text)")
    }
}

@Suite("the introspection XML (dbus/org.wormhole.Notify1.xml)")
struct IntrospectionTests {
    func succeed(_ executable: String, _ arguments: [String]) async throws {
        let output = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try run(executable, arguments) }) }
        }
        #expect(output.status == 0, "\(arguments): \(output.stderr)")
    }

    @Test("the introspection XML documents each argument in gdbus-codegen's form and says how to receive every post")
    func introspectionDocumented() throws {
        let path = repositoryRoot.path + "/dbus/org.wormhole.Notify1.xml"
        let reader = CommentedElements()
        let parser = XMLParser(data: try Data(contentsOf: URL(fileURLWithPath: path)))
        parser.delegate = reader
        #expect(parser.parse(), "the XML parses: \(String(describing: parser.parserError))")
        #expect(!reader.signals.isEmpty)
        for signal in reader.signals {
            #expect(signal.comment.contains("\(signal.name):"), "a '\(signal.name):' doc comment precedes the signal")
            for argument in signal.arguments {
                #expect(signal.comment.contains("@\(argument): "), "\(signal.name) documents @\(argument)")
            }
        }
        let header = reader.comments.first ?? ""
        #expect(header.contains("type='signal',path='/org/wormhole/Notify1',member='Posted',arg0='NAME'"))
        #expect(header.contains("NO interface"))
        #expect(header.contains("org.wormhole.Notify1.BXXXX"))
    }

    @Test(
        "gdbus-codegen reads the XML's documentation: every argument is described",
        .enabled(if: Interop.hasTool("gdbus-codegen"), "gdbus-codegen is not installed (Debian: libglib2.0-dev-bin)"))
    func gdbusCodegenReadsDocs() async throws {
        let out = try TemporaryDirectory("codegen")
        try await succeed(
            "/usr/bin/env",
            [
                "gdbus-codegen", "--generate-rst", out.path + "/doc",
                repositoryRoot.path + "/dbus/org.wormhole.Notify1.xml",
            ])
        let rst = try String(contentsOfFile: out.path + "/doc-org.wormhole.Notify1.rst", encoding: .utf8)
        #expect(rst.contains("name\n  The notification name"), "\(rst)")
        #expect(rst.contains("state\n  Optional 64-bit state"), "\(rst)")
        #expect(rst.contains("without an\ninterface") || rst.contains("without an interface"))
    }
}

/// The signals of an introspection file, each with the comment just before it and its
/// argument names; and every comment in order.
private final class CommentedElements: NSObject, XMLParserDelegate {
    struct SignalDoc {
        var name: String
        var comment: String
        var arguments: [String] = []
    }
    var comments: [String] = []
    var signals: [SignalDoc] = []
    private var lastComment = ""
    private var inSignal = false

    func parser(_ parser: XMLParser, foundComment comment: String) {
        comments.append(comment)
        lastComment = comment
    }

    func parser(
        _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        switch element {
        case "signal":
            signals.append(SignalDoc(name: attributes["name"] ?? "", comment: lastComment))
            inSignal = true
        case "arg" where inSignal:
            signals[signals.count - 1].arguments.append(attributes["name"] ?? "")
        default: break
        }
        if element != "arg" { lastComment = "" }
    }

    func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
        if element == "signal" { inSignal = false }
    }
}

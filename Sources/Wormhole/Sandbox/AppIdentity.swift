// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import WormholeDBus
import WormholeSystem

/// The app a process belongs to, which a sandboxed sender needs (contract §8).
///
/// Flatpak runs an app behind `xdg-dbus-proxy`, which passes a broadcast signal to the app only
/// when its sender owns a name the app may talk to (`<APPID>` and `<APPID>.*` by default). So a
/// process that knows its app ID owns `<APPID>.Wormhole.c<unique>` on the bus before it posts;
/// a process without one posts anonymously, as before.
///
/// The app ID is, first that applies:
/// 1. the `name` of the `[Application]` group of `/.flatpak-info`, which Flatpak mounts into
///    every sandbox (nothing overrides it: inside Flatpak the proxy owns the decision);
/// 2. the ID the program set with `setAppID(_:)`;
/// 3. `$WORMHOLE_APP_ID` (an unsandboxed helper of a sandboxed app: `WORMHOLE_APP_ID=org.example.Lines`);
/// 4. `$FLATPAK_ID`.
///
/// ```swift
/// try AppIdentity.setAppID("org.example.Lines")   // before the first post
/// ```
package struct AppIdentity: Sendable, Hashable, CustomStringConvertible {
    /// Where an app ID came from.
    package enum Source: String, Sendable, Hashable {
        /// `/.flatpak-info` (inside a Flatpak sandbox).
        case flatpakInfo = "/.flatpak-info"
        /// `AppIdentity.setAppID(_:)`.
        case program = "the program"
        /// `$WORMHOLE_APP_ID`.
        case wormholeAppID = "WORMHOLE_APP_ID"
        /// `$FLATPAK_ID`.
        case flatpakID = "FLATPAK_ID"
    }

    /// The app ID, a D-Bus well-known name (`org.example.Lines`).
    package let appID: String
    /// Where it came from.
    package let source: Source

    package var description: String { "\(appID) (from \(source.rawValue))" }

    package init(appID: String, source: Source) {
        self.appID = appID
        self.source = source
    }

    /// Where Flatpak describes the sandbox to the app inside it.
    package static let flatpakInfoPath = "/.flatpak-info"

    /// Whether this process runs inside a Flatpak sandbox (`/.flatpak-info` exists).
    package static var isFlatpakSandbox: Bool { flatpakInfo.present }

    /// Sets the program's app ID (step 2 of the order above; `nil` clears it). It applies to the
    /// posts made after the call, on every facade of the process. Inside a Flatpak sandbox
    /// `/.flatpak-info` wins.
    ///
    /// - Throws: ``WormholeError/Code/invalidAppID`` naming `appID` when it is not a valid app ID.
    package static func setAppID(_ appID: String?) throws {
        try WormholeRuntime.shared.appIdentity.setAppID(appID)
    }

    /// The app ID this process uses now, or `nil`: it posts anonymously.
    ///
    /// - Throws: ``WormholeError/Code/invalidAppID`` naming the value and where it came from
    ///   when the app ID that applies is not valid.
    package static func current() throws -> AppIdentity? {
        try WormholeRuntime.shared.appIdentity.current()
    }

    /// The program's setting, and the app ID resolved from it and the rest (once: every post
    /// asks); the process's one is ``WormholeRuntime/appIdentity``.
    final class Resolver: Sendable {
        private let resolved = Locked<(program: String?, identity: Result<AppIdentity?, WormholeError>?)>((nil, nil))

        /// See ``AppIdentity/setAppID(_:)``.
        func setAppID(_ appID: String?) throws(WormholeError) {
            if let appID { try validate(appID, source: .program) }
            resolved.withLock { state in
                state.program = appID
                state.identity = nil
            }
        }

        /// See ``AppIdentity/current()``.
        func current() throws(WormholeError) -> AppIdentity? {
            try resolved.withLock { state throws(WormholeError) -> AppIdentity? in
                if let identity = state.identity { return try identity.get() }
                let identity = Result { () throws(WormholeError) -> AppIdentity? in
                    try resolve(flatpakInfo: flatpakInfo.contents, program: state.program, environment: environment)
                }
                state.identity = identity
                return try identity.get()
            }
        }
    }

    /// The app ID the rules above give for these inputs: the text of `/.flatpak-info` (`nil`
    /// when there is none), the program's setting and the environment.
    package static func resolve(
        flatpakInfo: String?, program: String?, environment: [String: String]
    ) throws(WormholeError) -> AppIdentity? {
        let candidates: [(String?, Source)] = [
            (flatpakInfo.flatMap(applicationName(inFlatpakInfo:)), .flatpakInfo),
            (program, .program),
            (environment["WORMHOLE_APP_ID"], .wormholeAppID),
            (environment["FLATPAK_ID"], .flatpakID),
        ]
        for case (let value?, let source) in candidates where !value.isEmpty {
            try validate(value, source: source)
            return AppIdentity(appID: value, source: source)
        }
        return nil
    }

    /// The `name` key of the `[Application]` group of a `/.flatpak-info` text (a GLib key file).
    package static func applicationName(inFlatpakInfo text: String) -> String? {
        keys(of: "Application", inFlatpakInfo: text).first { $0.key == "name" }?.value
    }

    /// The keys of one group of a `/.flatpak-info` text, in order (`[Session Bus Policy]` holds
    /// the app's D-Bus permissions, `[Context]` its filesystems and sockets).
    package static func keys(of group: String, inFlatpakInfo text: String) -> [(key: String, value: String)] {
        var current = ""
        var found: [(key: String, value: String)] = []
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = PathText.trimmingBlanks(raw)
            if line.hasPrefix("[") && line.hasSuffix("]") {
                current = String(line.dropFirst().dropLast())
            } else if current == group, !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") {
                found.append(
                    (
                        PathText.trimmingBlanks(line[..<equals]),
                        PathText.trimmingBlanks(line[line.index(after: equals)...])
                    ))
            }
        }
        return found
    }

    /// The text of `/.flatpak-info`, or `nil` outside a Flatpak sandbox.
    package static var flatpakInfoText: String? { flatpakInfo.contents }

    /// Checks that `appID` is a D-Bus well-known name (two or more elements of `A-Z a-z 0-9 _ -`,
    /// none empty or starting with a digit, at most 255 bytes), as Flatpak's app IDs are.
    package static func validate(_ appID: String, source: Source) throws(WormholeError) {
        func refuse(_ why: String) -> WormholeError {
            WormholeError(.invalidAppID, value: appID, "app ID \(quoted(appID)) from \(source.rawValue) \(why)")
        }
        if appID.utf8.count > 255 { throw refuse("is \(appID.utf8.count) bytes, over the 255 a D-Bus name allows") }
        let elements = appID.split(separator: ".", omittingEmptySubsequences: false)
        if elements.count < 2 { throw refuse("needs two or more elements separated by '.' (org.example.App)") }
        for element in elements {
            if element.isEmpty { throw refuse("has an empty element") }
            if let first = element.utf8.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) {
                throw refuse("has an element starting with a digit (\(quoted(String(element))))")
            }
            let allowed = element.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
            if !allowed { throw refuse("may hold only A-Z a-z 0-9 _ - and '.'") }
        }
    }

    /// The two variables, read once.
    private static let environment: [String: String] = {
        let all = ProcessInfo.processInfo.environment
        return all.filter { $0.key == "WORMHOLE_APP_ID" || $0.key == "FLATPAK_ID" }
    }()

    /// `/.flatpak-info`, read once: whether it is there and what it says.
    private static let flatpakInfo: (present: Bool, contents: String?) = {
        guard FileManager.default.fileExists(atPath: flatpakInfoPath) else { return (false, nil) }
        return (true, try? String(contentsOfFile: flatpakInfoPath, encoding: .utf8))
    }()
}

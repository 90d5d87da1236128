import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus

/// `wormholectl doctor`'s checks of contract §8: the sandbox and its proxy, the app ID, the sender
/// name, whether the group's files and a peer app are within the sandbox's permissions.
extension Doctor {
    /// What the sandbox lets this process do, from `/.flatpak-info` (nil outside Flatpak).
    struct SandboxInfo {
        let text: String

        /// Whether the session bus is the proxied one (Flatpak gives the real bus only with
        /// `--socket=session-bus`).
        var proxied: Bool {
            let sockets =
                AppIdentity.keys(of: "Context", inFlatpakInfo: text).first { $0.key == "sockets" }?.value ?? ""
            return !sockets.split(separator: ";").contains("session-bus")
        }

        /// Whether the app may talk to (hear) the sender names of `peer`: a `[Session Bus Policy]`
        /// entry `talk` or `own` for `<peer>.*`, or a wider `X.*` that covers it.
        func mayTalk(to peer: String) -> Bool {
            let name = peer + ".Wormhole.c1_1"
            return AppIdentity.keys(of: "Session Bus Policy", inFlatpakInfo: text).contains { entry in
                guard entry.value == "talk" || entry.value == "own" else { return false }
                if entry.key == name { return true }
                guard entry.key.hasSuffix(".*") else { return false }
                return name.hasPrefix(String(entry.key.dropLast(1)))
            }
        }
    }

    static var sandbox: SandboxInfo? { AppIdentity.flatpakInfoText.map(SandboxInfo.init) }

    /// The sandbox (if any), the proxy, the app ID and where it came from.
    func checkSandbox() {
        let identity: AppIdentity?
        do {
            identity = try AppIdentity.current()
        } catch {
            record(
                DoctorCheck(
                    check: "app ID", status: .fail, detail: cliFailure(error).message,
                    fix: "set WORMHOLE_APP_ID to the app's ID (reverse DNS, like org.example.Lines), or unset it"))
            return
        }
        guard let sandbox = Self.sandbox else {
            // Outside a sandbox without an app ID nothing changes (posts are anonymous): no line.
            guard let identity else { return }
            record(
                DoctorCheck(
                    check: "sandbox", status: .pass,
                    detail: "none; app ID \(identity.appID) (from \(identity.source.rawValue)): posts own "
                        + "\(identity.appID).Wormhole.c<unique>, so the app's sandboxed processes hear them"))
            return
        }
        let proxy =
            sandbox.proxied
            ? "the session bus is behind xdg-dbus-proxy (Flatpak's filter)"
            : "the session bus is not filtered (--socket=session-bus)"
        guard let identity else {
            record(
                DoctorCheck(
                    check: "sandbox", status: .fail,
                    detail: "Flatpak (\(AppIdentity.flatpakInfoPath)) names no app; \(proxy)",
                    fix:
                        "run the app with `flatpak run`, which writes the app's name into \(AppIdentity.flatpakInfoPath)"
                ))
            return
        }
        record(
            DoctorCheck(
                check: "sandbox", status: .pass,
                detail: "Flatpak, app ID \(identity.appID) (from \(identity.source.rawValue)); \(proxy)"))
    }

    /// Owns the sender name on `connection` (what every post does first); the name, or why not.
    func checkSenderName(_ connection: BusConnection) -> String? {
        guard let identity = try? AppIdentity.current() else { return nil }
        do {
            let name = try connection.claimAppName(appID: identity.appID)
            record(DoctorCheck(check: "sender name", status: .pass, detail: "owns \(name) before posting"))
            return name
        } catch {
            let name = BusConnection.appSenderName(appID: identity.appID, unique: connection.uniqueName)
            record(
                DoctorCheck(
                    check: "sender name", status: .fail, detail: "\(name): \(cliFailure(error).message)",
                    fix:
                        "the sandbox must let the app own \(identity.appID).* (Flatpak's default); if an override removed it: "
                        + "`flatpak override --user --own-name=\(identity.appID).* \(identity.appID)`"))
            return nil
        }
    }

    /// Inside a sandbox: whether the group's files are shared beyond the app (the host's root is
    /// visible), and whether each peer app is talkable.
    func checkSandboxPermissions(group: GroupIdentifier?, peers: [String]) {
        guard let sandbox = Self.sandbox, let appID = try? AppIdentity.current()?.appID else { return }
        if let group {
            let home = environment["HOME"] ?? ""
            let hostRoot = home + "/.local/share/group-containers"
            let explicit = !(environment["WORMHOLE_CONTAINER_ROOT"] ?? "").isEmpty
            if explicit || PathText.isDirectory(hostRoot + "/" + group.rawValue) {
                record(
                    DoctorCheck(
                        check: "group files", status: .pass,
                        detail: explicit
                            ? "under WORMHOLE_CONTAINER_ROOT"
                            : "\(hostRoot)/\(group) is the host's, shared with other apps and helpers"))
            } else {
                record(
                    DoctorCheck(
                        check: "group files", status: .fail,
                        detail:
                            "\(hostRoot)/\(group) is not visible in the sandbox: the group's files are this app's alone",
                        fix: "add `--filesystem=xdg-data/group-containers/\(group):create` to finish-args "
                            + "(or `flatpak override --user --filesystem=xdg-data/group-containers/\(group):create \(appID)`)"
                    ))
            }
        }
        for peer in peers where peer != appID {
            if sandbox.mayTalk(to: peer) {
                record(DoctorCheck(check: "peer \(peer)", status: .pass, detail: "talkable: its posts reach this app"))
            } else {
                record(
                    DoctorCheck(
                        check: "peer \(peer)", status: .fail,
                        detail: "not talkable: the proxy drops its posts before they reach this app",
                        fix: "add `--talk-name=\(peer).*` to finish-args "
                            + "(or `flatpak override --user --talk-name=\(peer).* \(appID)`)"))
            }
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing
import Wormhole
import WormholeTestSupport

/// Contract §8: where the app ID comes from, and the container root inside a Flatpak sandbox.
@Suite("App identity and the sandbox's container root")
struct AppIdentityTests {
    let info =
        "[Application]\nname=org.example.Lines\nruntime=runtime/org.freedesktop.Platform/x86_64/23.08\n\n[Instance]\nname=other\n"

    @Test("/.flatpak-info wins over the program, WORMHOLE_APP_ID and FLATPAK_ID, in that order")
    func order() throws {
        let environment = ["WORMHOLE_APP_ID": "org.example.Env", "FLATPAK_ID": "org.example.Flatpak"]
        #expect(
            try AppIdentity.resolve(flatpakInfo: info, program: "org.example.Program", environment: environment)
                == AppIdentity(appID: "org.example.Lines", source: .flatpakInfo))
        #expect(
            try AppIdentity.resolve(flatpakInfo: nil, program: "org.example.Program", environment: environment)?.source
                == .program)
        #expect(
            try AppIdentity.resolve(flatpakInfo: nil, program: nil, environment: environment)
                == AppIdentity(appID: "org.example.Env", source: .wormholeAppID))
        #expect(
            try AppIdentity.resolve(flatpakInfo: nil, program: nil, environment: ["FLATPAK_ID": "org.example.Flatpak"])?
                .source == .flatpakID)
        #expect(try AppIdentity.resolve(flatpakInfo: nil, program: nil, environment: ["WORMHOLE_APP_ID": ""]) == nil)
        // A /.flatpak-info without an [Application] name (a runtime's) names nothing.
        #expect(
            try AppIdentity.resolve(flatpakInfo: "[Runtime]\nname=org.example.Sdk\n", program: nil, environment: [:])
                == nil)
    }

    @Test("the name is read from [Application] only")
    func keyFile() {
        #expect(AppIdentity.applicationName(inFlatpakInfo: info) == "org.example.Lines")
        #expect(AppIdentity.applicationName(inFlatpakInfo: "[Instance]\nname=x.y\n") == nil)
    }

    @Test(
        "an invalid app ID is an error naming it and where it came from",
        arguments: [
            "Lines", "org..example", "org.3example", "org.example.Lines!", "org example.x",
            String(repeating: "a.", count: 130) + "a",
        ])
    func invalid(_ value: String) {
        #expect {
            try AppIdentity.resolve(flatpakInfo: nil, program: nil, environment: ["WORMHOLE_APP_ID": value])
        } throws: { error in
            guard let error = error as? WormholeError else { return false }
            return error.code == .invalidAppID && error.value == value && error.message.contains("WORMHOLE_APP_ID")
        }
        #expect(throws: WormholeError.self) { try AppIdentity.setAppID(value) }
    }

    @Test("inside a Flatpak sandbox the root is the host's default when visible, else the app's data directory")
    func sandboxRoot() throws {
        let home = try TemporaryDirectory("sandbox-root")
        let data = home.path + "/.var/app/org.example.Lines/data"
        let environment = ["HOME": home.path, "XDG_DATA_HOME": data]
        #expect(
            try GroupContainer.rootDirectory(environment: environment, inFlatpakSandbox: true) == data
                + "/group-containers")
        try FileManager.default.createDirectory(
            atPath: home.path + "/.local/share/group-containers", withIntermediateDirectories: true)
        #expect(
            try GroupContainer.rootDirectory(environment: environment, inFlatpakSandbox: true)
                == home.path + "/.local/share/group-containers")
        // Outside a sandbox nothing changes; WORMHOLE_CONTAINER_ROOT wins everywhere.
        #expect(
            try GroupContainer.rootDirectory(environment: environment, inFlatpakSandbox: false) == data
                + "/group-containers")
        let explicit = environment.merging(["WORMHOLE_CONTAINER_ROOT": "/srv/groups"]) { $1 }
        #expect(try GroupContainer.rootDirectory(environment: explicit, inFlatpakSandbox: true) == "/srv/groups")
    }
}

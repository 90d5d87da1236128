import FoundationEssentials
import Glibc
import Wormhole
import WormholeDBus
import WormholeSystem

/// `wormholectl doctor`'s check of the doorbell (contract §9): whether it is on for this process,
/// and the endpoints under `$XDG_RUNTIME_DIR/wormhole/doorbell`, the dead ones named (a killed
/// process's, left until the next ring that finds nobody or the next process that starts
/// observing sweeps them).
extension Doctor {
    func checkDoorbell() {
        guard let root = DoorbellStatus.directory else {
            let why =
                environment["XDG_RUNTIME_DIR"].map {
                    $0.hasPrefix("/") ? "WORMHOLE_DOORBELL turns it off" : "XDG_RUNTIME_DIR is not absolute"
                }
                ?? "no XDG_RUNTIME_DIR"
            record(
                DoctorCheck(
                    check: "doorbell", status: .pass, detail: "off (\(why)): posts wake observers by the bus alone"))
            return
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        let endpoints = names.filter { $0.utf8.count == 17 && $0.hasPrefix("e") }.sorted()
        let registrations = names.filter { $0.utf8.count == 17 && $0.hasPrefix("n") }.count
        var dead: [String] = []
        for endpoint in endpoints {
            if let address = DoorbellSocket.address(root + "/" + endpoint), DoorbellSocket.isBound(address) == false {
                dead.append(endpoint)
            }
        }
        var detail =
            "on, in \(root): \(endpoints.count) endpoint\(endpoints.count == 1 ? "" : "s"), "
            + "\(registrations) name\(registrations == 1 ? "" : "s") registered"
        if !dead.isEmpty {
            detail +=
                "; \(dead.count) dead (left by killed processes: removed by the next post that rings them "
                + "or the next Wormhole process that starts observing)"
        }
        record(DoctorCheck(check: "doorbell", status: .pass, detail: detail, items: dead.map { "dead endpoint \($0)" }))
    }
}

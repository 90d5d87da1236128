// SPDX-License-Identifier: Apache-2.0
import WormholeDBus
import WormholeSystem

/// The `Posted` signals a center emits, prebuilt per name (``SignalTemplate``): a post copies
/// its name's signal and appends the state, instead of building the whole signal each time
/// (which cost about half of a post call). At most ``limit`` names are kept; a center that
/// posts more names starts over, so memory stays bounded whatever it posts.
final class PostTemplates: Sendable {
    static let limit = 256
    private let templates = Locked<[String: SignalTemplate]>([:])

    /// The template of `name`'s `Posted` signal on its bucket interface (contract §1), its
    /// arguments the name and then the state that each post appends.
    func template(for name: NotificationName) throws -> SignalTemplate {
        if let found = templates.withLock({ $0[name.rawValue] }) { return found }
        let made = try SignalTemplate(
            Signal(
                path: NotifyContract.path, interface: NotifyContract.bucket(for: name.rawValue),
                member: NotifyContract.posted, arguments: [.string(name.rawValue)]))
        templates.withLock { templates in
            if templates.count >= Self.limit { templates.removeAll(keepingCapacity: true) }
            templates[name.rawValue] = made
        }
        return made
    }
}

// SPDX-License-Identifier: Apache-2.0
// Scenario 4: a share extension as a reusable module. On Linux the extension is a short-lived
// program the desktop starts with the shared files ("Open With…", "Send to": a `.desktop` entry
// with `Exec=share-handoff %F`). It offers only the actions the host app enabled (a list in the
// group's shared defaults), copies each item into the group container atomically, appends
// `{type, action, path}` to the journal `shares` (every share kept, in order), and exits. The host
// app reads the journal with a durable consumer, so it also shows what was shared while it was
// closed.
public import Foundation
import Glibc
public import Wormhole

/// The modules a host app can enable for its share extension.
public enum ShareAction: String, Codable, Sendable, CaseIterable {
    case messenger, disk, preview, buffer

    /// What the host app does with an item shared with this action.
    public var verb: String {
        switch self {
        case .messenger: "send it in a chat"
        case .disk: "save it to disk"
        case .preview: "preview it"
        case .buffer: "copy it to the clipboard buffer"
        }
    }

    /// The actions named in `list` (comma-separated), or an error naming the one that is unknown.
    public static func parse(_ list: String) throws -> [ShareAction] {
        try list.split(separator: ",", omittingEmptySubsequences: false).map { name in
            guard let action = ShareAction(rawValue: String(name)) else {
                throw ShareError(
                    "unknown action '\(name)' (the modules are \(allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            return action
        }
    }
}

extension GroupDefaults.Keys {
    /// The actions the host app offers in its share extension, in the order it offers them (all
    /// of them until the host app chooses).
    public static let shareActions = GroupDefaults.Key<[String]>(
        "shareActions", default: ShareAction.allCases.map(\.rawValue))
}

/// What the share extension tells the host app about one item.
public struct Share: Codable, Sendable, Hashable {
    /// The item's MIME type, from its file name.
    public var type: String
    /// The action chosen.
    public var action: ShareAction
    /// Where the copy is, in the group container.
    public var path: String
    /// The shared file's own name.
    public var name: String
    /// Its size in bytes.
    public var bytes: Int

    public init(type: String, action: ShareAction, path: String, name: String, bytes: Int) {
        self.type = type
        self.action = action
        self.path = path
        self.name = name
        self.bytes = bytes
    }
}

/// A clear error, naming the bad value.
public struct ShareError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What both sides open: the group's defaults (the actions), its journal `shares` and the
/// container folder `Shared/`.
public struct ShareGroup: Sendable {
    public let defaults: GroupDefaults
    public let wormhole: MessageCenter
    public let journal: Journal
    public let sharedDirectory: String

    /// The group `group` (default `group.com.example.share`, or `SHARE_GROUP`), on the session bus
    /// unless `busAddress` is given.
    public init(group: String?, busAddress: String?) throws {
        let group = group ?? ProcessInfo.processInfo.environment["SHARE_GROUP"] ?? "group.com.example.share"
        let address = try busAddress.map(BusAddress.init)
        defaults = try GroupDefaults(applicationGroupIdentifier: GroupIdentifier(group), busAddress: address)
        wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), directory: WormholeDirectoryName("share"),
            busAddress: address)
        journal = wormhole.journal("shares")
        sharedDirectory = try wormhole.container.createDirectory(WormholeDirectoryName("Shared"))
    }

    /// The actions the host app enabled, in its order; unknown names are left out.
    public var enabledActions: [ShareAction] {
        defaults[.shareActions].compactMap(ShareAction.init(rawValue:))
    }
}

/// The MIME type of a file, from its extension (what a desktop passes along is a path).
public func mimeType(ofFileNamed name: String) -> String {
    let types = [
        "txt": "text/plain", "md": "text/markdown", "html": "text/html", "json": "application/json",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "pdf": "application/pdf", "mp4": "video/mp4", "mp3": "audio/mpeg",
    ]
    let ext = (name as NSString).pathExtension.lowercased()
    return types[ext] ?? "application/octet-stream"
}

/// Writes a line at once (standard output is often a pipe, where print would buffer).
public func say(_ line: String, to handle: FileHandle = .standardOutput) {
    handle.write(Data("\(line)\n".utf8))
}

/// The value after `name` on the command line, if any.
public func option(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

// SPDX-License-Identifier: Apache-2.0
// Scenario 3: a watch extension and its app share settings (a currency, a theme) through the app
// group's shared defaults, and a photo-sized file written atomically in the group container.
// Both sides run this code; `settings-watch` and `settings-app` only differ in their name.
//
// Each side prints what it finds at start, then each change the other side makes, the moment it
// is made. It reads commands on standard input, one per line:
//
//   currency USD        set the shared currency
//   theme dark          set the shared theme (light or dark)
//   photo SEED [BYTES]  write a photo-sized file (default 2 MB) atomically, then tell the other side
//   burst N             N rounds of: a new 100 KB photo, then the currency C<i>; prints "burst i" after each
//   show                print the current settings and photo
//
// The container root comes from WORMHOLE_CONTAINER_ROOT (or XDG_DATA_HOME, HOME); the bus is the
// session bus unless --bus-address is given.
public import Foundation
import Glibc
import Wormhole

/// The shared theme, stored as its raw string.
public enum Theme: String, Codable, Sendable {
    case light, dark
}

extension GroupDefaults.Keys {
    /// The preferred currency, `EUR` until one is chosen.
    static let currency = GroupDefaults.Key<String>("currency", default: "EUR")
    /// The theme, light until one is chosen.
    static let theme = GroupDefaults.Key<Theme>("theme", default: .light)
}

/// What the writer of a photo tells the other side.
struct PhotoNote: Codable, Sendable {
    var file: String
    var bytes: Int
    var seed: UInt64
    var by: String
}

/// One side of the example.
public final class SettingsSide: Sendable {
    let role: String
    let defaults: GroupDefaults
    let wormhole: MessageCenter
    let photoDirectory: String

    static let photoName = "photo.bin"

    public init(role: String, group: String, busAddress: String?) throws {
        self.role = role
        let address = try busAddress.map(BusAddress.init)
        defaults = try GroupDefaults(applicationGroupIdentifier: GroupIdentifier(group), busAddress: address)
        wormhole = try MessageCenter(
            applicationGroupIdentifier: GroupIdentifier(group), directory: WormholeDirectoryName("settings"),
            busAddress: address)
        photoDirectory = try wormhole.container.createDirectory(WormholeDirectoryName("Photos"))
    }

    /// Writes a line at once (standard output is often a pipe, where print would buffer).
    func say(_ line: String) {
        FileHandle.standardOutput.write(Data("\(role): \(line)\n".utf8))
    }

    /// Shows the state, starts observing, announces `ready` on standard error, then serves
    /// commands from standard input until it closes.
    public func run() throws -> Never {
        show()
        // The other side's writes only: this side's own are acknowledged by its command.
        let others = ObserverOptions(ignoresOwnPosts: true)
        let currency = try defaults.listen(forKey: GroupDefaults.Keys.currency.name, options: others) { [self] _ in
            say("currency changed to \(defaults[.currency]) by the other side")
        }
        let theme = try defaults.listen(forKey: GroupDefaults.Keys.theme.name, options: others) { [self] _ in
            say("theme changed to \(defaults[.theme].rawValue) by the other side")
        }
        let photos = try wormhole.listen(identifier: "photo", as: PhotoNote.self) { [self] delivery in
            guard case .success(let note) = delivery.result, note.by != role else { return }
            say("photo \(note.seed) from the \(note.by): \(describePhoto())")
        }
        FileHandle.standardError.write(Data("ready\n".utf8))
        let subscriptions: [any SubscriptionHandle] = [currency, theme, photos]
        let reader = Thread { [self] in
            while let line = readLine() {
                do {
                    try perform(line.split(separator: " ").map(String.init))
                } catch {
                    say("error: \(error)")
                }
            }
            withExtendedLifetime(subscriptions) { exit(0) }
        }
        reader.start()
        dispatchMain()
    }

    func show() {
        say("currency \(defaults[.currency]), theme \(defaults[.theme].rawValue), \(describePhoto())")
    }

    func perform(_ words: [String]) throws {
        switch (words.first, words.count) {
        case ("currency", 2):
            defaults[.currency] = words[1]
            say("set currency \(words[1])")
        case ("theme", 2):
            guard let theme = Theme(rawValue: words[1]) else {
                say("error: theme '\(words[1])' is neither light nor dark")
                return
            }
            defaults[.theme] = theme
            say("set theme \(theme.rawValue)")
        case ("photo", 2), ("photo", 3):
            guard let seed = UInt64(words[1]), let bytes = Int(words.count == 3 ? words[2] : "2000000"), bytes >= 24
            else {
                say("error: usage: photo SEED [BYTES ≥ 24]")
                return
            }
            try writePhoto(seed: seed, bytes: bytes)
            say("wrote photo \(seed) (\(bytes) bytes)")
        case ("burst", 2):
            guard let rounds = Int(words[1]), rounds > 0 else {
                say("error: usage: burst N")
                return
            }
            for round in 1...rounds {
                try writePhoto(seed: UInt64(round), bytes: 100_000)
                try defaults.set("C\(round)", for: .currency)
                say("burst \(round)")
            }
        case ("show", 1):
            show()
        default:
            say(
                "error: unknown command '\(words.joined(separator: " "))' (currency X, theme light|dark, photo SEED [BYTES], burst N, show)"
            )
        }
    }

    // MARK: The photo: written atomically, self-checking

    /// Writes the photo to a temporary file in the same directory, then renames it over
    /// `Photos/photo.bin`, and tells the other side. A reader sees the old photo or the new one,
    /// whole, even if this process is killed at any instant.
    func writePhoto(seed: UInt64, bytes: Int) throws {
        let contents = Photo.make(seed: seed, size: bytes)
        let temporary = "\(photoDirectory)/.\(Self.photoName).\(getpid()).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw PhotoError("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var written = 0
        let failed = contents.withUnsafeBytes { buffer -> Int32? in
            while written < buffer.count {
                let result = write(fd, buffer.baseAddress! + written, buffer.count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                written += result
            }
            return nil
        }
        close(fd)
        if let failed {
            unlink(temporary)
            throw PhotoError("cannot write \(temporary): \(String(cString: strerror(failed)))")
        }
        guard rename(temporary, "\(photoDirectory)/\(Self.photoName)") == 0 else {
            throw PhotoError("cannot rename \(temporary): \(String(cString: strerror(errno)))")
        }
        try wormhole.passMessage(
            PhotoNote(file: "Photos/\(Self.photoName)", bytes: bytes, seed: seed, by: role), identifier: "photo")
    }

    /// What is on disk now: `photo 7 (2000000 bytes, intact)`, `no photo`, or what is wrong.
    func describePhoto() -> String {
        guard let data = FileManager.default.contents(atPath: "\(photoDirectory)/\(Self.photoName)") else {
            return "no photo"
        }
        switch Photo.check(data) {
        case .some(let seed): return "photo \(seed) (\(data.count) bytes, intact)"
        case .none: return "photo CORRUPT (\(data.count) bytes)"
        }
    }
}

struct PhotoError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A stand-in for a JPEG that checks itself: the magic `WHPHOTO1`, the seed, pseudo-random bytes
/// from the seed, and the FNV-1a 64-bit hash of everything before it.
public enum Photo {
    static let magic = Array("WHPHOTO1".utf8)

    public static func make(seed: UInt64, size: Int) -> [UInt8] {
        var bytes = magic
        bytes.reserveCapacity(size)
        withUnsafeBytes(of: seed.littleEndian) { bytes.append(contentsOf: $0) }
        var state = seed | 1
        while bytes.count < size - 8 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            bytes.append(UInt8(truncatingIfNeeded: state))
        }
        withUnsafeBytes(of: fnv1a(bytes).littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// The seed of an intact photo; nil when it is torn, truncated or not a photo.
    public static func check(_ data: Data) -> UInt64? {
        let bytes = [UInt8](data)
        guard bytes.count >= 24, Array(bytes[0..<8]) == magic else { return nil }
        let body = bytes[..<(bytes.count - 8)]
        let stored = bytes[(bytes.count - 8)...].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard stored == fnv1a(body) else { return nil }
        return bytes[8..<16].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    static func fnv1a(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash
    }
}

/// `--group G [--bus-address A]` from the command line, or the usage line and exit 64.
public func settingsMain(role: String) -> Never {
    let arguments = CommandLine.arguments
    func option(_ name: String) -> String? {
        guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
        return arguments[index + 1]
    }
    guard let group = option("--group") else {
        FileHandle.standardError.write(Data("usage: settings-\(role) --group GROUP [--bus-address ADDRESS]\n".utf8))
        exit(64)
    }
    do {
        try SettingsSide(role: role, group: group, busAddress: option("--bus-address")).run()
    } catch {
        FileHandle.standardError.write(Data("settings-\(role): \(error)\n".utf8))
        exit(1)
    }
}

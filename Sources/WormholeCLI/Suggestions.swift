import FoundationEssentials
import Glibc
import Wormhole

/// The Levenshtein distance between two strings, counted in Unicode scalars.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.unicodeScalars)
    let b = Array(b.unicodeScalars)
    if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}

/// The candidate nearest to `word` when it is near enough to be a typo of it (at most 2 edits,
/// or a third of the word's length for long words); the first in sorted order on a tie.
func nearest(to word: String, in candidates: [String]) -> String? {
    let limit = max(2, word.unicodeScalars.count / 3)
    var best: (name: String, distance: Int)?
    for candidate in candidates.sorted() where candidate != word {
        let distance = editDistance(word, candidate)
        if distance <= limit && distance < (best?.distance ?? .max) { best = (candidate, distance) }
    }
    return best?.name
}

/// The names of the entries of a directory (empty when it cannot be listed).
private func entries(of path: String) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
}

private func exists(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0
}

/// Why a wormhole has nothing to show, for an error line: the first part of its path that is
/// missing (container, then directory), with the nearest existing group or directory; or, for
/// an identifier, the nearest stored identifier. `nil` when the wormhole's directory exists and
/// no identifier was asked for.
func absence(in wormhole: MessageCenter, identifier: String? = nil) -> String? {
    let container = wormhole.container
    let group = container.group.rawValue
    guard exists(container.path) else {
        var text =
            "the group container \(container.path) does not exist (nothing was ever stored for group '\(group)' under \(container.root))"
        let groups = entries(of: container.root).filter { !$0.hasPrefix(".") }
        if let near = nearest(to: group, in: groups) { text += "; did you mean --group \(near)?" }
        return text
    }
    let directory = wormhole.directory.rawValue
    let directoryPath = container.directoryPath(wormhole.directory)
    guard exists(directoryPath) else {
        var text = "the directory \(directoryPath) does not exist (nothing was ever stored in directory '\(directory)')"
        let directories = entries(of: container.path).filter { !$0.hasPrefix(".") && $0 != "Preferences" }
        if let near = nearest(to: directory, in: directories) { text += "; did you mean --directory \(near)?" }
        return text
    }
    guard let identifier else { return nil }
    let stored = ((try? wormhole.transiting.storedIdentifiers()) ?? []).map(\.rawValue)
    if let near = nearest(to: identifier, in: stored) { return "did you mean '\(near)'?" }
    if stored.isEmpty { return "the wormhole holds no messages" }
    let which = directory == "wormhole" ? "" : " --directory \(directory)"
    return
        "\(stored.count == 1 ? "1 identifier is" : "\(stored.count) identifiers are") stored: wormholectl list --group \(group)\(which)"
}

/// A match rule as the bus daemon reports it (`GetAllMatchRules`): its keys and values, and
/// whether it would deliver a given `Posted` signal. Used by `wormholectl doctor` to find the
/// connections listening for a name; the daemon's own matching is the reference.
struct RuleText {
    /// The rule's keys and unquoted values, in order.
    var pairs: [(key: String, value: String)]

    /// Parses `key='value',key2=value2`: quoted parts are literal, `\'` outside quotes is `'`.
    init(_ text: String) {
        pairs = []
        var key = ""
        var value = ""
        var readingValue = false
        var quoted = false
        var characters = Array(text)[...]
        func finish() {
            if !key.isEmpty { pairs.append((key.trimmingSpaces, value)) }
            key = ""
            value = ""
            readingValue = false
        }
        while let character = characters.popFirst() {
            if !readingValue {
                if character == "=" { readingValue = true } else if character != "," { key.append(character) }
                continue
            }
            if character == "'" {
                quoted.toggle()
            } else if !quoted && character == "\\" && characters.first == "'" {
                characters.removeFirst()
                value.append("'")
            } else if !quoted && character == "," {
                finish()
            } else {
                value.append(character)
            }
        }
        finish()
    }

    /// Whether the rule delivers a `Posted` signal for `name` as a Wormhole sender emits it (on
    /// `interface`, at `path`, arguments `name` and a state), from any sender, to everyone.
    func delivers(name: String, interface: String, path: String, member: String) -> Bool {
        for (key, value) in pairs {
            switch key {
            case "type": if value != "signal" { return false }
            case "interface": if value != interface { return false }
            case "member": if value != member { return false }
            case "path": if value != path { return false }
            case "path_namespace":
                if !(value == "/" || path == value || path.hasPrefix(value + "/")) { return false }
            case "destination": return false  // a broadcast signal has no destination
            case "arg0": if value != name { return false }
            case "arg0path": if !Self.pathRelated(name, value) { return false }
            case "arg0namespace": if !(name == value || name.hasPrefix(value + ".")) { return false }
            case "sender", "eavesdrop": continue  // any sender may post; eavesdropping adds, never removes
            default:
                // arg1… are the state (a number, never matched by a string rule) or absent.
                if key.hasPrefix("arg") { return false }
            }
        }
        return true
    }

    /// The `argNpath` relation of the D-Bus specification: equal, or one is a prefix of the
    /// other that ends with `/`.
    static func pathRelated(_ argument: String, _ rule: String) -> Bool {
        argument == rule || (rule.hasSuffix("/") && argument.hasPrefix(rule))
            || (argument.hasSuffix("/") && rule.hasPrefix(argument))
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var text = Substring(self)
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        return String(text)
    }
}

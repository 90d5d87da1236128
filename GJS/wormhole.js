// SPDX-License-Identifier: MIT
/**
 * Wormhole for GJS: observe Darwin-style notifications, listen to mailboxes, read and observe
 * shared defaults, receive transient messages and post, as contract 1.3 of the Wormhole project
 * says, from a `gjs -m` program or a GNOME Shell 45+ extension.
 *
 * One ES module, no binaries: the bus through `Gio.DBusConnection`, the files through `Gio.File`.
 * What needs `flock(2)` (storing a mailbox message, writing shared defaults, appending to a
 * journal), which Gio 2.74 cannot take, goes through the `wormhole` command (`Gio.Subprocess`).
 * This module never rings the doorbell and is never rung (contract section 9).
 *
 * The first program:
 *
 *     import {WormholeBus} from './wormhole.js';
 *     const bus = WormholeBus.connect();                 // DBUS_SESSION_BUS_ADDRESS, own connection
 *     const sub = bus.listen({group: 'group.com.example.lines', directory: 'lines',
 *         identifiers: ['toShell']}, d => print(d.identifier, d.text));
 *     await sub.ready;                                   // the match rules are active
 *
 * @module wormhole
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

/** The object path of every Wormhole signal. */
export const OBJECT_PATH = '/org/wormhole/Notify1';
/** The interface of hand-typed triggers (and the prefix of every bucket interface). */
export const PLAIN_INTERFACE = 'org.wormhole.Notify1';
/** The longest notification name, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 900;
/** The bus daemon's longest match rule, in bytes. */
export const MAX_RULE_BYTES = 1024;
/** The largest transient message, in bytes of compact JSON. */
export const MAX_TRANSIENT_BYTES = 64 * 1024;
/** The default largest stored message a reader accepts. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** How deep JSON may nest before a reader refuses it (the Swift suite reader's limit). */
export const MAX_JSON_DEPTH = 512;
/** The bound of every call to the bus, in milliseconds. */
export const CALL_TIMEOUT_MS = 5000;
/** The directory name reserved for shared defaults. */
export const PREFERENCES = 'Preferences';

const BUS_NAME = 'org.freedesktop.DBus';
const BUS_PATH = '/org/freedesktop/DBus';
const BUS_INTERFACE = 'org.freedesktop.DBus';
const INTEGER_TYPES = 'ynqiuxt';
const encoder = new TextEncoder();
const strictDecoder = new TextDecoder('utf-8', {fatal: true});

/** An error of this module; `code` says which kind, `value` names the bad value when there is one. */
export class WormholeError extends Error {
    /**
     * @param {string} code one of `invalidName`, `invalidIdentifier`, `invalidGroup`,
     *   `invalidDirectory`, `invalidSuite`, `invalidKey`, `invalidMessage`, `unsafeContainer`,
     *   `unreadable`, `tooLarge`, `corruptSuite`, `bus`, `notSent`, `command`
     * @param {string} message a sentence naming the bad value
     * @param {*} [value] the bad value
     */
    constructor(code, message, value = undefined) {
        super(message);
        this.name = 'WormholeError';
        this.code = code;
        this.value = value;
    }
}

// ---------------------------------------------------------------------------------------------
// Names, buckets and match rules (contract section 1)

/**
 * The 32-bit FNV-1a hash of a string's UTF-8 bytes.
 * @param {string} text
 * @returns {number} an unsigned 32-bit integer
 */
export function fnv1a32(text) {
    let hash = 0x811c9dc5;
    for (const byte of encoder.encode(text)) {
        hash ^= byte;
        hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return hash >>> 0;
}

/**
 * The bucket interface a Wormhole sender posts `name` on.
 * @param {string} name
 * @returns {string} `org.wormhole.Notify1.B` + four upper-case hex digits
 */
export function bucketInterface(name) {
    const low = (fnv1a32(name) & 0xffff).toString(16).toUpperCase().padStart(4, '0');
    return `${PLAIN_INTERFACE}.B${low}`;
}

/**
 * Quotes a value for a match rule: `'…'`, each `'` written as `'\''` (a backslash stays literal).
 * @param {string} value
 * @returns {string}
 */
export function quoteRuleValue(value) {
    return `'${value.replaceAll("'", "'\\''")}'`;
}

/**
 * The match rule of an exact name on one interface.
 * @param {string} name
 * @param {string} iface
 * @param {string} [member]
 * @returns {string}
 */
export function exactRule(name, iface, member = 'Posted') {
    return `type='signal',interface=${quoteRuleValue(iface)},member=${quoteRuleValue(member)},` +
        `arg0=${quoteRuleValue(name)}`;
}

/**
 * The match rule of every name below a prefix that ends in `/`.
 * @param {string} prefix
 * @returns {string}
 */
export function prefixRule(prefix) {
    return `type='signal',path='${OBJECT_PATH}',member='Posted',arg0path=${quoteRuleValue(prefix)}`;
}

function shown(value) {
    const text = String(value);
    return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text);
}

/**
 * Checks a notification name (1 to 900 bytes of UTF-8, no NUL, exact-name rule at most 1024 bytes).
 * @param {string} name
 * @returns {string} the name
 * @throws {WormholeError} `invalidName`, naming it
 */
export function validateName(name) {
    if (typeof name !== 'string')
        throw new WormholeError('invalidName', `notification name ${shown(name)} is not a string`, name);
    if (name.isWellFormed && !name.isWellFormed())
        throw new WormholeError('invalidName', `notification name ${shown(name)} is not valid UTF-8`, name);
    const bytes = encoder.encode(name).length;
    if (bytes === 0)
        throw new WormholeError('invalidName', 'notification name is empty (it must be 1 to 900 bytes)', name);
    if (bytes > MAX_NAME_BYTES) {
        throw new WormholeError('invalidName',
            `notification name ${shown(name)} is ${bytes} bytes, longer than the limit of ${MAX_NAME_BYTES}`, name);
    }
    if (name.includes('\0'))
        throw new WormholeError('invalidName', `notification name ${shown(name)} contains a NUL byte`, name);
    if (/[\uD800-\uDFFF]/.test(name.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, '')))
        throw new WormholeError('invalidName', `notification name ${shown(name)} is not valid UTF-8`, name);
    const rule = encoder.encode(exactRule(name, bucketInterface(name))).length;
    if (rule > MAX_RULE_BYTES) {
        throw new WormholeError('invalidName', `notification name ${shown(name)} cannot be observed: its match ` +
            `rule would be ${rule} bytes, and the bus daemon accepts at most ${MAX_RULE_BYTES}`, name);
    }
    return name;
}

/**
 * Checks a prefix: a valid name that ends in `/`.
 * @param {string} prefix
 * @returns {string}
 */
export function validatePrefix(prefix) {
    validateName(prefix);
    if (!prefix.endsWith('/'))
        throw new WormholeError('invalidName', `prefix ${shown(prefix)} does not end in "/"`, prefix);
    return prefix;
}

const COMPONENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

function validateComponent(kind, code, value, limit) {
    if (typeof value !== 'string' || !COMPONENT.test(value) || value.length > limit) {
        throw new WormholeError(code, `${kind} ${shown(value)} is invalid: it must be 1 to ${limit} bytes of ` +
            'A-Z a-z 0-9 . _ - not starting with "."', value);
    }
    return value;
}

/** @param {string} group @returns {string} the group, checked (contract section 2) */
export function validateGroup(group) {
    return validateComponent('group identifier', 'invalidGroup', group, 255);
}

/** @param {string} directory @returns {string} a wormhole directory name, checked (not `Preferences`) */
export function validateDirectory(directory) {
    validateComponent('directory', 'invalidDirectory', directory, 255);
    if (directory === PREFERENCES) {
        throw new WormholeError('invalidDirectory',
            `directory "${PREFERENCES}" is reserved for shared defaults`, directory);
    }
    return directory;
}

/** @param {string} identifier @returns {string} a message identifier, checked */
export function validateIdentifier(identifier) {
    return validateComponent('identifier', 'invalidIdentifier', identifier, 200);
}

/** @param {string} suite @returns {string} a suite name, checked */
export function validateSuite(suite) {
    return validateComponent('suite', 'invalidSuite', suite, 200);
}

/**
 * The notification name of a mailbox.
 * @param {string} group @param {string} directory @param {string} identifier
 * @returns {string} `<group>/<directory>/<identifier>`
 */
export function mailboxName(group, directory, identifier) {
    return `${validateGroup(group)}/${validateDirectory(directory)}/${validateIdentifier(identifier)}`;
}

/**
 * The notification name of a shared-defaults key (checked as a name).
 * @param {string} group @param {string} suite @param {string} key
 * @returns {string} `<group>/Preferences/<suite>/<key>`
 */
export function defaultsKeyName(group, suite, key) {
    if (typeof key !== 'string' || key.length === 0 || key.includes('\0'))
        throw new WormholeError('invalidKey', `key ${shown(key)} is invalid: it must be 1 or more bytes without NUL`, key);
    const name = `${validateGroup(group)}/${PREFERENCES}/${validateSuite(suite)}/${key}`;
    try {
        return validateName(name);
    } catch (e) {
        throw new WormholeError('invalidKey', `key ${shown(key)} is invalid: ${e.message}`, key);
    }
}

// ---------------------------------------------------------------------------------------------
// Strict JSON (RFC 8259) with byte offsets, lossless numbers and a depth limit

/** A JSON number a JS number cannot hold as written (`1e400`); `source` is the literal. */
export class RawNumber {
    /** @param {string} source */
    constructor(source) {
        this.source = source;
    }

    /** @returns {number} the nearest JS number (maybe ±Infinity) */
    valueOf() {
        return Number(this.source);
    }

    /** @returns {string} */
    toString() {
        return this.source;
    }
}

/** A JSON text that does not parse; `offset` is the byte offset of the fault. */
export class JSONSyntaxError extends Error {
    constructor(message, offset) {
        super(`${message} at byte offset ${offset}`);
        this.name = 'JSONSyntaxError';
        this.offset = offset;
    }
}

/**
 * Parses one RFC 8259 JSON text strictly. Integers that a JS number holds exactly are numbers,
 * larger ones `BigInt`; other numbers are JS numbers unless that loses the value's magnitude
 * (`1e400`), then a {@link RawNumber}. Duplicate keys: the last wins.
 * @param {string} text
 * @param {object} [options]
 * @param {number} [options.maxDepth] nesting limit (default {@link MAX_JSON_DEPTH})
 * @param {function(string, boolean): *} [options.number] maps a literal and whether it is an
 *   integer to a value, instead of the rule above
 * @returns {*}
 * @throws {JSONSyntaxError}
 */
export function parseJSON(text, {maxDepth = MAX_JSON_DEPTH, number = null} = {}) {
    let i = 0;
    const fail = (what, at = i) => {
        throw new JSONSyntaxError(what, encoder.encode(text.slice(0, at)).length);
    };
    const ws = () => {
        for (;;) {
            const c = text.charCodeAt(i);
            if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d)
                i++;
            else
                return;
        }
    };
    const numberRe = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
    const toNumber = (src, integer) => {
        if (number)
            return number(src, integer);
        if (integer) {
            const n = Number(src);
            return Number.isSafeInteger(n) ? n : BigInt(src);
        }
        const n = Number(src);
        if (!Number.isFinite(n))
            return new RawNumber(src);
        if (n === 0 && /[1-9]/.test(src.replace(/[eE].*$/, '')))
            return new RawNumber(src);
        return n;
    };
    const string = () => {
        i++; // opening quote
        let out = '';
        let start = i;
        for (;;) {
            if (i >= text.length)
                fail('unterminated string');
            const c = text.charCodeAt(i);
            if (c === 0x22) {
                out += text.slice(start, i);
                i++;
                return out;
            }
            if (c < 0x20)
                fail('control character in a string');
            if (c === 0x5c) {
                out += text.slice(start, i);
                const e = text[i + 1];
                const simple = {'"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t'}[e];
                if (simple !== undefined) {
                    out += simple;
                    i += 2;
                } else if (e === 'u') {
                    const hex = text.slice(i + 2, i + 6);
                    if (!/^[0-9A-Fa-f]{4}$/.test(hex))
                        fail('bad \\u escape');
                    out += String.fromCharCode(parseInt(hex, 16));
                    i += 6;
                } else {
                    fail('bad escape');
                }
                start = i;
                continue;
            }
            i++;
        }
    };
    const value = depth => {
        if (depth > maxDepth)
            fail(`nested deeper than ${maxDepth} levels`);
        ws();
        const c = text[i];
        if (c === '{') {
            i++;
            const obj = {};
            ws();
            if (text[i] === '}') {
                i++;
                return obj;
            }
            for (;;) {
                ws();
                if (text[i] !== '"')
                    fail('expected a string key');
                const key = string();
                ws();
                if (text[i] !== ':')
                    fail('expected ":"');
                i++;
                const v = value(depth + 1);
                Object.defineProperty(obj, key, {value: v, enumerable: true, writable: true, configurable: true});
                ws();
                if (text[i] === ',') {
                    i++;
                    continue;
                }
                if (text[i] === '}') {
                    i++;
                    return obj;
                }
                fail('expected "," or "}"');
            }
        }
        if (c === '[') {
            i++;
            const arr = [];
            ws();
            if (text[i] === ']') {
                i++;
                return arr;
            }
            for (;;) {
                arr.push(value(depth + 1));
                ws();
                if (text[i] === ',') {
                    i++;
                    continue;
                }
                if (text[i] === ']') {
                    i++;
                    return arr;
                }
                fail('expected "," or "]"');
            }
        }
        if (c === '"')
            return string();
        for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
            if (text.startsWith(word, i)) {
                i += word.length;
                return v;
            }
        }
        numberRe.lastIndex = i;
        const m = numberRe.exec(text);
        if (m && m[0].length > 0 && m[0] !== '-') {
            i += m[0].length;
            return toNumber(m[0], m[1] === undefined && m[2] === undefined);
        }
        if (i >= text.length)
            fail('unexpected end of the text');
        return fail(`unexpected character ${JSON.stringify(text[i])}`);
    };
    const result = value(1);
    ws();
    if (i !== text.length)
        fail('text after the JSON value');
    return result;
}

/**
 * Writes a value as compact JSON, keeping `BigInt` and {@link RawNumber} exactly.
 * @param {*} value
 * @returns {string}
 */
export function stringifyJSON(value) {
    if (typeof value === 'bigint')
        return value.toString();
    if (value instanceof RawNumber)
        return value.source;
    if (Array.isArray(value))
        return `[${value.map(v => v === undefined ? 'null' : stringifyJSON(v)).join(',')}]`;
    if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
        const parts = [];
        for (const [k, v] of Object.entries(value)) {
            if (v !== undefined && typeof v !== 'function')
                parts.push(`${JSON.stringify(k)}:${stringifyJSON(v)}`);
        }
        return `{${parts.join(',')}}`;
    }
    return JSON.stringify(value);
}

/**
 * Decodes UTF-8 strictly: no byte-order mark, no invalid sequence.
 * @param {Uint8Array} bytes
 * @returns {string}
 * @throws {JSONSyntaxError} naming the byte offset of the fault
 */
export function decodeUTF8(bytes) {
    if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
        throw new JSONSyntaxError('a byte-order mark', 0);
    try {
        return strictDecoder.decode(bytes);
    } catch (_) {
        // The longest valid prefix ends at the first bad byte.
        let lo = 0, hi = bytes.length;
        while (lo < hi) {
            const mid = (lo + hi + 1) >> 1;
            try {
                strictDecoder.decode(bytes.subarray(0, mid));
                lo = mid;
            } catch (_e) {
                hi = mid - 1;
            }
        }
        throw new JSONSyntaxError('invalid UTF-8', lo);
    }
}

/**
 * Decodes bytes as one JSON text the way a Wormhole reader must: no byte-order mark, valid UTF-8.
 * @param {Uint8Array} bytes
 * @returns {{text: string, value: *}}
 * @throws {JSONSyntaxError}
 */
export function decodeJSONBytes(bytes) {
    const text = decodeUTF8(bytes);
    return {text, value: parseJSON(text)};
}

// ---------------------------------------------------------------------------------------------
// Containers and files (contract section 2)

/**
 * The root of the group containers: `$WORMHOLE_CONTAINER_ROOT`, else
 * `$XDG_DATA_HOME/group-containers`, else `$HOME/.local/share/group-containers` (inside a
 * Flatpak sandbox the host's default root when it is exposed, as contract section 8 says).
 * @returns {string}
 */
export function containerRoot() {
    const explicit = GLib.getenv('WORMHOLE_CONTAINER_ROOT');
    if (explicit)
        return explicit;
    const home = GLib.getenv('HOME') || GLib.get_home_dir();
    const hostDefault = GLib.build_filenamev([home, '.local', 'share', 'group-containers']);
    if (GLib.file_test('/.flatpak-info', GLib.FileTest.EXISTS) && GLib.file_test(hostDefault, GLib.FileTest.IS_DIR))
        return hostDefault;
    const data = GLib.getenv('XDG_DATA_HOME');
    if (data && data.startsWith('/'))
        return GLib.build_filenamev([data, 'group-containers']);
    return hostDefault;
}

let myUid = null;
function uid() {
    if (myUid === null)
        myUid = Gio.Credentials.new().get_unix_user();
    return myUid;
}

const INFO = 'standard::type,standard::is-symlink,standard::size,unix::uid,unix::mode,unix::inode,unix::device';

/**
 * Checks a directory the library reads through: not a symlink, ours, not writable by others.
 * @param {string} path
 * @returns {boolean} false when it does not exist
 * @throws {WormholeError} `unsafeContainer`
 */
function checkDirectory(path) {
    let info;
    try {
        info = Gio.File.new_for_path(path).query_info(INFO, Gio.FileQueryInfoFlags.NOFOLLOW_SYMLINKS, null);
    } catch (e) {
        if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.NOT_FOUND))
            return false;
        throw new WormholeError('unreadable', `cannot inspect ${path}: ${e.message}`, path);
    }
    checkInfo(path, info, Gio.FileType.DIRECTORY);
    return true;
}

function checkInfo(path, info, type) {
    if (info.get_is_symlink() || info.get_file_type() === Gio.FileType.SYMBOLIC_LINK)
        throw new WormholeError('unsafeContainer', `${path} is a symbolic link; it is not followed`, path);
    if (info.get_file_type() !== type) {
        throw new WormholeError('unsafeContainer',
            `${path} is not a ${type === Gio.FileType.DIRECTORY ? 'directory' : 'regular file'}`, path);
    }
    const owner = info.get_attribute_uint32('unix::uid');
    if (owner !== uid())
        throw new WormholeError('unsafeContainer', `${path} is owned by uid ${owner}, not by this user`, path);
    const mode = info.get_attribute_uint32('unix::mode');
    if (mode & 0o022) {
        throw new WormholeError('unsafeContainer',
            `${path} is writable by group or others (mode ${(mode & 0o7777).toString(8)})`, path);
    }
}

/**
 * Reads a file below a group container without following a symlink anywhere from the
 * container down, refusing one that is larger than `maxBytes`.
 * @param {string} root the container root
 * @param {string[]} components group, directory, file name
 * @param {number} maxBytes
 * @returns {Uint8Array|null} null when the file (or a directory above it) does not exist
 * @throws {WormholeError}
 */
export function readContainerFile(root, components, maxBytes) {
    let path = root;
    for (const dir of components.slice(0, -1)) {
        path = GLib.build_filenamev([path, dir]);
        if (!checkDirectory(path))
            return null;
    }
    path = GLib.build_filenamev([path, components[components.length - 1]]);
    const file = Gio.File.new_for_path(path);
    let before;
    try {
        before = file.query_info(INFO, Gio.FileQueryInfoFlags.NOFOLLOW_SYMLINKS, null);
    } catch (e) {
        if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.NOT_FOUND))
            return null;
        throw new WormholeError('unreadable', `cannot read ${path}: ${e.message}`, path);
    }
    checkInfo(path, before, Gio.FileType.REGULAR);
    let stream;
    try {
        stream = file.read(null);
    } catch (e) {
        if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.NOT_FOUND))
            return null;
        throw new WormholeError('unreadable', `cannot read ${path}: ${e.message}`, path);
    }
    try {
        const opened = stream.query_info(INFO, null);
        if (opened.get_attribute_uint64('unix::inode') !== before.get_attribute_uint64('unix::inode') ||
            opened.get_attribute_uint32('unix::device') !== before.get_attribute_uint32('unix::device')) {
            // Replaced between the check and the open: check what was opened instead.
            checkInfo(path, opened, Gio.FileType.REGULAR);
        }
        const size = opened.get_size();
        if (size > maxBytes) {
            throw new WormholeError('tooLarge',
                `${path} is ${size} bytes, larger than the limit of ${maxBytes}`, path);
        }
        const chunks = [];
        let total = 0;
        for (;;) {
            const bytes = stream.read_bytes(Math.min(1 << 20, maxBytes + 1 - total), null);
            const n = bytes.get_size();
            if (n === 0)
                break;
            chunks.push(bytes.toArray());
            total += n;
            if (total > maxBytes) {
                throw new WormholeError('tooLarge',
                    `${path} is more than ${maxBytes} bytes, the limit`, path);
            }
        }
        const out = new Uint8Array(total);
        let at = 0;
        for (const c of chunks) {
            out.set(c, at);
            at += c.length;
        }
        return out;
    } catch (e) {
        if (e instanceof WormholeError)
            throw e;
        throw new WormholeError('unreadable', `cannot read ${path}: ${e.message}`, path);
    } finally {
        stream.close(null);
    }
}

function sameBytes(a, b) {
    if (!a || !b || a.length !== b.length)
        return false;
    for (let i = 0; i < a.length; i++) {
        if (a[i] !== b[i])
            return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Shared defaults (contract section 5): read-only

/**
 * A typed value of a suite: `type` is one of `int`, `double`, `bool`, `string`, `date`, `data`,
 * `url`, `array`, `dictionary`, `unknown` (an object whose only key is a `$` tag not known here).
 */
export class TypedValue {
    /** @param {string} type @param {*} value @param {*} json the value as stored */
    constructor(type, value, json) {
        this.type = type;
        this.value = value;
        this.json = json;
    }
}

class NumberLiteral {
    constructor(source, integer) {
        this.source = source;
        this.integer = integer;
    }
}

function typed(raw) {
    if (raw instanceof NumberLiteral) {
        if (raw.integer) {
            const n = Number(raw.source);
            return new TypedValue('int', Number.isSafeInteger(n) ? n : BigInt(raw.source), raw.source);
        }
        return new TypedValue('double', Number(raw.source), raw.source);
    }
    if (typeof raw === 'string' || typeof raw === 'boolean')
        return new TypedValue(typeof raw === 'string' ? 'string' : 'bool', raw, raw);
    if (raw === null)
        return new TypedValue('unknown', null, null);
    if (Array.isArray(raw)) {
        const items = raw.map(typed);
        return new TypedValue('array', items.map(t => t.value), items.map(t => t.json));
    }
    const keys = Object.keys(raw);
    const json = plainJSON(raw);
    if (keys.length === 1 && keys[0].startsWith('$')) {
        const tag = keys[0];
        const inner = raw[tag];
        if (tag === '$date' && inner instanceof NumberLiteral)
            return new TypedValue('date', new Date(Number(inner.source) * 1000), json);
        if (tag === '$data' && typeof inner === 'string')
            return new TypedValue('data', GLib.base64_decode(inner), json);
        if (tag === '$url' && typeof inner === 'string')
            return new TypedValue('url', inner, json);
        if (tag === '$double' && ['nan', 'inf', '-inf'].includes(inner))
            return new TypedValue('double', {nan: NaN, inf: Infinity, '-inf': -Infinity}[inner], json);
        if (tag === '$dict' && inner !== null && typeof inner === 'object' && !Array.isArray(inner) &&
            !(inner instanceof NumberLiteral))
            return dictionary(inner, json);
        return new TypedValue('unknown', json, json);
    }
    return dictionary(raw, json);
}

function dictionary(raw, json) {
    const out = {};
    for (const [k, v] of Object.entries(raw))
        out[k] = typed(v).value;
    return new TypedValue('dictionary', out, json);
}

function plainJSON(raw) {
    if (raw instanceof NumberLiteral) {
        if (raw.integer) {
            const n = Number(raw.source);
            return Number.isSafeInteger(n) ? n : BigInt(raw.source);
        }
        const n = Number(raw.source);
        return Number.isFinite(n) ? n : new RawNumber(raw.source);
    }
    if (Array.isArray(raw))
        return raw.map(plainJSON);
    if (raw !== null && typeof raw === 'object') {
        const out = {};
        for (const [k, v] of Object.entries(raw))
            out[k] = plainJSON(v);
        return out;
    }
    return raw;
}

/** One read of a shared-defaults suite: an immutable snapshot. Reading never changes the disk. */
export class DefaultsSnapshot {
    /**
     * @param {string} path the suite file
     * @param {Uint8Array|null} bytes its bytes, null when there is none
     */
    constructor(path, bytes) {
        this.path = path;
        this.bytes = bytes;
        this._raw = {};
        if (bytes === null)
            return;
        if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
            throw new WormholeError('corruptSuite', `suite ${path} is not a JSON object: a byte-order mark at byte offset 0`, path);
        let text;
        try {
            text = decodeUTF8(bytes);
        } catch (e) {
            throw new WormholeError('corruptSuite', `suite ${path} is not a JSON object: ${e.message}`, path);
        }
        let raw;
        try {
            raw = parseJSON(text, {number: (src, integer) => new NumberLiteral(src, integer)});
        } catch (e) {
            throw new WormholeError('corruptSuite', `suite ${path} is not a JSON object: ${e.message}`, path);
        }
        if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || raw instanceof NumberLiteral)
            throw new WormholeError('corruptSuite', `suite ${path} is not a JSON object (at byte offset 0)`, path);
        this._raw = raw;
    }

    /** @returns {string[]} the keys, sorted */
    keys() {
        return Object.keys(this._raw).sort();
    }

    /** @param {string} key @returns {boolean} */
    has(key) {
        return Object.prototype.hasOwnProperty.call(this._raw, key);
    }

    /**
     * The typed value of a key.
     * @param {string} key
     * @returns {TypedValue|null} null when absent
     */
    typed(key) {
        return this.has(key) ? typed(this._raw[key]) : null;
    }

    /**
     * The decoded value (Int: number or BigInt, Double: number, Date: `Date`, Data: `Uint8Array`,
     * URL: string, arrays and dictionaries decoded; an unknown value: its JSON).
     * @param {string} key
     * @returns {*} undefined when absent
     */
    get(key) {
        return this.has(key) ? typed(this._raw[key]).value : undefined;
    }

    /**
     * The value as stored in the file, as JSON (`BigInt`/{@link RawNumber} for numbers a JS
     * number cannot hold); {@link stringifyJSON} writes it back as it was.
     * @param {string} key
     * @returns {*} undefined when absent
     */
    json(key) {
        return this.has(key) ? plainJSON(this._raw[key]) : undefined;
    }

    _typedGetter(key, type) {
        const t = this.typed(key);
        if (t === null)
            return null;
        if (t.type !== type)
            throw new WormholeError('typeMismatch', `key ${shown(key)} holds a ${t.type}, not a ${type}`, key);
        return t.value;
    }

    /** @param {string} key @returns {string|null} @throws {WormholeError} `typeMismatch` */
    string(key) {
        return this._typedGetter(key, 'string');
    }

    /** @param {string} key @returns {number|bigint|null} */
    integer(key) {
        return this._typedGetter(key, 'int');
    }

    /** @param {string} key @returns {number|null} a Double (an Int is converted, as UserDefaults does) */
    double(key) {
        const t = this.typed(key);
        if (t !== null && t.type === 'int')
            return Number(t.value);
        return this._typedGetter(key, 'double');
    }

    /** @param {string} key @returns {boolean|null} */
    bool(key) {
        return this._typedGetter(key, 'bool');
    }

    /** @param {string} key @returns {Date|null} */
    date(key) {
        return this._typedGetter(key, 'date');
    }

    /** @param {string} key @returns {Uint8Array|null} */
    data(key) {
        return this._typedGetter(key, 'data');
    }

    /** @param {string} key @returns {string|null} */
    url(key) {
        return this._typedGetter(key, 'url');
    }

    /** @param {string} key @returns {Array|null} */
    array(key) {
        return this._typedGetter(key, 'array');
    }

    /** @param {string} key @returns {object|null} */
    dictionary(key) {
        return this._typedGetter(key, 'dictionary');
    }

    /** @returns {object} key → decoded value */
    toObject() {
        const out = {};
        for (const k of this.keys())
            out[k] = this.get(k);
        return out;
    }

    /** @param {string} key @returns {string|undefined} the value's compact JSON as stored */
    jsonText(key) {
        return this.has(key) ? stringifyJSON(this.json(key)) : undefined;
    }
}

/**
 * Reads a shared-defaults suite (never writes, never moves a corrupt file aside).
 * @param {object} options
 * @param {string} options.group
 * @param {string} [options.suite] default: the group identifier
 * @param {string} [options.root] default: {@link containerRoot}
 * @returns {DefaultsSnapshot}
 * @throws {WormholeError} an invalid group or suite, an unsafe container, a corrupt suite
 */
export function readDefaults({group, suite = undefined, root = undefined}) {
    validateGroup(group);
    suite = suiteOf(group, suite);
    root = root ?? containerRoot();
    const bytes = readContainerFile(root, [group, PREFERENCES, `${suite}.json`], Number.MAX_SAFE_INTEGER);
    return new DefaultsSnapshot(GLib.build_filenamev([root, group, PREFERENCES, `${suite}.json`]), bytes);
}

function suiteOf(group, suite) {
    if (suite === undefined || suite === null) {
        if (group.length > 200) {
            throw new WormholeError('invalidSuite',
                `group ${shown(group)} is longer than 200 bytes and has no default suite: name one`, group);
        }
        return group;
    }
    return validateSuite(suite);
}

/**
 * Reads the message stored in a mailbox.
 * @param {object} options
 * @param {string} options.group
 * @param {string} [options.directory] default `wormhole`
 * @param {string} options.identifier
 * @param {string} [options.root]
 * @param {number} [options.maxBytes] default 64 MiB
 * @returns {{text: string, message: *, bytes: Uint8Array}|null} null when the mailbox is empty
 * @throws {WormholeError}
 */
export function readMessage({group, directory = 'wormhole', identifier, root = undefined,
    maxBytes = DEFAULT_MAX_MESSAGE_BYTES}) {
    mailboxName(group, directory, identifier);
    root = root ?? containerRoot();
    const bytes = readContainerFile(root, [group, directory, `${identifier}.json`], maxBytes);
    if (bytes === null)
        return null;
    const path = GLib.build_filenamev([root, group, directory, `${identifier}.json`]);
    try {
        const {text, value} = decodeJSONBytes(bytes);
        return {text, message: value, bytes};
    } catch (e) {
        throw new WormholeError('invalidMessage', `${path} is not one JSON document: ${e.message}`, path);
    }
}

// ---------------------------------------------------------------------------------------------
// Bus addresses, app ID

/**
 * The socket path of a `unix:path=` bus address (the first one that has it), unescaped.
 * @param {string} address
 * @returns {string|null} null for abstract sockets and other transports
 */
export function socketPathOf(address) {
    for (const entry of address.split(';')) {
        if (!entry.startsWith('unix:'))
            continue;
        for (const pair of entry.slice(5).split(',')) {
            if (pair.startsWith('path='))
                return decodeURIComponent(pair.slice(5));
        }
    }
    return null;
}

/**
 * The app ID of a sandboxed participant (contract section 8): `/.flatpak-info` when present,
 * else the given one, else `WORMHOLE_APP_ID`, else `FLATPAK_ID`.
 * @param {string|null} [given]
 * @returns {string|null}
 */
export function appId(given = null) {
    if (GLib.file_test('/.flatpak-info', GLib.FileTest.EXISTS)) {
        try {
            const kf = new GLib.KeyFile();
            kf.load_from_file('/.flatpak-info', GLib.KeyFileFlags.NONE);
            const name = kf.get_string('Application', 'name');
            if (name)
                return name;
        } catch (_) {}
    }
    return given || GLib.getenv('WORMHOLE_APP_ID') || GLib.getenv('FLATPAK_ID') || null;
}

function callAsync(connection, method, parameters, replyType) {
    return new Promise((resolve, reject) => {
        connection.call(BUS_NAME, BUS_PATH, BUS_INTERFACE, method, parameters,
            replyType ? new GLib.VariantType(replyType) : null, Gio.DBusCallFlags.NONE, CALL_TIMEOUT_MS, null,
            (conn, result) => {
                try {
                    resolve(conn.call_finish(result));
                } catch (e) {
                    reject(e);
                }
            });
    });
}

function readState(params) {
    if (params.n_children() < 2)
        return null;
    const v = params.get_child_value(1);
    const t = v.get_type_string();
    if (t.length !== 1 || !INTEGER_TYPES.includes(t))
        return null;
    let n;
    switch (t) {
    case 'y': n = BigInt(v.get_byte()); break;
    case 'n': n = BigInt(v.get_int16()); break;
    case 'q': n = BigInt(v.get_uint16()); break;
    case 'i': n = BigInt(v.get_int32()); break;
    case 'u': n = BigInt(v.get_uint32()); break;
    default: n = BigInt(v.print(false)); // x, t: exact, past 2^53
    }
    return n < 0n ? null : n;
}

function firstString(params) {
    if (!params || !params.get_type_string().startsWith('(') || params.n_children() < 1)
        return null;
    const v = params.get_child_value(0);
    return v.get_type_string() === 's' ? v.get_string()[0] : null;
}

// ---------------------------------------------------------------------------------------------
// The connection

let stateCounter = 0n;

/**
 * A subscription: `ready` settles once its match rules are active on the bus;
 * `cancel()` removes them.
 */
export class Subscription {
    constructor(bus, rules) {
        this._bus = bus;
        this._rules = rules;
        this.cancelled = false;
        /** @type {Promise<void>} */
        this.ready = null;
    }

    /** Removes the subscription (its rules are removed when no other subscription holds them). */
    cancel() {
        if (this.cancelled)
            return;
        this.cancelled = true;
        this._bus._remove(this);
    }

    // Called by the bus: the signal `Posted` for `name`, or `Message`, or a reconnect.
    _posted(_name, _state, _iface) {}

    _message(_name, _params) {}

    _catchUp() {}

    _cancelled() {}
}

/**
 * One Wormhole participant on a bus: its connection, its match rules and the dispatch of
 * `Posted` and `Message` to subscriptions.
 *
 * By default it opens its own connection to the address (`DBUS_SESSION_BUS_ADDRESS` unless
 * given), with exit-on-close off, and reconnects when the bus comes back: it watches the
 * directory of the bus's socket with a `Gio.FileMonitor` (no polling), re-adds its rules, and
 * gives every subscription one catch-up. In GNOME Shell pass `{connection: Gio.DBus.session}`:
 * the Shell's own session-bus connection, which this module never closes and which does not
 * come back (the Shell ends with the session bus).
 */
export class WormholeBus {
    /**
     * @param {object} [options]
     * @param {string} [options.address] a bus address (default `DBUS_SESSION_BUS_ADDRESS`)
     * @param {Gio.DBusConnection} [options.connection] a connection to use instead (the Shell's)
     * @param {string} [options.appId] the app ID of a sandboxed participant (section 8)
     * @param {function(string): void} [options.onBusLost] called with the address when the bus is lost
     * @param {function(string): void} [options.onBusBack] called when it is back, after the catch-ups
     * @param {string} [options.root] the container root (default {@link containerRoot})
     */
    constructor({address = undefined, connection = undefined, appId: app = null, onBusLost = null,
        onBusBack = null, root = undefined} = {}) {
        this.root = root ?? containerRoot();
        this.onBusLost = onBusLost;
        this.onBusBack = onBusBack;
        this._subs = new Set();
        this._ruleCounts = new Map();
        this._ruleAdds = new Map(); // rule → the AddMatch call in flight
        this._buckets = new Map(); // observed name → its bucket interface
        this._exact = new Map(); // name → Set<Subscription>
        this._messages = new Map(); // name → Set<Subscription>
        this._prefixes = new Map(); // prefix → Set<Subscription>
        this._appId = appId(app);
        this._ownedName = null;
        this._monitor = null;
        this._connecting = false;
        this._retries = 0;
        this._retrySource = 0;
        this._closed = false;
        if (connection) {
            this.address = null;
            this._shared = true;
            this._attach(connection);
        } else {
            this.address = address ?? GLib.getenv('DBUS_SESSION_BUS_ADDRESS');
            if (!this.address)
                throw new WormholeError('bus', 'no bus address: DBUS_SESSION_BUS_ADDRESS is not set and none was given');
            this._shared = false;
            let conn;
            try {
                conn = Gio.DBusConnection.new_for_address_sync(this.address,
                    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
                    Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, null, null);
            } catch (e) {
                throw new WormholeError('bus', `cannot reach the bus at '${this.address}': ${e.message}`, this.address);
            }
            this._attach(conn);
        }
    }

    /**
     * Opens a participant on its own connection (see the constructor for the options).
     * @param {object} [options]
     * @returns {WormholeBus}
     */
    static connect(options = {}) {
        return new WormholeBus(options);
    }

    /** @returns {boolean} whether the connection is up */
    get connected() {
        return this.connection !== null && !this.connection.is_closed();
    }

    _attach(conn) {
        this.connection = conn;
        if (!this._shared)
            conn.set_exit_on_close(false);
        const flags = Gio.DBusSignalFlags.NO_MATCH_RULE;
        // Local dispatch only: the bus-side rules are added by AddMatch (below), escaped properly.
        this._postedId = conn.signal_subscribe(null, null, 'Posted', OBJECT_PATH, null, flags,
            (c, sender, path, iface, member, params) => this._onPosted(iface, params));
        this._messageId = conn.signal_subscribe(null, null, 'Message', OBJECT_PATH, null, flags,
            (c, sender, path, iface, member, params) => this._onMessage(iface, params));
        this._closedId = conn.connect('closed', () => this._onClosed());
    }

    _detach() {
        const conn = this.connection;
        if (!conn)
            return;
        conn.signal_unsubscribe(this._postedId);
        conn.signal_unsubscribe(this._messageId);
        conn.disconnect(this._closedId);
        this.connection = null;
    }

    _onPosted(iface, params) {
        const name = firstString(params);
        if (name === null)
            return; // not a string first argument: dropped (contract section 1)
        if (iface !== PLAIN_INTERFACE && !iface.startsWith(`${PLAIN_INTERFACE}.B`))
            return;
        const state = readState(params);
        const exact = this._exact.get(name);
        if (exact && (iface === PLAIN_INTERFACE || iface === this._buckets.get(name))) {
            for (const sub of [...exact])
                sub._posted(name, state, iface);
        }
        for (const [prefix, subs] of this._prefixes) {
            if (name.startsWith(prefix)) {
                for (const sub of [...subs])
                    sub._posted(name, state, iface);
            }
        }
    }

    _onMessage(iface, params) {
        if (!params || params.n_children() < 1)
            return;
        const name = firstString(params);
        if (name === null)
            return;
        const subs = this._messages.get(name);
        if (!subs || (iface !== PLAIN_INTERFACE && iface !== this._buckets.get(name)))
            return;
        for (const sub of [...subs])
            sub._message(name, params);
    }

    // Rules are reference-counted: two subscriptions of one name share its two rules, and the
    // second waits for the AddMatch of the first (the rule is active once that is answered).
    _addRules(rules) {
        const waits = [];
        for (const rule of rules) {
            const n = this._ruleCounts.get(rule) ?? 0;
            this._ruleCounts.set(rule, n + 1);
            if (n === 0 && this.connected) {
                const added = callAsync(this.connection, 'AddMatch', new GLib.Variant('(s)', [rule]));
                this._ruleAdds.set(rule, added);
                added.then(() => this._ruleAdds.delete(rule), () => this._ruleAdds.delete(rule));
                waits.push(added);
            } else if (this._ruleAdds.has(rule)) {
                waits.push(this._ruleAdds.get(rule));
            }
        }
        return Promise.all(waits).then(() => {});
    }

    _removeRules(rules) {
        for (const rule of rules) {
            const n = this._ruleCounts.get(rule) ?? 0;
            if (n <= 1) {
                this._ruleCounts.delete(rule);
                if (this.connected) {
                    callAsync(this.connection, 'RemoveMatch', new GLib.Variant('(s)', [rule])).catch(() => {});
                }
            } else {
                this._ruleCounts.set(rule, n - 1);
            }
        }
    }

    _register(sub, {exact = [], prefixes = [], messages = []}) {
        const rules = [];
        for (const name of [...exact, ...messages])
            this._buckets.set(name, bucketInterface(name));
        for (const name of exact) {
            rules.push(exactRule(name, bucketInterface(name)), exactRule(name, PLAIN_INTERFACE));
            addTo(this._exact, name, sub);
        }
        for (const prefix of prefixes) {
            rules.push(prefixRule(prefix));
            addTo(this._prefixes, prefix, sub);
        }
        for (const name of messages) {
            rules.push(exactRule(name, bucketInterface(name), 'Message'), exactRule(name, PLAIN_INTERFACE, 'Message'));
            addTo(this._messages, name, sub);
        }
        sub._rules = rules;
        sub._keys = {exact, prefixes, messages};
        this._subs.add(sub);
        sub.ready = this._addRules(rules).catch(e => {
            throw new WormholeError('bus', `cannot add the match rules: ${e.message}`);
        });
        return sub;
    }

    _remove(sub) {
        if (!this._subs.delete(sub))
            return;
        for (const name of sub._keys.exact)
            removeFrom(this._exact, name, sub);
        for (const prefix of sub._keys.prefixes)
            removeFrom(this._prefixes, prefix, sub);
        for (const name of sub._keys.messages)
            removeFrom(this._messages, name, sub);
        for (const name of [...sub._keys.exact, ...sub._keys.messages]) {
            if (!this._exact.has(name) && !this._messages.has(name))
                this._buckets.delete(name);
        }
        this._removeRules(sub._rules);
        sub._cancelled();
    }

    /**
     * Observes notification names (or, with `prefix`, every name below prefixes ending in `/`).
     * The handler gets `{name, state, reason}`: `state` a `BigInt` or null (no state, or a
     * negative or non-integer one), `reason` `posted`, or `catchUp` once per name (per prefix:
     * `name` is the prefix) after each reconnect.
     * @param {string|string[]} names
     * @param {function({name: string, state: bigint|null, reason: string}): void} handler
     * @param {object} [options]
     * @param {boolean} [options.prefix]
     * @returns {Subscription} await its `ready`
     * @throws {WormholeError} an invalid name, before anything is registered
     */
    observe(names, handler, {prefix = false} = {}) {
        names = [...new Set(Array.isArray(names) ? names : [names])];
        if (names.length === 0)
            throw new WormholeError('invalidName', 'no name to observe');
        names.forEach(prefix ? validatePrefix : validateName);
        const sub = new Subscription(this);
        sub._posted = (name, state) => safeCall(handler, {name, state, reason: 'posted'});
        sub._catchUp = () => {
            for (const name of names)
                safeCall(handler, {name, state: null, reason: 'catchUp'});
        };
        return this._register(sub, prefix ? {prefixes: names} : {exact: names});
    }

    /**
     * Listens to mailboxes: on each `Posted` of `<group>/<directory>/<I>` it reads `I.json` and
     * calls `handler({identifier, message, text, reason, state})`; `reason` is `posted`,
     * `stored` (with `stored: true`, once after the rules are active), `catchUp` (after a
     * reconnect, when the file changed meanwhile), `transient` (a `Message` signal, contract
     * section 7) or `cleared` (`message` null: the mailbox is empty). `text` is the JSON as
     * stored, exactly (`message` is its parse: see {@link parseJSON}). A file that cannot be
     * read or decoded calls `onError(error, identifier)` and listening goes on.
     * @param {object} options
     * @param {string} options.group
     * @param {string} [options.directory] default `wormhole`
     * @param {string[]} options.identifiers
     * @param {boolean} [options.stored] deliver the stored messages once the rules are active
     * @param {boolean} [options.everyPost] deliver a post even when the file's bytes are those
     *   last delivered (default: skipped, as contract section 3 allows)
     * @param {boolean} [options.transient] also receive transient messages (default true)
     * @param {boolean} [options.catchUnsignalled] watch the wormhole directory (default true):
     *   a rename onto `I.json` that no `Posted` for I follows within 0.5 s (its sender died
     *   between the two) is delivered as a `catchUp`; while the bus is down, at once. The
     *   directory must exist when listening starts or when a later delivery finds it.
     * @param {number} [options.maxBytes] the largest message read (default 64 MiB)
     * @param {function(Error, string): void} [options.onError]
     * @param {function(object): void} handler
     * @returns {Subscription}
     */
    listen({group, directory = 'wormhole', identifiers, stored = false, everyPost = false, transient = true,
        catchUnsignalled = true, maxBytes = DEFAULT_MAX_MESSAGE_BYTES, onError = null}, handler) {
        if (!Array.isArray(identifiers) || identifiers.length === 0)
            throw new WormholeError('invalidIdentifier', 'no identifier to listen to');
        const byName = new Map();
        for (const id of identifiers)
            byName.set(mailboxName(group, directory, id), id);
        const last = new Map(); // identifier → bytes last delivered (null: cleared)
        const report = onError ?? ((e, id) => printerr(`wormhole: ${id}: ${e.message}`));
        const deliver = (id, reason, state, skipSame) => {
            let read;
            try {
                read = readMessage({group, directory, identifier: id, root: this.root, maxBytes});
            } catch (e) {
                last.delete(id);
                safeCall(report, e, id);
                return;
            }
            if (read === null) {
                // Nothing stored at start, or still empty: no event. A catch-up reports a
                // mailbox emptied meanwhile only when it had delivered a message.
                if (reason === 'stored' || (skipSame && last.has(id) && last.get(id) === null) ||
                    (reason === 'catchUp' && !last.has(id)))
                    return;
                last.set(id, null);
                safeCall(handler, {identifier: id, message: null, text: null, reason: 'cleared', state});
                return;
            }
            if (skipSame && sameBytes(last.get(id), read.bytes))
                return;
            last.set(id, read.bytes);
            safeCall(handler, {identifier: id, message: read.message, text: read.text, reason, state});
        };
        const sub = new Subscription(this);
        const pending = new Map(); // identifier → the 0.5 s source of a rename not yet posted
        let monitor = null;
        const settle = id => {
            const source = pending.get(id);
            if (source) {
                GLib.source_remove(source);
                pending.delete(id);
            }
        };
        const watchDirectory = () => {
            if (!catchUnsignalled || monitor || sub.cancelled)
                return;
            const path = GLib.build_filenamev([this.root, group, directory]);
            try {
                if (!checkDirectory(GLib.build_filenamev([this.root, group])) || !checkDirectory(path))
                    return;
                monitor = Gio.File.new_for_path(path).monitor_directory(Gio.FileMonitorFlags.WATCH_MOVES, null);
            } catch (e) {
                return; // refused or unwatchable: the bus alone (a delivery reports an unsafe container)
            }
            monitor.connect('changed', (m, file, other, event) => {
                let target = null;
                if (event === Gio.FileMonitorEvent.RENAMED)
                    target = other;
                else if (event === Gio.FileMonitorEvent.MOVED_IN)
                    target = file;
                const base = target?.get_basename();
                if (!base || !base.endsWith('.json'))
                    return;
                const id = base.slice(0, -'.json'.length);
                if (!identifiers.includes(id))
                    return;
                settle(id);
                if (!this.connected) {
                    deliver(id, 'catchUp', null, true);
                    return;
                }
                pending.set(id, GLib.timeout_add(GLib.PRIORITY_DEFAULT, 500, () => {
                    pending.delete(id);
                    deliver(id, 'catchUp', null, true);
                    return GLib.SOURCE_REMOVE;
                }));
            });
        };
        sub._cancelled = () => {
            for (const id of [...pending.keys()])
                settle(id);
            monitor?.cancel();
            monitor = null;
        };
        sub._posted = (name, state) => {
            const id = byName.get(name);
            if (id !== undefined) {
                settle(id);
                deliver(id, 'posted', state, !everyPost);
                watchDirectory();
            }
        };
        sub._message = (name, params) => {
            const id = byName.get(name);
            if (id === undefined)
                return;
            const v = params.n_children() >= 2 ? params.get_child_value(1) : null;
            if (!v || v.get_type_string() !== 's') {
                safeCall(report, new WormholeError('invalidMessage', `transient message for ${shown(name)}: ` +
                    'its second argument is not a string'), id);
                return;
            }
            const text = v.get_string()[0];
            const size = encoder.encode(text).length;
            if (size > MAX_TRANSIENT_BYTES) {
                safeCall(report, new WormholeError('tooLarge', `transient message for ${shown(name)} is ${size} ` +
                    `bytes, over the limit of ${MAX_TRANSIENT_BYTES}`), id);
                return;
            }
            let message;
            try {
                message = parseJSON(text);
            } catch (e) {
                safeCall(report, new WormholeError('invalidMessage',
                    `transient message for ${shown(name)} is not one JSON text: ${e.message}`), id);
                return;
            }
            safeCall(handler, {identifier: id, message, text, reason: 'transient', state: null});
        };
        sub._catchUp = () => {
            for (const id of identifiers)
                deliver(id, 'catchUp', null, true);
            watchDirectory();
        };
        const names = [...byName.keys()];
        watchDirectory();
        this._register(sub, {exact: names, messages: transient ? names : []});
        if (stored) {
            sub.ready = sub.ready.then(() => {
                if (!sub.cancelled) {
                    for (const id of identifiers)
                        deliver(id, 'stored', null, false);
                }
            });
        }
        return sub;
    }

    /**
     * Observes keys of a shared-defaults suite (all of them when `keys` is absent). The handler
     * gets `{key, value, json, removed, reason}` per change: `value` decoded as
     * {@link DefaultsSnapshot#get} does, `json` the stored JSON, `removed` true when the key is
     * gone; `reason` `posted` or `catchUp` (after a reconnect, the keys that changed meanwhile).
     * With `initial`, each observed key present is delivered once (`reason` `initial`) when the
     * rules are active. A suite that cannot be read calls `onError`.
     * @param {object} options
     * @param {string} options.group
     * @param {string} [options.suite]
     * @param {string[]} [options.keys]
     * @param {boolean} [options.initial]
     * @param {function(Error): void} [options.onError]
     * @param {function(object): void} handler
     * @returns {Subscription}
     */
    observeDefaults({group, suite = undefined, keys = undefined, initial = false, onError = null}, handler) {
        validateGroup(group);
        suite = suiteOf(group, suite);
        const prefix = `${group}/${PREFERENCES}/${suite}/`;
        const names = keys ? keys.map(k => defaultsKeyName(group, suite, k)) : null;
        if (!names)
            validatePrefix(prefix);
        const report = onError ?? (e => printerr(`wormhole: ${e.message}`));
        let snapshot = null;
        const load = () => {
            try {
                return readDefaults({group, suite, root: this.root});
            } catch (e) {
                safeCall(report, e);
                return null;
            }
        };
        snapshot = load();
        const emit = (key, snap, reason) => {
            const present = snap.has(key);
            safeCall(handler, present
                ? {key, value: snap.get(key), json: snap.json(key), removed: false, reason}
                : {key, value: null, json: null, removed: true, reason});
        };
        const sub = new Subscription(this);
        sub._posted = name => {
            if (!name.startsWith(prefix))
                return;
            const key = name.slice(prefix.length);
            if (keys && !keys.includes(key))
                return;
            const snap = load();
            if (snap === null)
                return;
            snapshot = snap;
            emit(key, snap, 'posted');
        };
        sub._catchUp = () => {
            const snap = load();
            if (snap === null)
                return;
            const before = snapshot;
            snapshot = snap;
            const candidates = keys ?? [...new Set([...(before ? before.keys() : []), ...snap.keys()])].sort();
            for (const key of candidates) {
                const was = before && before.has(key) ? before.jsonText(key) : undefined;
                const now = snap.has(key) ? snap.jsonText(key) : undefined;
                if (was !== now)
                    emit(key, snap, 'catchUp');
            }
        };
        this._register(sub, names ? {exact: names} : {prefixes: [prefix]});
        if (initial) {
            sub.ready = sub.ready.then(() => {
                const snap = load();
                if (snap === null || sub.cancelled)
                    return;
                snapshot = snap;
                for (const key of keys ?? snap.keys()) {
                    if (snap.has(key))
                        emit(key, snap, 'initial');
                }
            });
        }
        return sub;
    }

    /**
     * Posts `Posted` on the name's bucket interface, then makes one call the bus answers
     * (`GetNameOwner` of this connection's unique name), so the signal has left the bus's
     * queue for this connection before the promise resolves: a program may exit then.
     * @param {string} name
     * @param {object} [options]
     * @param {number|bigint|null} [options.state] 0 to 2^64-1 (default: a value that differs for
     *   every post: nanoseconds since 1970 plus a counter)
     * @returns {Promise<void>} rejects with `notSent` when the bus did not take it or did not
     *   answer within the bound
     * @throws {WormholeError} an invalid name or state, before anything is sent
     */
    post(name, {state = undefined} = {}) {
        validateName(name);
        let s;
        if (state === undefined || state === null) {
            s = BigInt(GLib.get_real_time()) * 1000n + (stateCounter++ % 1000n);
        } else {
            try {
                s = BigInt(state);
            } catch (_) {
                s = -1n;
            }
            if (s < 0n || s > 0xffffffffffffffffn)
                throw new WormholeError('invalidState', `state ${shown(state)} is not an integer from 0 to 2^64-1`, state);
        }
        return this._emit(name, 'Posted', GLib.Variant.new_tuple([GLib.Variant.new_string(name),
            GLib.Variant.parse(new GLib.VariantType('t'), s.toString(), null, null)]));
    }

    /**
     * Sends a transient message (contract section 7): `Message` with the mailbox's name and the
     * message as one compact JSON text (at most 64 KiB) on the name's bucket interface, then one
     * call the bus answers. Nothing is stored; only running listeners get it.
     * @param {object} options
     * @param {string} options.group
     * @param {string} [options.directory] default `wormhole`
     * @param {string} options.identifier
     * @param {string} options.json the message, JSON text (made compact, numbers kept as written)
     * @returns {Promise<void>} rejects with `notSent` when the bus did not confirm it
     * @throws {WormholeError} an invalid name or message, or one over 64 KiB, before anything is sent
     */
    sendTransient({group, directory = 'wormhole', identifier, json}) {
        const name = mailboxName(group, directory, identifier);
        let compact;
        try {
            compact = stringifyJSON(parseJSON(json));
        } catch (e) {
            throw new WormholeError('invalidMessage', `message ${shown(json)} is not one JSON text: ${e.message}`, json);
        }
        const size = encoder.encode(compact).length;
        if (size > MAX_TRANSIENT_BYTES) {
            throw new WormholeError('tooLarge',
                `transient message is ${size} bytes of compact JSON, over the limit of ${MAX_TRANSIENT_BYTES}`, size);
        }
        return this._emit(name, 'Message', GLib.Variant.new_tuple([GLib.Variant.new_string(name),
            GLib.Variant.new_string(compact)]));
    }

    _emit(name, member, params) {
        if (!this.connected)
            return Promise.reject(new WormholeError('notSent', `${member} for ${shown(name)} not sent: the bus is gone`, name));
        const conn = this.connection;
        return (async () => {
            try {
                await this._claimAppName();
                conn.emit_signal(null, OBJECT_PATH, bucketInterface(name), member, params);
                await callAsync(conn, 'GetNameOwner', new GLib.Variant('(s)', [conn.get_unique_name()]), '(s)');
            } catch (e) {
                throw new WormholeError('notSent', `${member} for ${shown(name)} not confirmed by the bus: ${e.message}`, name);
            }
        })();
    }

    async _claimAppName() {
        if (!this._appId || this._ownedName)
            return;
        const conn = this.connection;
        const owned = `${this._appId}.Wormhole.c${conn.get_unique_name().slice(1).replaceAll('.', '_')}`;
        if (owned.length > 255)
            throw new Error(`the name ${owned} is longer than 255 bytes`);
        const reply = await callAsync(conn, 'RequestName', new GLib.Variant('(su)', [owned, 4]), '(u)');
        const [code] = reply.deep_unpack();
        if (code !== 1 && code !== 4)
            throw new Error(`RequestName ${owned} was refused (reply ${code})`);
        this._ownedName = owned;
    }

    /** Closes the participant: its own connection is closed (a shared one is left open). */
    close() {
        this._closed = true;
        for (const sub of [...this._subs])
            sub.cancel();
        this._stopWatching();
        const conn = this.connection;
        this._detach();
        if (conn && !this._shared)
            conn.close_sync(null);
    }

    // --- reconnecting -------------------------------------------------------------------

    _onClosed() {
        if (this._closed || this._shared)
            return;
        this._detach();
        this._ownedName = null;
        safeCall(this.onBusLost ?? (a => printerr(`wormhole: lost the bus at '${a}'; waiting for it to come back`)),
            this.address);
        this._watch();
    }

    _watch() {
        const socket = socketPathOf(this.address);
        if (socket === null) {
            printerr(`wormhole: the bus address '${this.address}' has no socket file to watch; call reconnect()`);
            return;
        }
        const file = Gio.File.new_for_path(socket);
        const dir = file.get_parent();
        try {
            this._monitor = dir.monitor_directory(Gio.FileMonitorFlags.WATCH_MOVES, null);
        } catch (e) {
            printerr(`wormhole: cannot watch ${dir.get_path()}: ${e.message}; call reconnect()`);
            return;
        }
        this._monitor.connect('changed', (m, changed, other, event) => {
            const target = event === Gio.FileMonitorEvent.MOVED_IN || event === Gio.FileMonitorEvent.RENAMED
                ? (other ?? changed) : changed;
            if (target && target.equal(file) && event !== Gio.FileMonitorEvent.DELETED &&
                event !== Gio.FileMonitorEvent.MOVED_OUT) {
                this._retries = 0;
                this.reconnect();
            }
        });
        if (file.query_exists(null))
            this.reconnect();
    }

    _stopWatching() {
        if (this._monitor) {
            this._monitor.cancel();
            this._monitor = null;
        }
        if (this._retrySource) {
            GLib.source_remove(this._retrySource);
            this._retrySource = 0;
        }
    }

    /**
     * Tries to reconnect now (it happens by itself when the bus's socket reappears). On
     * success the rules are re-added and each subscription gets one catch-up.
     */
    reconnect() {
        if (this._shared || this._closed || this.connected || this._connecting)
            return;
        this._connecting = true;
        Gio.DBusConnection.new_for_address(this.address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            null, null, async (_o, result) => {
                let conn;
                try {
                    conn = Gio.DBusConnection.new_for_address_finish(result);
                } catch (e) {
                    this._connecting = false;
                    // The socket file can appear a moment before the daemon accepts: a few
                    // retries after that event, with growing delays, then wait for the next event.
                    if (this._retries < 6 && !this._closed) {
                        const delay = 20 << this._retries++;
                        this._retrySource = GLib.timeout_add(GLib.PRIORITY_DEFAULT, delay, () => {
                            this._retrySource = 0;
                            this.reconnect();
                            return GLib.SOURCE_REMOVE;
                        });
                    }
                    return;
                }
                try {
                    this._attach(conn);
                    await Promise.all([...this._ruleCounts.keys()].map(r =>
                        callAsync(conn, 'AddMatch', new GLib.Variant('(s)', [r]))));
                } catch (e) {
                    this._connecting = false;
                    printerr(`wormhole: the bus came back but refused the match rules: ${e.message}`);
                    return;
                }
                this._connecting = false;
                this._stopWatching();
                for (const sub of [...this._subs]) {
                    if (!sub.cancelled)
                        sub._catchUp();
                }
                safeCall(this.onBusBack ?? (a => printerr(`wormhole: back on the bus at '${a}'`)), this.address);
            });
    }
}

function addTo(map, key, value) {
    let set = map.get(key);
    if (!set)
        map.set(key, set = new Set());
    set.add(value);
}

function removeFrom(map, key, value) {
    const set = map.get(key);
    if (set) {
        set.delete(value);
        if (set.size === 0)
            map.delete(key);
    }
}

function safeCall(fn, ...args) {
    try {
        fn(...args);
    } catch (e) {
        logError(e, 'wormhole: a handler threw');
    }
}

// ---------------------------------------------------------------------------------------------
// What goes through the `wormhole` command (needs flock(2), which Gio 2.74 cannot take)

/**
 * The `wormhole` command this module runs: `WORMHOLE_BIN` (a path to the executable), else
 * `wormhole` on `PATH`.
 * @returns {string}
 */
export function wormholeCommand() {
    return GLib.getenv('WORMHOLE_BIN') || GLib.find_program_in_path('wormhole') || 'wormhole';
}

/**
 * Runs the `wormhole` command with arguments (plus, when `bus` is given, its `--bus-address`
 * and its container root as `WORMHOLE_CONTAINER_ROOT`).
 * @param {string[]} args
 * @param {object} [options]
 * @param {string} [options.input] standard input
 * @param {WormholeBus} [options.bus]
 * @param {string} [options.command] the executable (default {@link wormholeCommand})
 * @returns {Promise<{status: number, stdout: string, stderr: string}>}
 */
export function runWormhole(args, {input = null, bus = null, command = null} = {}) {
    const argv = [command ?? wormholeCommand(), ...args];
    if (bus && bus.address) {
        // Before a `--` (after it, every word is an argument).
        const end = argv.indexOf('--');
        argv.splice(end < 0 ? argv.length : end, 0, '--bus-address', bus.address);
    }
    const launcher = new Gio.SubprocessLauncher({flags: Gio.SubprocessFlags.STDIN_PIPE |
        Gio.SubprocessFlags.STDOUT_PIPE | Gio.SubprocessFlags.STDERR_PIPE});
    if (bus && bus.root) // the command uses the participant's container root
        launcher.setenv('WORMHOLE_CONTAINER_ROOT', bus.root, true);
    const proc = launcher.spawnv(argv);
    return new Promise((resolve, reject) => {
        proc.communicate_utf8_async(input, null, (p, result) => {
            try {
                const [, stdout, stderr] = p.communicate_utf8_finish(result);
                resolve({status: p.get_exit_status(), stdout: stdout ?? '', stderr: stderr ?? ''});
            } catch (e) {
                reject(e);
            }
        });
    });
}

async function mustRun(args, options) {
    const r = await runWormhole(args, options);
    if (r.status !== 0) {
        throw new WormholeError('command', `wormhole ${args[0]} exited ${r.status}: ` +
            `${r.stderr.split('\n')[0]}`, r.status);
    }
    return r;
}

/**
 * Stores a mailbox message and posts (`wormhole send`): the temporary file under `flock`.
 * @param {object} options `{group, directory, identifier, json (text), bus, command}`
 * @returns {Promise<{status, stdout, stderr}>} rejects with `command` on a non-zero exit
 */
export function sendMessage({group, directory = 'wormhole', identifier, json, bus = null, command = null}) {
    mailboxName(group, directory, identifier);
    parseJSON(json);
    return mustRun(['send', '--group', group, '--directory', directory, identifier], {input: json, bus, command});
}

/**
 * Appends a journal record (`wormhole send --journal`).
 * @param {object} options `{group, directory, identifier, json, bus, command}`
 */
export function appendJournal({group, directory = 'wormhole', identifier, json, bus = null, command = null}) {
    mailboxName(group, directory, identifier);
    parseJSON(json);
    return mustRun(['send', '--journal', '--group', group, '--directory', directory, identifier],
        {input: json, bus, command});
}

/**
 * Empties a mailbox (`wormhole clear`).
 * @param {object} options `{group, directory, identifier, bus, command}`
 */
export function clearMessage({group, directory = 'wormhole', identifier, bus = null, command = null}) {
    mailboxName(group, directory, identifier);
    return mustRun(['clear', '--group', group, '--directory', directory, identifier], {bus, command});
}

/**
 * Writes a shared-defaults value (`wormhole defaults write`, under the suite lock).
 * @param {object} options `{group, suite, key, json, bus, command}`
 */
export function writeDefault({group, suite = undefined, key, json, bus = null, command = null}) {
    validateGroup(group);
    const s = suiteOf(group, suite);
    defaultsKeyName(group, s, key);
    parseJSON(json);
    return mustRun(['defaults', 'write', '--group', group, '--suite', s, '--', key], {input: json, bus, command});
}

/**
 * Removes a shared-defaults key (`wormhole defaults delete`).
 * @param {object} options `{group, suite, key, bus, command}`
 */
export function deleteDefault({group, suite = undefined, key, bus = null, command = null}) {
    validateGroup(group);
    const s = suiteOf(group, suite);
    defaultsKeyName(group, s, key);
    return mustRun(['defaults', 'delete', '--group', group, '--suite', s, '--', key], {bus, command});
}

function printerr(text) {
    // GJS's global printerr; kept in one place so a Shell extension can see where logs come from.
    globalThis.printerr ? globalThis.printerr(text) : console.error(text);
}

// SPDX-License-Identifier: MIT
/**
 * Shared defaults (contract section 5), read-only: a suite is read into an immutable snapshot
 * with typed getters; nothing here writes or moves a file.
 * @module wormhole/defaults
 */
import GLib from 'gi://GLib';

import {WormholeError, shown} from './errors.js';
import {containerRoot, readContainerFile} from './files.js';
import {RawNumber, decodeUTF8, parseJSON, stringifyJSON} from './json.js';
import {PREFERENCES, validateGroup, validateSuite} from './names.js';

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

/** Standard base64 with its padding, nothing else (what the Swift and Python readers accept). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

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
            if (Number.isSafeInteger(n))
                return new TypedValue('int', n, raw.source);
            // A property-list Int is 64 bits: a larger integer is a value no typed getter reads
            // (contract/vectors/suites.json), kept as it is stored.
            const big = BigInt(raw.source);
            return big < INT64_MIN || big > INT64_MAX ? new TypedValue('unknown', big, big)
                : new TypedValue('int', big, raw.source);
        }
        return new TypedValue('double', Number(raw.source), raw.source);
    }
    if (typeof raw === 'string' || typeof raw === 'boolean')
        return new TypedValue(typeof raw === 'string' ? 'string' : 'bool', raw, raw);
    if (raw === null)
        return new TypedValue('unknown', null, null);
    if (Array.isArray(raw)) {
        const items = raw.map(typed);
        // A value with an unreadable part anywhere is unreadable as a whole.
        if (items.some(t => t.type === 'unknown'))
            return new TypedValue('unknown', plainJSON(raw), plainJSON(raw));
        return new TypedValue('array', items.map(t => t.value), items.map(t => t.json));
    }
    const keys = Object.keys(raw);
    const json = plainJSON(raw);
    if (keys.length === 1 && keys[0].startsWith('$')) {
        const tag = keys[0];
        const inner = raw[tag];
        if (tag === '$date' && inner instanceof NumberLiteral)
            return new TypedValue('date', new Date(Number(inner.source) * 1000), json);
        if (tag === '$data' && typeof inner === 'string' && BASE64.test(inner))
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
    for (const [k, v] of Object.entries(raw)) {
        const item = typed(v);
        if (item.type === 'unknown')
            return new TypedValue('unknown', json, json);
        out[k] = item.value;
    }
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

export function suiteOf(group, suite) {
    if (suite === undefined || suite === null) {
        if (group.length > 200) {
            throw new WormholeError('invalidSuite',
                `group ${shown(group)} is longer than 200 bytes and has no default suite: name one`, group);
        }
        return group;
    }
    return validateSuite(suite);
}


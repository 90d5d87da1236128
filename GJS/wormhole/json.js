// SPDX-License-Identifier: MIT
/**
 * Strict JSON (RFC 8259) with byte offsets, lossless numbers and a depth limit; strict UTF-8.
 * The parser is resumable: {@link parseJSONAsync} and {@link decodeUTF8Async} work in slices of
 * a few milliseconds and let the main loop run between them, so a large message never holds
 * a GNOME Shell frame.
 * @module wormhole/json
 */
import GLib from 'gi://GLib';

import {MAX_JSON_DEPTH} from './names.js';

// Awaits in loops are sequential on purpose: pieces, records and deliveries keep their order.
/* eslint-disable no-await-in-loop */

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder('utf-8', {fatal: true});

/** When timeouts stand in for a callback GJS blocked, in milliseconds after it was due. */
export const FALLBACK_MS = [100, 1000, 2000, 3000, 5000, 7000, 10000, 15000, 20000, 30000, 60000];

/** How long one slice of asynchronous work may hold the main loop, in microseconds. */
export const SLICE_US = 2000;

/**
 * Resolves after the main loop has dispatched what is pending at higher priority (an idle
 * source at `GLib.PRIORITY_DEFAULT_IDLE`). GJS may block a callback that comes while it
 * sweeps during a major collection (GJS 1.74 logs "Attempting to run a JS callback during garbage
 * collection" and the source is gone; an incremental sweep can stay open until something else
 * makes GJS collect): later timeouts ({@link FALLBACK_MS}) stand in for the idle callback then.
 * @returns {Promise<void>}
 */
export function yieldToLoop() {
    return new Promise(resolve => {
        // GLib.Source objects: destroy() is safe on a source GLib already removed after GJS
        // blocked its callback.
        const sources = [GLib.idle_source_new(), ...FALLBACK_MS.map(ms => GLib.timeout_source_new(ms))];
        const go = () => {
            for (const source of sources)
                source.destroy();
            resolve();
            return GLib.SOURCE_REMOVE;
        };
        for (const source of sources) {
            source.set_priority(GLib.PRIORITY_DEFAULT_IDLE);
            source.set_callback(go);
            source.attach(null);
        }
    });
}

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

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
// The characters a string holds as they are: not a quote, a backslash or a control character.
// eslint-disable-next-line no-control-regex
const PLAIN = /[^"\\\u0000-\u001f]{0,65536}/y;
const ESCAPES = {'"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t'};
const DECODE_BYTES = 256 * 1024;
const LOOKAHEAD = 1024; // characters kept ahead of the parser in the window
const LITERALS = {t: ['true', true], f: ['false', false], n: ['null', null]};
const VALUE = 0, AFTER = 1, KEY = 2, COLON = 3;

function losslessNumber(src, integer) {
    const n = Number(src);
    if (integer)
        return Number.isSafeInteger(n) ? n : BigInt(src);
    if (!Number.isFinite(n))
        return new RawNumber(src);
    if (n === 0 && /[1-9]/.test(src.replace(/[eE].*$/, '')))
        return new RawNumber(src);
    return n;
}

/**
 * A strict RFC 8259 parser that can stop at a deadline and go on later from where it stopped
 * (an explicit stack, no recursion). Integers that a JS number holds exactly are numbers,
 * larger ones `BigInt`; other numbers are JS numbers unless that loses the value's magnitude
 * (`1e400`), then a {@link RawNumber}. Duplicate keys: the last wins.
 */
export class JSONParser {
    /**
     * @param {string} text
     * @param {object} [options]
     * @param {number} [options.maxDepth] nesting limit (default {@link MAX_JSON_DEPTH})
     * @param {function(string, boolean): *} [options.number] maps a literal and whether it is an
     *   integer to a value, instead of the rule above
     */
    constructor(text, {maxDepth = MAX_JSON_DEPTH, number = null} = {}) {
        // A list of pieces is read through a window: never joined into one flat string.
        this.parts = Array.isArray(text) ? text : [text];
        this.next = 1;
        this.base = 0; // the index of the window's first character in the whole text
        this.text = this.parts[0] ?? '';
        this.maxDepth = maxDepth;
        this.number = number ?? losslessNumber;
        this.i = 0;
        this.state = VALUE;
        this.stack = []; // {container, array, key}
        this.pending = null; // a string being read: {out, key}
        this.done = false;
        this.result = undefined;
    }

    _fail(what, at = this.i) {
        const whole = this.parts.join('');
        throw new JSONSyntaxError(what, encoder.encode(whole.slice(0, this.base + at)).length);
    }

    // Moves the window on until `need` characters are ahead of `i`, or there are no more.
    _more(need) {
        while (this.text.length - this.i < need && this.next < this.parts.length) {
            this.text = this.text.slice(this.i) + this.parts[this.next++];
            this.base += this.i;
            this.i = 0;
        }
    }

    _ws() {
        for (;;) {
            const text = this.text;
            let i = this.i;
            for (;;) {
                const c = text.charCodeAt(i);
                if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d)
                    i++;
                else
                    break;
            }
            this.i = i;
            if (i < text.length - 64 || this.next >= this.parts.length)
                return;
            this._more(LOOKAHEAD);
            if (this.i >= this.text.length)
                return;
        }
    }

    _put(value) {
        const top = this.stack[this.stack.length - 1];
        if (!top)
            this.result = value;
        else if (top.array)
            top.container.push(value);
        else if (top.key === '__proto__')
            Object.defineProperty(top.container, top.key, {value, enumerable: true, writable: true, configurable: true});
        else
            top.container[top.key] = value;
        this.state = AFTER;
    }

    // Reads the rest of a string (the opening quote is behind); false when the deadline came first.
    _string(deadline) {
        const p = this.pending;
        for (;;) {
            this._more(8);
            const text = this.text;
            PLAIN.lastIndex = this.i;
            const run = PLAIN.exec(text)[0];
            p.out += run;
            this.i += run.length;
            if (run.length === 65536 || (this.i >= text.length - 8 && this.next < this.parts.length)) {
                if (GLib.get_monotonic_time() >= deadline)
                    return false;
                continue;
            }
            const c = text.charCodeAt(this.i);
            if (Number.isNaN(c))
                this._fail('unterminated string');
            if (c === 0x22) {
                this.i++;
                return true;
            }
            if (c < 0x20)
                this._fail('control character in a string');
            const e = text[this.i + 1];
            if (ESCAPES[e] !== undefined) {
                p.out += ESCAPES[e];
                this.i += 2;
            } else if (e === 'u') {
                const hex = text.slice(this.i + 2, this.i + 6);
                if (!/^[0-9A-Fa-f]{4}$/.test(hex))
                    this._fail('bad \\u escape');
                p.out += String.fromCharCode(parseInt(hex, 16));
                this.i += 6;
            } else {
                this._fail('bad escape');
            }
        }
    }

    _finishString() {
        const {out, key} = this.pending;
        this.pending = null;
        if (key) {
            this.stack[this.stack.length - 1].key = out;
            this.state = COLON;
        } else {
            this._put(out);
        }
    }

    _open(container, array) {
        this.i++;
        this.stack.push({container, array, key: null});
        this._ws();
        if (this.text.charCodeAt(this.i) === (array ? 0x5d : 0x7d)) {
            this.i++;
            this.stack.pop();
            this._put(container);
        } else {
            this.state = array ? VALUE : KEY;
        }
    }

    _value() {
        if (this.stack.length + 1 > this.maxDepth)
            this._fail(`nested deeper than ${this.maxDepth} levels`);
        this._ws();
        const text = this.text;
        const c = text[this.i];
        if (c === '{')
            return this._open({}, false);
        if (c === '[')
            return this._open([], true);
        if (c === '"') {
            this.i++;
            this.pending = {out: '', key: false};
            return undefined;
        }
        const literal = LITERALS[c];
        if (literal && text.startsWith(literal[0], this.i)) {
            this.i += literal[0].length;
            return this._put(literal[1]);
        }
        NUMBER.lastIndex = this.i;
        let m = NUMBER.exec(text);
        while (m && this.i + m[0].length >= this.text.length && this.next < this.parts.length) {
            this._more(this.text.length - this.i + LOOKAHEAD); // a number that may go on in the next piece
            NUMBER.lastIndex = this.i;
            m = NUMBER.exec(this.text);
        }
        if (m && m[0].length > 0 && m[0] !== '-') {
            this.i += m[0].length;
            return this._put(this.number(m[0], m[1] === undefined && m[2] === undefined));
        }
        if (this.i >= this.text.length)
            this._fail('unexpected end of the text');
        return this._fail(`unexpected character ${JSON.stringify(this.text[this.i])}`);
    }

    _after() {
        this._ws();
        const top = this.stack[this.stack.length - 1];
        if (!top) {
            if (this.i !== this.text.length || this.next < this.parts.length)
                this._fail('text after the JSON value');
            this.done = true;
            return;
        }
        const c = this.text[this.i];
        if (c === ',') {
            this.i++;
            this.state = top.array ? VALUE : KEY;
        } else if (c === (top.array ? ']' : '}')) {
            this.i++;
            this.stack.pop();
            this._put(top.container);
        } else {
            this._fail(top.array ? 'expected "," or "]"' : 'expected "," or "}"');
        }
    }

    /**
     * Parses until the text is done or the deadline passes.
     * @param {number} [deadline] `GLib.get_monotonic_time()` microseconds (default: none)
     * @returns {boolean} true when done (the value is in `result`)
     * @throws {JSONSyntaxError}
     */
    run(deadline = Infinity) {
        let steps = 0;
        while (!this.done) {
            if (++steps === 256) {
                steps = 0;
                if (GLib.get_monotonic_time() >= deadline)
                    return false;
            }
            this._more(LOOKAHEAD);
            if (this.pending) {
                if (!this._string(deadline))
                    return false;
                this._finishString();
                continue;
            }
            switch (this.state) {
            case VALUE:
                this._value();
                break;
            case AFTER:
                this._after();
                break;
            case KEY:
                this._ws();
                if (this.text[this.i] !== '"')
                    this._fail('expected a string key');
                this.i++;
                this.pending = {out: '', key: true};
                break;
            default: // COLON
                this._ws();
                if (this.text[this.i] !== ':')
                    this._fail('expected ":"');
                this.i++;
                this.state = VALUE;
            }
        }
        return true;
    }
}

/**
 * Parses one RFC 8259 JSON text strictly, at once (see {@link JSONParser} for the numbers).
 * @param {string} text
 * @param {object} [options] as {@link JSONParser}
 * @returns {*}
 * @throws {JSONSyntaxError}
 */
export function parseJSON(text, options = {}) {
    const parser = new JSONParser(text, options);
    parser.run();
    return parser.result;
}

/**
 * Parses one JSON text in slices of at most {@link SLICE_US}, letting the main loop run between.
 * @param {string|string[]} text the text, or its pieces in order
 * @param {object} [options] as {@link JSONParser}, and `cancellable` (a `Gio.Cancellable`)
 * @returns {Promise<*>} rejects with a {@link JSONSyntaxError}, or a `cancelled` WormholeError-like
 *   error when the cancellable was cancelled
 */
export async function parseJSONAsync(text, options = {}) {
    const parser = new JSONParser(text, options);
    while (!parser.run(GLib.get_monotonic_time() + SLICE_US)) {
        await yieldToLoop();
        if (options.cancellable?.is_cancelled())
            throw new Error('cancelled');
    }
    return parser.result;
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
        throw new JSONSyntaxError('invalid UTF-8', badOffset(bytes, 0, bytes.length));
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

// The offset of the first byte in bytes[from, to) that does not begin a valid UTF-8 sequence
// (overlong forms, surrogates and code points past U+10FFFF are invalid), or `to`.
function badOffset(bytes, from, to) {
    for (let i = from; i < to;) {
        const b = bytes[i];
        let need, min;
        if (b < 0x80) {
            i++;
            continue;
        } else if (b >= 0xc2 && b <= 0xdf) {
            need = 1;
            min = 0x80;
        } else if (b >= 0xe0 && b <= 0xef) {
            need = 2;
            min = 0x800;
        } else if (b >= 0xf0 && b <= 0xf4) {
            need = 3;
            min = 0x10000;
        } else {
            return i;
        }
        let cp = b & (0x3f >> need);
        for (let k = 1; k <= need; k++) {
            const c = bytes[i + k];
            if (c === undefined || (c & 0xc0) !== 0x80)
                return i;
            cp = (cp << 6) | (c & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += need + 1;
    }
    return to;
}

/**
 * {@link decodeUTF8} of bytes in pieces (as {@link readContainerFileAsync} reads them), a piece
 * at a time, letting the main loop run when a slice's time is up; a character cut between two
 * pieces is carried over.
 * @param {Uint8Array[]|Uint8Array} pieces
 * @returns {Promise<string>}
 * @throws {JSONSyntaxError}
 */
export async function decodeUTF8Async(pieces) {
    // A rope of the decoded pieces: joined lazily, by whoever needs it flat.
    return (await decodeUTF8Pieces(pieces)).reduce((text, part) => text + part, '');
}

/**
 * {@link decodeUTF8Async}, but the text in pieces of at most 256 Ki characters ({@link JSONParser}
 * and {@link parseJSONAsync} take them as they are).
 * @param {Uint8Array[]|Uint8Array} input
 * @returns {Promise<string[]>}
 * @throws {JSONSyntaxError}
 */
export async function decodeUTF8Pieces(input) {
    const pieces = [];
    for (const chunk of input instanceof Uint8Array ? [input] : input) {
        for (let at = 0; at < chunk.length; at += DECODE_BYTES)
            pieces.push(chunk.subarray(at, at + DECODE_BYTES));
    }
    const first = pieces[0] ?? new Uint8Array(0);
    if (first.length >= 3 && first[0] === 0xef && first[1] === 0xbb && first[2] === 0xbf)
        throw new JSONSyntaxError('a byte-order mark', 0);
    const parts = [];
    let carry = new Uint8Array(0);
    let base = 0; // the byte offset of carry[0]
    let deadline = GLib.get_monotonic_time() + SLICE_US;
    for (let k = 0; k < pieces.length; k++) {
        let bytes = pieces[k];
        if (carry.length > 0) {
            const joined = new Uint8Array(carry.length + bytes.length);
            joined.set(carry, 0);
            joined.set(bytes, carry.length);
            bytes = joined;
        }
        // End before a character that goes on in the next piece.
        let end = bytes.length;
        if (k + 1 < pieces.length && end > 0) {
            let lead = end - 1;
            while (lead > 0 && end - lead < 4 && (bytes[lead] & 0xc0) === 0x80)
                lead--;
            const b = bytes[lead];
            const need = 1 + Number(b >= 0xc0) + Number(b >= 0xe0) + Number(b >= 0xf0);
            if (end - lead < need)
                end = lead;
        }
        try {
            parts.push(strictDecoder.decode(bytes.subarray(0, end)));
        } catch (_) {
            throw new JSONSyntaxError('invalid UTF-8', base + badOffset(bytes, 0, end));
        }
        base += end;
        carry = bytes.slice(end);
        if (GLib.get_monotonic_time() >= deadline) {
            await yieldToLoop();
            deadline = GLib.get_monotonic_time() + SLICE_US;
        }
    }
    if (carry.length > 0)
        throw new JSONSyntaxError('invalid UTF-8', base);
    return parts;
}

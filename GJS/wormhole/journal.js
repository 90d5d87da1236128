// SPDX-License-Identifier: MIT
/**
 * Reading a journal's files (contract section 6, docs/journal-format.md): segments of framed
 * records with CRC-32C checksums, followed in sequence order across seals, every range that
 * cannot be delivered reported once, in its place, with its reason. Readers take no lock and
 * never block appenders; appending goes through the command-line tool (it needs `flock`).
 * @module wormhole/journal
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

import {WormholeError} from './errors.js';
import {checkDirectory, joinChunks, readBytesAsync} from './files.js';
import {SLICE_US, parseJSON, yieldToLoop} from './json.js';
import {validateIdentifier} from './names.js';

// Awaits in loops are sequential on purpose: pieces, records and deliveries keep their order.
/* eslint-disable no-await-in-loop */

const MAGIC = [0x57, 0x48, 0x4a, 0x4c]; // WHJL
const VERSION = 1;
/** The segment header's size. */
export const HEADER = 16;
const HEAD = 20; // length u32, sequence u64, time u64
const OVERHEAD = HEAD + 4;
const SEAL = 0xffffffff;
const MAX_RECORD = 1 << 20;
/** The largest sequence number a record may carry. */
export const MAX_SEQUENCE = 2n ** 64n - 2n;
const SEGMENT = /^[0-9]{20}\.seg$/;
const SEGMENT_INFO = 'standard::type,standard::is-symlink,unix::inode';

const CRC_TABLE = (() => {
    const table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
        let c = n;
        for (let k = 0; k < 8; k++)
            c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
        table[n] = c >>> 0;
    }
    return table;
})();

/**
 * CRC-32C (Castagnoli) of `bytes[start, end)`.
 * @param {Uint8Array} bytes
 * @param {number} [start]
 * @param {number} [end]
 * @returns {number} an unsigned 32-bit integer
 */
export function crc32c(bytes, start = 0, end = bytes.length) {
    let crc = 0xffffffff;
    for (let i = start; i < end; i++)
        crc = CRC_TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
    return (crc ^ 0xffffffff) >>> 0;
}

/** @param {bigint} first @returns {string} the segment's file name */
export function segmentName(first) {
    return `${first.toString().padStart(20, '0')}.seg`;
}

// The frame at `at` of `data` (a DataView over bytes), or null when incomplete or impossible.
function frameAt(bytes, view, at) {
    if (bytes.length - at < OVERHEAD)
        return null;
    const length = view.getUint32(at, true);
    const payload = length === SEAL ? 0 : length;
    if (payload > MAX_RECORD)
        return null;
    const end = at + HEAD + payload + 4;
    if (end > bytes.length)
        return null;
    const stored = view.getUint32(end - 4, true);
    return {
        length, seal: length === SEAL, sequence: view.getBigUint64(at + 4, true),
        time: view.getBigUint64(at + 12, true), end, valid: stored === crc32c(bytes, at, end - 4), stored,
    };
}

function describeBad(bytes, view, at) {
    const frame = frameAt(bytes, view, at);
    if (frame === null) {
        if (bytes.length - at < OVERHEAD)
            return `offset ${at}: incomplete frame (${bytes.length - at} bytes left)`;
        return `offset ${at}: impossible length ${view.getUint32(at, true)}`;
    }
    return `offset ${at}: checksum mismatch (stored 0x${frame.stored.toString(16).padStart(8, '0')})`;
}

function allZero(bytes, from) {
    for (let i = from; i < bytes.length; i++) {
        if (bytes[i] !== 0)
            return false;
    }
    return true;
}

// Whether the bad frame at `at` is a torn tail: an incomplete frame, or a bad one that reaches
// the end or is followed by zero bytes only.
function tornTail(bytes, view, at) {
    const frame = frameAt(bytes, view, at);
    if (frame === null) {
        if (bytes.length - at < OVERHEAD)
            return true;
        const length = view.getUint32(at, true);
        return (length !== SEAL && length <= MAX_RECORD) || allZero(bytes, at);
    }
    return frame.end === bytes.length || allZero(bytes, frame.end);
}

/** A range of sequence numbers that cannot be delivered. */
export class JournalGap {
    constructor(from, to, file, reason, detail) {
        Object.assign(this, {from, to, file, reason, detail});
    }

    /** @returns {boolean} true for damage, false for records removed by retention */
    get isDamage() {
        return this.reason !== 'retention';
    }

    /** @returns {string} `records A..B: …` as the command-line tool writes it */
    toString() {
        return `records ${this.from}..${this.to}: ${this.reason} (${this.detail}) in ${this.file}`;
    }
}

/**
 * The files of one journal and a walk over them. A position is `{segment, offset, expected}`:
 * the segment's first number (null: none yet), the offset in it and the next number expected.
 */
export class JournalReader {
    /** @param {{root: string, group: string, directory: string, identifier: string}} where */
    constructor({root, group, directory, identifier}) {
        validateIdentifier(identifier);
        Object.assign(this, {root, group, directory, identifier});
        this.path = GLib.build_filenamev([root, group, directory, `${identifier}.journal`]);
        this._cache = null; // {name, base, bytes}: a segment's bytes from `base`
    }

    /** @returns {boolean} whether the journal's directory exists (checked: ours, no symlink) */
    exists() {
        const parts = [this.group, this.directory, `${this.identifier}.journal`];
        let path = this.root;
        for (const part of parts) {
            path = GLib.build_filenamev([path, part]);
            if (!checkDirectory(path))
                return false;
        }
        return true;
    }

    /**
     * The segments' first numbers, sorted, and the consumers that have a cursor.
     * @returns {{segments: bigint[], consumers: string[]}}
     * @throws {WormholeError} `journalCorrupt` for an entry that is not part of a journal
     */
    listing() {
        const segments = [];
        const consumers = [];
        const children = Gio.File.new_for_path(this.path).enumerate_children('standard::name',
            Gio.FileQueryInfoFlags.NOFOLLOW_SYMLINKS, null);
        for (let info = children.next_file(null); info !== null; info = children.next_file(null)) {
            const name = info.get_name();
            if (SEGMENT.test(name) && name !== segmentName(0n)) {
                segments.push(BigInt(name.slice(0, 20)));
            } else if (name.endsWith('.cursor') && isConsumerName(name.slice(0, -7))) {
                consumers.push(name.slice(0, -7));
            } else if (!(name === 'append.lock' || name === 'sync.lock' ||
                       (name.startsWith('.') && name.endsWith('.tmp')) ||
                       (name.endsWith('.consumer.lock') && isConsumerName(name.slice(0, -14))))) {
                children.close(null);
                throw new WormholeError('journalCorrupt', `'${name}' is not part of the journal ${this.path}: ` +
                    'move it out of the directory', GLib.build_filenamev([this.path, name]));
            }
        }
        children.close(null);
        segments.sort((a, b) => Number(a > b) - Number(a < b));
        return {segments, consumers: consumers.sort()};
    }

    /** @returns {Promise<{first: bigint, last: bigint}>} the first segment's number and the last record's */
    async end() {
        if (!this.exists())
            return {first: 1n, last: 0n};
        const {segments} = this.listing();
        if (segments.length === 0)
            return {first: 1n, last: 0n};
        const last = segments[segments.length - 1];
        const walk = await this.walk({segment: last, offset: HEADER, expected: last}, {deliver: false});
        return {first: segments[0], last: walk.position.expected - 1n};
    }

    // The bytes of a segment from `offset` (cached, topped up with what was appended since),
    // or {why} when the name is held by something other than a regular file.
    async _segment(name, offset, cancellable) {
        const path = GLib.build_filenamev([this.path, name]);
        const file = Gio.File.new_for_path(path);
        let info;
        try {
            info = file.query_info(SEGMENT_INFO, Gio.FileQueryInfoFlags.NOFOLLOW_SYMLINKS, null);
        } catch (e) {
            if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.NOT_FOUND))
                return {why: 'missing'};
            throw new WormholeError('io', `cannot read ${path}: ${e.message}`, path);
        }
        if (info.get_is_symlink())
            return {why: 'a symbolic link'};
        if (info.get_file_type() !== Gio.FileType.REGULAR)
            return {why: 'not a regular file'};
        const inode = info.get_attribute_uint64('unix::inode');
        let c = this._cache;
        if (!c || c.name !== name || c.inode !== inode || offset < c.base || offset > c.base + c.bytes.length)
            c = this._cache = {name, inode, base: offset, bytes: new Uint8Array(0)};
        const more = await readFrom(file, c.base + c.bytes.length, cancellable);
        if (more.length > 0) {
            const joined = new Uint8Array(c.bytes.length - (offset - c.base) + more.length);
            joined.set(c.bytes.subarray(offset - c.base), 0);
            joined.set(more, c.bytes.length - (offset - c.base));
            c.bytes = joined;
            c.base = offset;
        }
        return {bytes: c.bytes.subarray(offset - c.base), base: offset};
    }

    /**
     * Walks from a position to the end of what is there, in sequence order.
     * @param {{segment: bigint|null, offset: number, expected: bigint}} start
     * @param {object} [options]
     * @param {boolean} [options.deliver] collect records and gaps (false: only find the end)
     * @param {number} [options.limit] stop after this many records (the rest at the next walk)
     * @param {Gio.Cancellable} [options.cancellable]
     * @returns {Promise<{items: Array<object>, position: object, more: boolean}>} items are
     *   records `{sequence, time, payload, file, offset}` and {@link JournalGap}s
     * @throws {WormholeError} `journalCorrupt`, `journalVersion`, `io`, `unsafePath`
     */
    async walk(start, {deliver = true, limit = Infinity, cancellable = null} = {}) {
        const items = [];
        let {expected} = start;
        const stay = {segment: start.segment, offset: start.offset, expected};
        if (!this.exists())
            return {items, position: stay, more: false};
        const {segments} = this.listing();
        if (segments.length === 0)
            return {items, position: stay, more: false};
        let index = 0;
        let offset = HEADER;
        if (start.segment !== null) {
            while (index < segments.length && segments[index] < start.segment)
                index++;
            if (index < segments.length && segments[index] === start.segment)
                offset = start.offset;
        } else {
            while (index + 1 < segments.length && segments[index + 1] <= expected)
                index++;
        }
        const gap = (from, to, file, reason, detail) => {
            if (deliver && to >= from)
                items.push(new JournalGap(from, to, file, reason, detail));
        };
        // At the end of what is there, the bytes cached past the position are dropped: a torn tail
        // there is rewritten by the next appender.
        const finish = (position, waiting = false) => {
            const c = this._cache;
            if (c && position.segment !== null && c.name === segmentName(position.segment) && position.offset >= c.base)
                c.bytes = c.bytes.subarray(0, position.offset - c.base);
            return {items, position, more: false, waiting};
        };
        let records = 0;
        let deadline = GLib.get_monotonic_time() + SLICE_US;
        while (index < segments.length) {
            const first = segments[index];
            const name = segmentName(first);
            const nextFirst = index + 1 < segments.length ? segments[index + 1] : null;
            if (offset === HEADER && first > expected) {
                if (index === 0)
                    gap(expected, first - 1n, name, 'retention', `records before ${first} were removed by retention`);
                else
                    gap(expected, first - 1n, segmentName(expected), 'missing', `segment file ${segmentName(expected)} is missing`);
                expected = first;
            }
            const read = await this._segment(name, offset === HEADER ? 0 : offset, cancellable);
            let {bytes, base} = read;
            let why = read.why;
            if (bytes && offset === HEADER) {
                const problem = headerProblem(bytes, first, `${this.path}/${name}`);
                if (problem !== null) {
                    if (nextFirst === null && bytes.length < HEADER && MAGIC.every((m, k) => k >= bytes.length || bytes[k] === m))
                        return finish({segment: first, offset: HEADER, expected});
                    bytes = null;
                    why = problem;
                }
            }
            if (!bytes) {
                gap(expected, nextFirst !== null ? nextFirst - 1n : expected, name, 'foreign', `segment name ${name} is held by ${why}`);
                if (nextFirst === null)
                    return finish({segment: first, offset: HEADER, expected}, true);
                expected = nextFirst;
                index++;
                offset = HEADER;
                continue;
            }
            const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
            let at = offset - base;
            let sealed = false;
            for (;;) {
                if (records >= limit)
                    return {items, position: {segment: first, offset: base + at, expected}, more: true};
                if (GLib.get_monotonic_time() >= deadline) {
                    await yieldToLoop();
                    deadline = GLib.get_monotonic_time() + SLICE_US;
                }
                const frame = frameAt(bytes, view, at);
                if (frame && frame.valid && frame.sequence < expected && !frame.seal) {
                    at = frame.end; // a record before the start: not delivered
                    continue;
                }
                if (frame && frame.valid && frame.sequence <= MAX_SEQUENCE + 1n) {
                    if (frame.sequence > expected) {
                        gap(expected, frame.sequence - 1n, name, 'truncated',
                            `the frame at offset ${base + at} is numbered ${frame.sequence} where ${expected} was expected`);
                        expected = frame.sequence;
                    }
                    if (frame.seal) {
                        sealed = true;
                        at = frame.end;
                        break;
                    }
                    if (frame.sequence > MAX_SEQUENCE) {
                        gap(frame.sequence, frame.sequence, name, 'checksum', `offset ${base + at}: record number past the last allowed`);
                    } else if (deliver) {
                        items.push({
                            sequence: frame.sequence, time: frame.time, file: name, offset: base + at,
                            payload: bytes.subarray(at + HEAD, frame.end - 4),
                        });
                        records++;
                    }
                    expected = frame.sequence + 1n;
                    at = frame.end;
                    continue;
                }
                if (at >= bytes.length || tornTail(bytes, view, at))
                    break; // the end, or a torn or incomplete tail: not (yet) a record
                const detail = describeBad(bytes, view, at);
                const found = resync(bytes, view, at, expected, nextFirst);
                if (found !== null) {
                    gap(expected, found.sequence - 1n, name, 'checksum', `${detail}; records resume at offset ${base + found.at}`);
                    expected = found.sequence;
                    at = found.at;
                    continue;
                }
                if (nextFirst !== null) {
                    gap(expected, nextFirst - 1n, name, 'checksum', `${detail}; nothing readable after it`);
                    expected = nextFirst;
                    at = bytes.length;
                    break;
                }
                gap(expected, expected, name, 'checksum', `${detail}; nothing readable after it yet`);
                return finish({segment: first, offset: base + at, expected}, true);
            }
            if (sealed) {
                index++;
                if (nextFirst === null)
                    return finish({segment: expected, offset: HEADER, expected});
                offset = HEADER;
                continue;
            }
            if (nextFirst === null)
                return finish({segment: first, offset: base + at, expected});
            gap(expected, nextFirst - 1n, name, 'truncated', `segment ${name} ends at offset ${base + at} without a seal`);
            expected = nextFirst;
            index++;
            offset = HEADER;
        }
        return {items, position: {segment: null, offset: HEADER, expected}, more: false};
    }
}

function headerProblem(bytes, first, path) {
    if (bytes.length >= 4 && !MAGIC.every((m, k) => bytes[k] === m))
        return 'a file without the WHJL header';
    if (bytes.length >= 5 && bytes[4] !== VERSION) {
        throw new WormholeError('journalVersion', `journal segment '${path}' is format version ${bytes[4]}; ` +
            `this reader reads version ${VERSION}`, path);
    }
    if (bytes.length < HEADER)
        return `an incomplete header (${bytes.length} bytes)`;
    const named = new DataView(bytes.buffer, bytes.byteOffset, HEADER).getBigUint64(8, true);
    return named === first ? null : `a segment whose header names first record ${named}`;
}

// The next valid frame after damage at `bad`: {at, sequence}, or null.
function resync(bytes, view, bad, expected, nextFirst) {
    for (let at = bad + 1; at + OVERHEAD <= bytes.length; at++) {
        const length = view.getUint32(at, true);
        if (length !== SEAL && length > MAX_RECORD)
            continue;
        const sequence = view.getBigUint64(at + 4, true);
        if (sequence <= expected)
            continue;
        if (nextFirst !== null && sequence >= nextFirst + (length === SEAL ? 1n : 0n))
            continue;
        if (nextFirst === null && sequence - expected > BigInt(Math.floor((at - bad) / OVERHEAD) + 1))
            continue;
        const frame = frameAt(bytes, view, at);
        if (frame && frame.valid)
            return {at, sequence};
    }
    return null;
}

async function readFrom(file, offset, cancellable) {
    const stream = file.read(null);
    try {
        const chunks = [];
        let total = 0;
        for (;;) {
            const bytes = await readBytesAsync(stream, offset + total, 1 << 20, cancellable);
            if (bytes.get_size() === 0)
                break;
            chunks.push(bytes.toArray());
            total += bytes.get_size();
        }
        return joinChunks(chunks, total);
    } finally {
        stream.close(null);
    }
}

/** @param {string} name @returns {boolean} whether it follows the identifier rules */
export function isConsumerName(name) {
    try {
        validateIdentifier(name);
        return true;
    } catch (_) {
        return false;
    }
}

/**
 * Reads a durable consumer's cursor file (`NAME.cursor`).
 * @param {string} path
 * @returns {{acknowledged: bigint, delivering: bigint}|null} null when there is none
 * @throws {WormholeError} `invalidCursor` naming the file
 */
export function readJournalCursor(path) {
    let contents;
    try {
        [, contents] = Gio.File.new_for_path(path).load_contents(null);
    } catch (e) {
        if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.NOT_FOUND))
            return null;
        throw new WormholeError('invalidCursor', `cannot read the cursor ${path}: ${e.message}`, path);
    }
    let value = null;
    try {
        value = parseJSON(new TextDecoder('utf-8', {fatal: true}).decode(contents).trim(),
            {number: (src, integer) => integer ? BigInt(src) : Number(src)});
    } catch (_) {}
    const ok = n => typeof n === 'bigint' && n >= 0n && n <= MAX_SEQUENCE;
    if (value === null || typeof value !== 'object' || value.format !== 1n || !ok(value.acknowledged) ||
        !ok(value.delivering)) {
        throw new WormholeError('invalidCursor', `the cursor ${path} is not {"format":1,"acknowledged":A,` +
            '"delivering":D}: remove it to restart the consumer from its start position', path);
    }
    return {acknowledged: value.acknowledged, delivering: value.delivering};
}

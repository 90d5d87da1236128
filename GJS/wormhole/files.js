// SPDX-License-Identifier: MIT
/**
 * Group containers and the files below them (contract section 2), read without following a
 * symlink anywhere from the container down; mailbox reads (contract section 3), at once or
 * asynchronously (Gio's asynchronous reads, then the JSON in slices: the main loop runs between).
 * @module wormhole/files
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

import {WormholeError} from './errors.js';
import {FALLBACK_MS, decodeJSONBytes, decodeUTF8Pieces, parseJSONAsync, yieldToLoop} from './json.js';
import {DEFAULT_MAX_MESSAGE_BYTES, mailboxName} from './names.js';

// Awaits in loops are sequential on purpose: pieces, records and deliveries keep their order.
/* eslint-disable no-await-in-loop */

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
 * @throws {WormholeError} `unsafePath`
 */
export function checkDirectory(path) {
    let info;
    try {
        info = Gio.File.new_for_path(path).query_info(INFO, Gio.FileQueryInfoFlags.NOFOLLOW_SYMLINKS, null);
    } catch (e) {
        if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.NOT_FOUND))
            return false;
        throw new WormholeError('io', `cannot inspect ${path}: ${e.message}`, path);
    }
    checkInfo(path, info, Gio.FileType.DIRECTORY);
    return true;
}

export function checkInfo(path, info, type) {
    if (info.get_is_symlink() || info.get_file_type() === Gio.FileType.SYMBOLIC_LINK)
        throw new WormholeError('unsafePath', `${path} is a symbolic link; it is not followed`, path);
    if (info.get_file_type() !== type) {
        throw new WormholeError('unsafePath',
            `${path} is not a ${type === Gio.FileType.DIRECTORY ? 'directory' : 'regular file'}`, path);
    }
    const owner = info.get_attribute_uint32('unix::uid');
    if (owner !== uid())
        throw new WormholeError('unsafePath', `${path} is owned by uid ${owner}, not by this user`, path);
    const mode = info.get_attribute_uint32('unix::mode');
    if (mode & 0o022) {
        throw new WormholeError('unsafePath',
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
    const opened = openContainerFile(root, components, maxBytes);
    if (opened === null)
        return null;
    const {path, stream} = opened;
    try {
        const chunks = [];
        let total = 0;
        for (;;) {
            const bytes = stream.read_bytes(Math.min(1 << 20, maxBytes + 1 - total), null);
            total = addChunk(chunks, total, bytes, path, maxBytes);
            if (bytes.get_size() === 0)
                return joinChunks(chunks, total);
        }
    } catch (e) {
        throw readError(e, path);
    } finally {
        stream.close(null);
    }
}

/**
 * {@link readContainerFile} with Gio's asynchronous reads (1 MiB at a time): the checks and the
 * open are done at once (a few system calls), the reading in the main loop's idle time.
 * @param {string} root
 * @param {string[]} components
 * @param {number} maxBytes
 * @param {Gio.Cancellable} [cancellable]
 * @returns {Promise<Uint8Array[]|null>} the file's bytes in pieces of at most 1 MiB (never
 *   joined: a copy of a large file would hold the main loop), null when absent
 */
export async function readContainerFileAsync(root, components, maxBytes, cancellable = null) {
    const opened = openContainerFile(root, components, maxBytes);
    if (opened === null)
        return null;
    const {path, stream} = opened;
    try {
        const chunks = [];
        let total = 0;
        for (;;) {
            const want = Math.min(1 << 20, maxBytes + 1 - total);
            const bytes = await readBytesAsync(stream, total, want, cancellable);
            total = addChunk(chunks, total, bytes, path, maxBytes);
            if (bytes.get_size() === 0)
                return chunks;
        }
    } catch (e) {
        throw readError(e, path);
    } finally {
        stream.close(null);
    }
}

/**
 * Reads up to `size` bytes at `offset` of a seekable stream with Gio's asynchronous read. GJS
 * may block the callback of a read that completes while it sweeps during a major collection
 * (it logs "Attempting to run a JS callback during garbage collection"); when it has not come
 * after a second (or later: {@link FALLBACK_MS}) and Gio has finished the read (the stream has
 * no pending operation: the callback was due and lost), the bytes are read again, at once, from
 * the same offset.
 * @param {Gio.FileInputStream} stream
 * @param {number} offset
 * @param {number} size
 * @param {Gio.Cancellable} [cancellable]
 * @returns {Promise<GLib.Bytes>}
 */
export function readBytesAsync(stream, offset, size, cancellable = null) {
    return new Promise((resolve, reject) => {
        let settled = false;
        const watchdogs = FALLBACK_MS.slice(1).map(ms => GLib.timeout_source_new(ms));
        const settle = (fn, value) => {
            if (settled)
                return;
            settled = true;
            for (const source of watchdogs)
                source.destroy(); // safe on a source already gone
            fn(value);
        };
        stream.seek(offset, GLib.SeekType.SET, null);
        stream.read_bytes_async(size, GLib.PRIORITY_DEFAULT_IDLE, cancellable, (s, r) => {
            try {
                settle(resolve, s.read_bytes_finish(r));
            } catch (e) {
                settle(reject, e);
            }
        });
        // Still pending: Gio has not finished the read (a slow disk, a busy main loop), so the
        // callback was not lost; wait for it or the next mark.
        const watch = () => {
            if (settled || stream.has_pending())
                return GLib.SOURCE_REMOVE;
            try {
                stream.seek(offset, GLib.SeekType.SET, null);
                settle(resolve, stream.read_bytes(size, cancellable));
            } catch (e) {
                settle(reject, e);
            }
            return GLib.SOURCE_REMOVE;
        };
        for (const source of watchdogs) {
            source.set_callback(watch);
            source.attach(null);
        }
    });
}

// Checks the directories and the file, opens it and checks what was opened; null when absent.
function openContainerFile(root, components, maxBytes) {
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
        throw new WormholeError('io', `cannot read ${path}: ${e.message}`, path);
    }
    checkInfo(path, before, Gio.FileType.REGULAR);
    let stream;
    try {
        stream = file.read(null);
    } catch (e) {
        if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.NOT_FOUND))
            return null;
        throw new WormholeError('io', `cannot read ${path}: ${e.message}`, path);
    }
    try {
        const opened = stream.query_info(INFO, null);
        if (opened.get_attribute_uint64('unix::inode') !== before.get_attribute_uint64('unix::inode') ||
            opened.get_attribute_uint32('unix::device') !== before.get_attribute_uint32('unix::device')) {
            // Replaced between the check and the open: check what was opened instead.
            checkInfo(path, opened, Gio.FileType.REGULAR);
        }
        const size = opened.get_size();
        if (size > maxBytes)
            throw new WormholeError('messageTooLarge', `${path} is ${size} bytes, larger than the limit of ${maxBytes}`, path);
    } catch (e) {
        stream.close(null);
        throw readError(e, path);
    }
    return {path, stream};
}

function addChunk(chunks, total, bytes, path, maxBytes) {
    const n = bytes.get_size();
    if (n === 0)
        return total;
    chunks.push(bytes.toArray());
    if (total + n > maxBytes)
        throw new WormholeError('messageTooLarge', `${path} is more than ${maxBytes} bytes, the limit`, path);
    return total + n;
}

/**
 * Joins pieces of bytes into one array.
 * @param {Uint8Array[]} chunks
 * @param {number} [total] their length
 * @returns {Uint8Array}
 */
export function joinChunks(chunks, total = chunks.reduce((n, c) => n + c.length, 0)) {
    if (chunks.length === 1)
        return chunks[0];
    const out = new Uint8Array(total);
    let at = 0;
    for (const c of chunks) {
        out.set(c, at);
        at += c.length;
    }
    return out;
}

function readError(e, path) {
    if (e instanceof WormholeError)
        return e;
    return new WormholeError('io', `cannot read ${path}: ${e.message}`, path);
}

/**
 * Whether two byte arrays hold the same bytes (compared by GLib, at memcmp's speed).
 * @param {Uint8Array|null} a
 * @param {Uint8Array|null} b
 * @returns {boolean}
 */
export function sameBytes(a, b) {
    if (!a || !b || a.length !== b.length)
        return false;
    return new GLib.Bytes(a).equal(new GLib.Bytes(b));
}

/**
 * {@link sameBytes} for two lists of pieces, a piece at a time, letting the main loop run
 * between pieces.
 * @param {Uint8Array[]|null} a
 * @param {Uint8Array[]|null} b
 * @returns {Promise<boolean>}
 */
export async function sameChunks(a, b) {
    const length = list => list.reduce((n, c) => n + c.length, 0);
    if (!a || !b || length(a) !== length(b))
        return false;
    if (a.length !== b.length || a.some((c, k) => c.length !== b[k].length))
        return sameBytes(joinChunks(a), joinChunks(b)); // pieces cut elsewhere: rare
    for (let k = 0; k < a.length; k++) {
        if (!sameBytes(a[k], b[k]))
            return false;
        if (k + 1 < a.length)
            await yieldToLoop();
    }
    return true;
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
export function readMessage({
    group, directory = 'wormhole', identifier, root = undefined,
    maxBytes = DEFAULT_MAX_MESSAGE_BYTES,
}) {
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
        throw new WormholeError('decodingFailed', `${path} is not one JSON document: ${e.message}`, path);
    }
}


/**
 * Reads the message stored in a mailbox without holding the main loop: Gio's asynchronous
 * reads, then the UTF-8 decoding and the JSON parse in slices of a few milliseconds.
 * @param {object} options as {@link readMessage}, and `cancellable` (a `Gio.Cancellable`)
 * @returns {Promise<{text: string, message: *, chunks: Uint8Array[]}|null>} null when empty;
 *   `chunks` are the file's bytes in pieces ({@link joinChunks} joins them); rejects with the
 *   {@link WormholeError} {@link readMessage} throws
 */
export async function readMessageAsync({
    group, directory = 'wormhole', identifier, root = undefined,
    maxBytes = DEFAULT_MAX_MESSAGE_BYTES, cancellable = null,
}) {
    mailboxName(group, directory, identifier);
    root = root ?? containerRoot();
    const chunks = await readContainerFileAsync(root, [group, directory, `${identifier}.json`], maxBytes, cancellable);
    if (chunks === null)
        return null;
    const path = GLib.build_filenamev([root, group, directory, `${identifier}.json`]);
    try {
        const parts = await decodeUTF8Pieces(chunks);
        const text = parts.reduce((all, part) => all + part, ''); // a rope: never flattened here
        return {text, message: await parseJSONAsync(parts, {cancellable}), chunks};
    } catch (e) {
        throw new WormholeError('decodingFailed', `${path} is not one JSON document: ${e.message}`, path);
    }
}

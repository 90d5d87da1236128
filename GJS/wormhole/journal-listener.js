// SPDX-License-Identifier: MIT
/**
 * Journal listeners (contract section 6): records in sequence order from a start position,
 * each damaged or removed range reported once in its place, a read from the position after
 * every wake and after a bus reconnect (so a coalesced or lost signal never strands a record),
 * and durable consumers whose cursor is stored around each batch (at-least-once).
 * @module wormhole/journal-listener
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

import {WormholeError, printerr, safeCall, shown} from './errors.js';
import {decodeUTF8, parseJSON, parseJSONAsync} from './json.js';
import {HEADER, JournalReader, readJournalCursor} from './journal.js';
import {mailboxName, validateIdentifier, validateName} from './names.js';
import {Subscription} from './subscription.js';

// Awaits in loops are sequential on purpose: pieces, records and deliveries keep their order.
/* eslint-disable no-await-in-loop */

/** The most records handed out between two stores of a durable consumer's cursor. */
export const BATCH = 256;
const LARGE_RECORD = 64 * 1024; // parsed in slices above this size

/**
 * Reads one journal; made by {@link WormholeBus#listenJournal}.
 *
 * Options: `group`, `directory` (default `wormhole`), `identifier`; `from`: `'end'` (default:
 * the records appended after `ready`), `'start'`, or a sequence number; `consumer`: a durable
 * consumer's name (its stored cursor wins over `from`; a consumer in use by another process
 * rejects `ready` with `consumerBusy`); `onDamage(gap)`: a {@link JournalGap} per range that
 * cannot be delivered (default: a `wormhole: records A..B: …` line on standard error);
 * `onError(error)`: a journal that cannot be read, a record that is not JSON.
 *
 * The handler gets `{identifier, sequence, time, message, text, redelivery}` (`sequence` and
 * `time`, nanoseconds since 1970, are `BigInt`s; `redelivery` is true for a durable consumer's
 * records that an earlier run handed out and may not have handled). It may return a promise:
 * the next record waits for it, and a durable consumer's batch counts as handled when all have
 * settled.
 */
export class JournalListener extends Subscription {
    constructor(bus, {
        group, directory = 'wormhole', identifier, from = 'end', consumer = null,
        onDamage = null, onError = null,
    }, handler) {
        super(bus);
        const name = validateName(`${mailboxName(group, directory, identifier)}/journal`);
        if (consumer !== null)
            validateIdentifier(consumer);
        if (!(from === 'end' || from === 'start' || isSequence(from)))
            throw new WormholeError('invalidValue', `from ${shown(from)} is not 'start', 'end' or a sequence number`, from);
        Object.assign(this, {group, directory, identifier, consumer});
        this.reader = new JournalReader({root: bus.root, group, directory, identifier});
        this._from = from;
        this._handler = handler;
        this._onDamage = onDamage ?? (gap => printerr(`wormhole: ${gap}`));
        this._report = onError ?? (e => printerr(`wormhole: ${identifier}: ${e.message}`));
        this._position = null;
        this._reportedThrough = 0n;
        this._acknowledged = 0n;
        this._redeliverUntil = 0n;
        this._lock = null;
        this._pump = null;
        this._again = false;
        this._cancellable = new Gio.Cancellable();
        bus._register(this, {exact: [name]});
        this.ready = this.ready.then(() => this._start()).then(() => {
            this._wake();
        }, e => {
            this.cancel(); // a consumer in use, a cursor that cannot be read: nothing stays registered
            throw e;
        });
    }

    /** @returns {bigint|null} the number of the next record this listener delivers */
    get nextSequence() {
        return this._position ? this._position.expected : null;
    }

    async _start() {
        let cursor = null;
        if (this.consumer !== null) {
            this._lock = await ConsumerLock.take(this.reader.path, this.consumer);
            if (this.cancelled) {
                this._lock.release();
                return;
            }
            cursor = readJournalCursor(this._cursorPath());
        }
        let expected;
        if (cursor !== null) {
            expected = cursor.acknowledged + 1n;
            this._redeliverUntil = cursor.delivering;
        } else if (this._from === 'start') {
            expected = 1n;
        } else if (this._from === 'end') {
            expected = (await this.reader.end()).last + 1n;
        } else {
            expected = BigInt(this._from);
        }
        this._acknowledged = cursor ? cursor.acknowledged : expected - 1n;
        this._position = {segment: null, offset: HEADER, expected};
        this._reportedThrough = expected - 1n;
    }

    // Reads from the position to the end; a wake while a read runs makes one more read after it.
    _wake() {
        if (this.cancelled || this._position === null)
            return this._pump ?? Promise.resolve();
        if (this._pump) {
            this._again = true;
            return this._pump;
        }
        this._pump = (async () => {
            try {
                do {
                    this._again = false;
                    let more = true;
                    while (more && !this.cancelled) {
                        const walk = await this.reader.walk(this._position, {limit: BATCH, cancellable: this._cancellable});
                        more = walk.more;
                        await this._deliver(walk.items);
                        this._position = walk.position;
                    }
                } while (this._again && !this.cancelled);
            } catch (e) {
                if (!this.cancelled)
                    safeCall(this._report, e);
            } finally {
                this._pump = null;
            }
        })();
        return this._pump;
    }

    async _deliver(items) {
        const batch = items.filter(i => i.payload !== undefined);
        if (batch.length > 0 && this.consumer !== null)
            this._storeCursor(this._acknowledged, batch[batch.length - 1].sequence);
        for (const item of items) {
            if (this.cancelled)
                return;
            if (item.payload === undefined) {
                const floor = this._reportedThrough + 1n;
                if (item.to < floor)
                    continue;
                if (item.from < floor)
                    item.from = floor;
                this._reportedThrough = item.to;
                safeCall(this._onDamage, item);
                continue;
            }
            let text, message;
            try {
                text = decodeUTF8(item.payload);
                message = item.payload.length > LARGE_RECORD ? await parseJSONAsync(text) : parseJSON(text);
            } catch (e) {
                safeCall(this._report, new WormholeError('journalCorrupt', `record ${item.sequence} of ` +
                    `${this.reader.path}/${item.file} at offset ${item.offset} is not one JSON document: ${e.message}`));
                continue;
            }
            if (item.sequence > this._reportedThrough)
                this._reportedThrough = item.sequence;
            try {
                await safeCall(this._handler, {
                    identifier: this.identifier, sequence: item.sequence, time: item.time,
                    message, text, redelivery: item.sequence <= this._redeliverUntil,
                });
            } catch (e) {
                logError(e, 'wormhole: a journal handler rejected');
            }
        }
        if (batch.length > 0 && !this.cancelled) {
            this._acknowledged = batch[batch.length - 1].sequence;
            if (this.consumer !== null)
                this._storeCursor(this._acknowledged, this._acknowledged);
        }
    }

    _cursorPath() {
        return GLib.build_filenamev([this.reader.path, `${this.consumer}.cursor`]);
    }

    // Replaces NAME.cursor atomically: `.NAME.cursor.tmp` (0600), then a rename onto it.
    _storeCursor(acknowledged, delivering) {
        const target = Gio.File.new_for_path(this._cursorPath());
        const tmp = Gio.File.new_for_path(GLib.build_filenamev([this.reader.path, `.${this.consumer}.cursor.tmp`]));
        const text = `{"format":1,"acknowledged":${acknowledged},"delivering":${delivering}}\n`;
        try {
            try {
                tmp.delete(null);
            } catch (_) {}
            const out = tmp.create(Gio.FileCreateFlags.PRIVATE, null);
            out.write_all(new TextEncoder().encode(text), null);
            out.close(null);
            tmp.move(target, Gio.FileCopyFlags.OVERWRITE | Gio.FileCopyFlags.NOFOLLOW_SYMLINKS, null, null);
        } catch (e) {
            safeCall(this._report, new WormholeError('io', `cannot store the cursor ${target.get_path()}: ${e.message}`));
        }
    }

    _onPosted() {
        this._wake();
    }

    _onCatchUp() {
        this._wake();
    }

    _onCancelled() {
        this._cancellable.cancel();
        if (this._lock)
            this._lock.release();
        this._lock = null;
    }
}

function isSequence(value) {
    try {
        const n = BigInt(value);
        return n >= 1n && (typeof value === 'bigint' || Number.isSafeInteger(value));
    } catch (_) {
        return false;
    }
}

const releasing = new Map(); // lock path → settles when this process's flock(1) for it has ended

/**
 * `flock(LOCK_EX | LOCK_NB)` on `NAME.consumer.lock`, held by util-linux's `flock(1)` (Gio has
 * no `flock`): it takes the lock, says so on its standard output and then keeps it while its
 * standard input, a pipe from this process, is open. The lock is released by
 * {@link ConsumerLock#release} or when this process ends, however it ends.
 */
class ConsumerLock {
    static async take(journalPath, consumer) {
        GLib.mkdir_with_parents(journalPath, 0o700);
        const path = GLib.build_filenamev([journalPath, `${consumer}.consumer.lock`]);
        // This process's own earlier holder of the lock: wait until its flock(1) has ended (at
        // most 2 s: then taking the lock says whether it is free).
        if (releasing.has(path)) {
            let timer = 0;
            await Promise.race([releasing.get(path), new Promise(resolve => {
                timer = GLib.timeout_add(GLib.PRIORITY_DEFAULT, 2000, () => {
                    timer = 0;
                    resolve();
                    return GLib.SOURCE_REMOVE;
                });
            })]);
            if (timer)
                GLib.source_remove(timer);
        }
        try {
            Gio.File.new_for_path(path).create(Gio.FileCreateFlags.PRIVATE, null).close(null);
        } catch (e) {
            if (!e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.EXISTS))
                throw new WormholeError('io', `cannot create ${path}: ${e.message}`, path);
        }
        const launcher = new Gio.SubprocessLauncher({
            flags: Gio.SubprocessFlags.STDIN_PIPE |
            Gio.SubprocessFlags.STDOUT_PIPE,
        });
        let proc;
        try {
            proc = launcher.spawnv(['flock', '--nonblock', '--conflict-exit-code', '75', path,
                'sh', '-c', 'echo locked && exec cat >/dev/null']);
        } catch (e) {
            throw new WormholeError('toolMissing', `cannot start flock (util-linux) for ${path}: ${e.message}`, path);
        }
        const stdout = new Gio.DataInputStream({base_stream: proc.get_stdout_pipe()});
        const line = await new Promise(resolve => {
            stdout.read_line_async(GLib.PRIORITY_DEFAULT, null, (s, r) => {
                try {
                    resolve(s.read_line_finish_utf8(r)[0]);
                } catch (_) {
                    resolve(null);
                }
            });
        });
        if (line !== 'locked') {
            const status = await new Promise(resolve => proc.wait_async(null, () => resolve(proc.get_exit_status())));
            throw new WormholeError('consumerBusy', status === 75
                ? `consumer '${consumer}' of ${journalPath} is in use by another process`
                : `cannot lock ${path} (flock exited ${status})`, consumer);
        }
        return new ConsumerLock(proc, path);
    }

    constructor(proc, path) {
        this._proc = proc;
        this._path = path;
    }

    release() {
        const proc = this._proc;
        if (!proc)
            return;
        this._proc = null;
        const ended = new Promise(resolve => proc.wait_async(null, () => resolve()));
        const path = this._path;
        releasing.set(path, ended);
        ended.then(() => {
            if (releasing.get(path) === ended)
                releasing.delete(path);
        });
        try {
            proc.get_stdin_pipe().close(null);
        } catch (_) {}
    }
}

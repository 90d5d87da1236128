// SPDX-License-Identifier: MIT
/**
 * Mailbox listeners (contract section 3) and transient messages (section 7). A delivery reads
 * the file asynchronously and parses it in slices, so a large message never holds the main
 * loop; deliveries of one identifier never overlap and keep their order (a post that comes in
 * while a read runs is read after it; bursts coalesce, the last delivery is the latest).
 * @module wormhole/mailbox
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

import {WormholeError, printerr, safeCall, shown} from './errors.js';
import {checkDirectory, readMessageAsync, sameChunks} from './files.js';
import {parseJSON} from './json.js';
import {DEFAULT_MAX_MESSAGE_BYTES, MAX_TRANSIENT_BYTES, mailboxName} from './names.js';
import {Subscription} from './subscription.js';

// Awaits in loops are sequential on purpose: pieces, records and deliveries keep their order.
/* eslint-disable no-await-in-loop */

const encoder = new TextEncoder();
const CATCH_UNSIGNALLED_MS = 500;

/**
 * Listens to mailboxes; made by {@link WormholeBus#listen}, which documents the options and the
 * deliveries.
 */
export class MailboxListener extends Subscription {
    constructor(bus, {
        group, directory = 'wormhole', identifiers, stored = false, everyPost = false, transient = true,
        catchUnsignalled = true, maxBytes = DEFAULT_MAX_MESSAGE_BYTES, onError = null,
    }, handler) {
        super(bus);
        if (!Array.isArray(identifiers) || identifiers.length === 0)
            throw new WormholeError('invalidIdentifier', 'no identifier to listen to');
        this._byName = new Map();
        for (const id of identifiers)
            this._byName.set(mailboxName(group, directory, id), id);
        Object.assign(this, {group, directory, identifiers: [...identifiers]});
        this._options = {everyPost, catchUnsignalled, maxBytes};
        this._handler = handler;
        this._report = onError ?? ((e, id) => printerr(`wormhole: ${id}: ${e.message}`));
        this._last = new Map(); // identifier → the bytes last delivered, in pieces (null: cleared)
        this._reading = new Map(); // identifier → the next read to make once the current one ends
        this._pending = new Map(); // identifier → the 0.5 s source of a rename not yet posted
        this._monitor = null;
        this._cancellable = new Gio.Cancellable();
        const names = [...this._byName.keys()];
        this._watchDirectory();
        bus._register(this, {exact: names, messages: transient ? names : []});
        if (stored) {
            this.ready = this.ready.then(() => Promise.all(this.identifiers.map(id =>
                this._deliver(id, 'stored', null, false))));
        }
    }

    /**
     * Reads and delivers one identifier's mailbox; a call while a read of it runs is queued
     * (the latest one wins: the file holds the value).
     * @returns {Promise<void>} settles when this read (or the one that replaced it) is done
     */
    _deliver(id, reason, state, skipSame) {
        const queued = this._reading.get(id);
        if (queued) {
            queued.next = {reason, state, skipSame};
            return queued.done;
        }
        const entry = {next: {reason, state, skipSame}, done: null};
        this._reading.set(id, entry);
        entry.done = (async () => {
            while (entry.next && !this.cancelled) {
                const request = entry.next;
                entry.next = null;
                await this._readOnce(id, request);
            }
            this._reading.delete(id);
        })();
        return entry.done;
    }

    async _readOnce(id, {reason, state, skipSame}) {
        const last = this._last;
        let read;
        try {
            read = await readMessageAsync({
                group: this.group, directory: this.directory, identifier: id,
                root: this.bus.root, maxBytes: this._options.maxBytes, cancellable: this._cancellable,
            });
        } catch (e) {
            if (this.cancelled)
                return;
            last.delete(id);
            safeCall(this._report, e, id);
            return;
        }
        if (this.cancelled)
            return;
        if (read === null) {
            // Nothing stored at start, or still empty: no event. A catch-up reports a mailbox
            // emptied meanwhile only when it had delivered a message.
            if (reason === 'stored' || (skipSame && last.has(id) && last.get(id) === null) ||
                (reason === 'catchUp' && !last.has(id)))
                return;
            last.set(id, null);
            safeCall(this._handler, {identifier: id, message: null, text: null, reason: 'cleared', state});
            return;
        }
        if (skipSame && await sameChunks(last.get(id), read.chunks))
            return;
        if (this.cancelled)
            return;
        last.set(id, read.chunks);
        safeCall(this._handler, {identifier: id, message: read.message, text: read.text, reason, state});
    }

    _settle(id) {
        const source = this._pending.get(id);
        if (source) {
            GLib.source_remove(source);
            this._pending.delete(id);
        }
    }

    // The wormhole directory's watch (contract section 3, v1.3): a rename onto I.json that no
    // Posted follows within 0.5 s is delivered as a catch-up; while the bus is down, at once.
    _watchDirectory() {
        if (!this._options.catchUnsignalled || this._monitor || this.cancelled)
            return;
        const root = this.bus.root;
        const path = GLib.build_filenamev([root, this.group, this.directory]);
        try {
            if (!checkDirectory(GLib.build_filenamev([root, this.group])) || !checkDirectory(path))
                return;
            this._monitor = Gio.File.new_for_path(path).monitor_directory(Gio.FileMonitorFlags.WATCH_MOVES, null);
        } catch (e) {
            return; // refused or unwatchable: the bus alone (a delivery reports an unsafe container)
        }
        this._monitor.connect('changed', (m, file, other, event) => this._onRename(file, other, event));
    }

    _onRename(file, other, event) {
        let target = null;
        if (event === Gio.FileMonitorEvent.RENAMED)
            target = other;
        else if (event === Gio.FileMonitorEvent.MOVED_IN)
            target = file;
        const base = target ? target.get_basename() : null;
        if (!base || !base.endsWith('.json'))
            return;
        const id = base.slice(0, -'.json'.length);
        if (!this.identifiers.includes(id))
            return;
        this._settle(id);
        if (!this.bus.connected) {
            this._deliver(id, 'catchUp', null, true);
            return;
        }
        this._pending.set(id, GLib.timeout_add(GLib.PRIORITY_DEFAULT, CATCH_UNSIGNALLED_MS, () => {
            this._pending.delete(id);
            this._deliver(id, 'catchUp', null, true);
            return GLib.SOURCE_REMOVE;
        }));
    }

    _onPosted(name, state) {
        const id = this._byName.get(name);
        if (id !== undefined) {
            this._settle(id);
            this._deliver(id, 'posted', state, !this._options.everyPost);
            this._watchDirectory();
        }
    }

    _onMessage(name, params) {
        const id = this._byName.get(name);
        if (id === undefined)
            return;
        const v = params.n_children() >= 2 ? params.get_child_value(1) : null;
        if (!v || v.get_type_string() !== 's') {
            safeCall(this._report, new WormholeError('transientDropped', `transient message for ${shown(name)}: ` +
                'its second argument is not a string'), id);
            return;
        }
        const text = v.get_string()[0];
        const size = encoder.encode(text).length;
        if (size > MAX_TRANSIENT_BYTES) {
            safeCall(this._report, new WormholeError('transientDropped', `transient message for ${shown(name)} is ${size} ` +
                `bytes, over the limit of ${MAX_TRANSIENT_BYTES}`), id);
            return;
        }
        let message;
        try {
            message = parseJSON(text);
        } catch (e) {
            safeCall(this._report, new WormholeError('transientDropped',
                `transient message for ${shown(name)} is not one JSON text: ${e.message}`), id);
            return;
        }
        safeCall(this._handler, {identifier: id, message, text, reason: 'transient', state: null});
    }

    _onCatchUp() {
        for (const id of this.identifiers)
            this._deliver(id, 'catchUp', null, true);
        this._watchDirectory();
    }

    _onCancelled() {
        for (const id of [...this._pending.keys()])
            this._settle(id);
        this._cancellable.cancel();
        if (this._monitor)
            this._monitor.cancel();
        this._monitor = null;
    }
}

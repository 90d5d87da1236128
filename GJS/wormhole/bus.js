// SPDX-License-Identifier: MIT
/**
 * One Wormhole participant on a bus: its connection, its match rules (reference-counted, added
 * with asynchronous `AddMatch` calls), the dispatch of `Posted` and `Message` to subscriptions,
 * posting, and reconnecting when the bus comes back.
 * @module wormhole/bus
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

import {appId, callAsync, firstString, readState, socketPathOf} from './address.js';
import {WormholeError, printerr, safeCall, shown} from './errors.js';
import {containerRoot} from './files.js';
import {JournalListener} from './journal-listener.js';
import {parseJSON, stringifyJSON} from './json.js';
import {MailboxListener} from './mailbox.js';
import {
    MAX_TRANSIENT_BYTES, OBJECT_PATH, PLAIN_INTERFACE, bucketInterface, exactRule,
    mailboxName, prefixRule, validateName
} from './names.js';
import {DefaultsListener, NotificationListener} from './observers.js';

const encoder = new TextEncoder();

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
    constructor({
        address = undefined, connection = undefined, appId: app = null, onBusLost = null,
        onBusBack = null, root = undefined,
    } = {}) {
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
        this._lastStates = new Map(); // name → the last state posted or received: a post without one sends it
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
                throw new WormholeError('noSessionBus', 'no bus address: DBUS_SESSION_BUS_ADDRESS is not set and none was given');
            this._shared = false;
            let conn;
            try {
                conn = Gio.DBusConnection.new_for_address_sync(this.address,
                    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
                    Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, null, null);
            } catch (e) {
                throw new WormholeError('connectionFailed', `cannot reach the bus at '${this.address}': ${e.message}`, this.address);
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
        return Boolean(this.connection) && !this.connection.is_closed();
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
        if (state !== null)
            this._lastStates.set(name, state);
        const exact = this._exact.get(name);
        if (exact && (iface === PLAIN_INTERFACE || iface === this._buckets.get(name))) {
            for (const sub of [...exact])
                sub._onPosted(name, state, iface);
        }
        for (const [prefix, subs] of this._prefixes) {
            if (name.startsWith(prefix)) {
                for (const sub of [...subs])
                    sub._onPosted(name, state, iface);
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
            sub._onMessage(name, params);
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
                if (this.connected)
                    callAsync(this.connection, 'RemoveMatch', new GLib.Variant('(s)', [rule])).catch(() => {});
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
            throw new WormholeError('requestFailed', `cannot add the match rules: ${e.message}`);
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
        sub._onCancelled();
    }

    /**
     * Listens to notification names (or, with `prefix`, every name below prefixes ending in `/`):
     * Swift's `DarwinNotificationCenter.listen(name:)` and `listen(prefix:)`.
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
    listenNotifications(names, handler, {prefix = false} = {}) {
        return new NotificationListener(this, names, handler, {prefix});
    }

    /**
     * @deprecated since 2.0: {@link WormholeBus#listenNotifications} (the verb Swift and Python
     * use); this alias goes in the next release.
     * @param {string|string[]} names
     * @param {function(object): void} handler
     * @param {object} [options]
     * @returns {Subscription}
     */
    observe(names, handler, options = {}) {
        return this.listenNotifications(names, handler, options);
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
    listen(options, handler) {
        return new MailboxListener(this, options, handler);
    }

    /**
     * Listens to keys of a shared-defaults suite (all of them when `keys` is absent): Swift's
     * `GroupDefaults.listen`. The handler
     * gets `{key, value, json, removed, reason}` per change: `value` decoded as
     * {@link DefaultsSnapshot#get} does, `json` the stored JSON, `removed` true when the key is
     * gone; `reason` `posted` or `catchUp` (after a reconnect, the keys that changed meanwhile).
     * With `initial`, each key listened to that is present is delivered once (`reason` `initial`) when the
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
    listenDefaults(options, handler) {
        return new DefaultsListener(this, options, handler);
    }

    /**
     * @deprecated since 2.0: {@link WormholeBus#listenDefaults} (the verb Swift and Python use);
     * this alias goes in the next release.
     * @param {object} options
     * @param {function(object): void} handler
     * @returns {Subscription}
     */
    observeDefaults(options, handler) {
        return this.listenDefaults(options, handler);
    }

    /**
     * Reads a journal (contract section 6) from a position, then each record appended: in
     * sequence order, every damaged or removed range reported, and from its position again after
     * a bus reconnect. See {@link JournalListener} for the options and the deliveries.
     * @param {object} options
     * @param {function(object): (void|Promise<void>)} handler
     * @returns {JournalListener} await its `ready`
     */
    listenJournal(options, handler) {
        return new JournalListener(this, options, handler);
    }

    /**
     * Posts `Posted` on the name's bucket interface, then makes one call the bus answers
     * (`GetNameOwner` of this connection's unique name), so the signal has left the bus's
     * queue for this connection before the promise resolves: a program may exit then.
     * @param {string} name
     * @param {object} [options]
     * @param {number|bigint|null} [options.state] 0 to 2^64-1 (default: the name's last state as
     *   this bus knows it, the last one it posted or received for the name, else 0: the state is
     *   the name's, a post without one leaves it as it is; docs/contract.md, *Proposed for 1.5*)
     * @returns {Promise<void>} rejects with `notSent` when the bus did not take it or did not
     *   answer within the bound
     * @throws {WormholeError} an invalid name or state, before anything is sent
     */
    post(name, {state = undefined} = {}) {
        validateName(name);
        let s;
        if (state === undefined || state === null) {
            s = this._lastStates.get(name) ?? 0n;
        } else {
            try {
                s = BigInt(state);
            } catch (_) {
                s = -1n;
            }
            if (s < 0n || s > 0xffffffffffffffffn)
                throw new WormholeError('invalidValue', `state ${shown(state)} is not an integer from 0 to 2^64-1`, state);
        }
        this._lastStates.set(name, s);
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
            throw new WormholeError('invalidJSON', `message ${shown(json)} is not one JSON text: ${e.message}`, json);
        }
        const size = encoder.encode(compact).length;
        if (size > MAX_TRANSIENT_BYTES) {
            throw new WormholeError('transientTooLarge',
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
                ? other ?? changed : changed;
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
                        sub._onCatchUp();
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


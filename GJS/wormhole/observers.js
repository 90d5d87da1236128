// SPDX-License-Identifier: MIT
/**
 * Listeners to notification names (contract section 1) and to shared-defaults keys (section 5).
 * @module wormhole/observers
 */
import {WormholeError, printerr, safeCall} from './errors.js';
import {readDefaults, suiteOf} from './defaults.js';
import {PREFERENCES, defaultsKeyName, validateGroup, validateName, validatePrefix} from './names.js';
import {Subscription} from './subscription.js';

/**
 * Listens to names, or to every name below prefixes; made by
 * {@link WormholeBus#listenNotifications}.
 */
export class NotificationListener extends Subscription {
    constructor(bus, names, handler, {prefix = false} = {}) {
        super(bus);
        names = [...new Set(Array.isArray(names) ? names : [names])];
        if (names.length === 0)
            throw new WormholeError('invalidName', 'no name to listen to');
        names.forEach(prefix ? validatePrefix : validateName);
        this.names = names;
        this._handler = handler;
        bus._register(this, prefix ? {prefixes: names} : {exact: names});
    }

    _onPosted(name, state) {
        safeCall(this._handler, {name, state, reason: 'posted'});
    }

    _onCatchUp() {
        for (const name of this.names)
            safeCall(this._handler, {name, state: null, reason: 'catchUp'});
    }
}

/**
 * Listens to keys of a shared-defaults suite; made by {@link WormholeBus#listenDefaults}.
 */
export class DefaultsListener extends Subscription {
    constructor(bus, {group, suite = undefined, keys = undefined, initial = false, onError = null}, handler) {
        super(bus);
        validateGroup(group);
        suite = suiteOf(group, suite);
        this.group = group;
        this.suite = suite;
        this.keys = keys ?? null;
        this._prefix = `${group}/${PREFERENCES}/${suite}/`;
        const names = keys ? keys.map(k => defaultsKeyName(group, suite, k)) : null;
        if (!names)
            validatePrefix(this._prefix);
        this._handler = handler;
        this._report = onError ?? (e => printerr(`wormhole: ${e.message}`));
        this._snapshot = this._load();
        bus._register(this, names ? {exact: names} : {prefixes: [this._prefix]});
        if (initial) {
            this.ready = this.ready.then(() => {
                const snap = this._load();
                if (snap === null || this.cancelled)
                    return;
                this._snapshot = snap;
                for (const key of this.keys ?? snap.keys()) {
                    if (snap.has(key))
                        this._emit(key, snap, 'initial');
                }
            });
        }
    }

    _load() {
        try {
            return readDefaults({group: this.group, suite: this.suite, root: this.bus.root});
        } catch (e) {
            safeCall(this._report, e);
            return null;
        }
    }

    _emit(key, snap, reason) {
        safeCall(this._handler, snap.has(key)
            ? {key, value: snap.get(key), json: snap.json(key), removed: false, reason}
            : {key, value: null, json: null, removed: true, reason});
    }

    _onPosted(name) {
        if (!name.startsWith(this._prefix))
            return;
        const key = name.slice(this._prefix.length);
        if (this.keys && !this.keys.includes(key))
            return;
        const snap = this._load();
        if (snap === null)
            return;
        this._snapshot = snap;
        this._emit(key, snap, 'posted');
    }

    _onCatchUp() {
        const snap = this._load();
        if (snap === null)
            return;
        const before = this._snapshot;
        this._snapshot = snap;
        const candidates = this.keys ?? [...new Set([...before ? before.keys() : [], ...snap.keys()])].sort();
        for (const key of candidates) {
            const was = before && before.has(key) ? before.jsonText(key) : undefined;
            const now = snap.has(key) ? snap.jsonText(key) : undefined;
            if (was !== now)
                this._emit(key, snap, 'catchUp');
        }
    }
}

/** @deprecated since 2.0: {@link NotificationListener}; this alias goes in the next release. */
export const NameObserver = NotificationListener;
/** @deprecated since 2.0: {@link DefaultsListener}; this alias goes in the next release. */
export const DefaultsObserver = DefaultsListener;

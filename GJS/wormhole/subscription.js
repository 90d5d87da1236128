// SPDX-License-Identifier: MIT
/**
 * The base class of every subscription. A {@link WormholeBus} dispatches a signal to the
 * subscriptions registered for its name by calling their hook methods, which the subclasses
 * (an observer of names, a mailbox listener, a defaults observer, a journal listener) override.
 * @module wormhole/subscription
 */

/**
 * A subscription: `ready` settles once its match rules are active on the bus; `cancel()`
 * removes them. Subclasses register with `bus._register(this, {exact, prefixes, messages})`
 * and override the hooks `_onPosted`, `_onMessage`, `_onCatchUp` and `_onCancelled`.
 */
export class Subscription {
    /** @param {import('./bus.js').WormholeBus} bus */
    constructor(bus) {
        this.bus = bus;
        this.cancelled = false;
        /** @type {Promise<void>} */
        this.ready = null;
        this._rules = [];
        this._keys = {exact: [], prefixes: [], messages: []};
    }

    /** Removes the subscription (its rules are removed when no other subscription holds them). */
    cancel() {
        if (this.cancelled)
            return;
        this.cancelled = true;
        this.bus._remove(this);
    }

    /**
     * A `Posted` signal for one of the subscription's names (or a name below its prefix).
     * @param {string} _name
     * @param {bigint|null} _state
     * @param {string} _iface the interface it came on
     */
    _onPosted(_name, _state, _iface) {}

    /**
     * A `Message` signal (contract section 7) for one of its names.
     * @param {string} _name
     * @param {GLib.Variant} _params the signal's arguments
     */
    _onMessage(_name, _params) {}

    /** The bus came back: deliver what changed meanwhile, once. */
    _onCatchUp() {}

    /** The subscription was cancelled (its rules are already released). */
    _onCancelled() {}
}

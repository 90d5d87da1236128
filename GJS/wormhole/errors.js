// SPDX-License-Identifier: MIT
/**
 * The module's error type and the small helpers every part uses.
 * @module wormhole/errors
 */

/** An error of this module; `code` says which kind, `value` names the bad value when there is one. */
export class WormholeError extends Error {
    /**
     * @param {string} code a code of the contract's one table (`contract/errors.json`, the
     *   codes Swift and Python use): `invalidName`, `invalidIdentifier`, `invalidGroup`,
     *   `invalidDirectory`, `invalidSuite`, `invalidKey`, `invalidValue`, `invalidJSON` (a message
     *   given), `decodingFailed` (a stored file that is not JSON), `unsafePath`, `io`,
     *   `messageTooLarge`, `transientTooLarge`, `transientDropped`, `corruptSuite`, `typeMismatch`, `noSessionBus`, `connectionFailed`, `requestFailed`,
     *   `notSent`, `toolMissing`, `toolFailed`, `journalCorrupt`, `journalVersion`,
     *   `invalidCursor`, `consumerBusy`
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

/**
 * A value as an error message shows it: quoted, cut after 60 characters.
 * @param {*} value
 * @returns {string}
 */
export function shown(value) {
    const text = String(value);
    return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text);
}

/**
 * Calls a user's handler; what it throws is logged, never passed on to the dispatcher.
 * @param {Function} fn
 * @param {...*} args
 * @returns {*} what the handler returned
 */
export function safeCall(fn, ...args) {
    try {
        return fn(...args);
    } catch (e) {
        logError(e, 'wormhole: a handler threw');
        return undefined;
    }
}

/** @param {string} text one line for standard error (GJS's global printerr) */
export function printerr(text) {
    if (globalThis.printerr)
        globalThis.printerr(text);
    else
        console.error(text);
}

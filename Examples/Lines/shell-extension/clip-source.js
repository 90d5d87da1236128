// SPDX-License-Identifier: MIT
/**
 * The latest Lines clip, for the top-bar extension (and for anything else that runs gjs): the
 * part of the extension that needs no Shell, so that plain `gjs -m` tests can run it.
 *
 * Lines (Examples/Lines in the Swift package) is the shell app of scenario 1: its browser
 * extension's native host hands it clipped lines in the group `group.com.example.lines`
 * (or `LINES_GROUP`), wormhole directory `lines`, direction `toShell`. Each clip is a JSON object
 * `{"id": "<uuid>", "text": "…", "url": "…" (optional), "sentAt": <seconds since 1970>}`.
 * Whichever channel the sender uses, it reaches us: the mailbox channel stores the clip as
 * `lines/toShell.json` and posts it; both channels (the journal one, the default, too) write the
 * same object to the shared-defaults key `toShell` of the group's suite, which is listened to here.
 */
import GLib from 'gi://GLib';
import {WormholeError} from './wormhole.js';

/** The group Lines uses unless `LINES_GROUP` says otherwise. */
export const DEFAULT_GROUP = 'group.com.example.lines';
/** The wormhole directory of Lines. */
export const DIRECTORY = 'lines';
/** The direction (mailbox identifier and defaults key) of clips going to the app. */
export const IDENTIFIER = 'toShell';
/** The longest clip text shown in the top bar, in characters. */
export const MAX_LABEL_CHARS = 60;

/**
 * A clip, checked: `{id, text, url, sentAt}` with `url` null when absent or empty.
 * @param {*} message a decoded message or defaults value
 * @returns {{id: string, text: string, url: string|null, sentAt: number|null}}
 * @throws {WormholeError} `decodingFailed` when it is not a clip
 */
export function toClip(message) {
    if (message === null || typeof message !== 'object' || Array.isArray(message) ||
        typeof message.text !== 'string') {
        throw new WormholeError('decodingFailed',
            `not a Lines clip (an object with a string "text"): ${JSON.stringify(message)?.slice(0, 80)}`);
    }
    return {
        id: typeof message.id === 'string' ? message.id : '',
        text: message.text,
        url: typeof message.url === 'string' && message.url !== '' ? message.url : null,
        sentAt: typeof message.sentAt === 'number' ? message.sentAt : null,
    };
}

/**
 * The top bar's text for a clip: the text on one line, shortened to {@link MAX_LABEL_CHARS}.
 * @param {{text: string}|null} clip
 * @returns {string}
 */
export function formatClip(clip) {
    if (!clip)
        return 'Lines: —';
    const flat = clip.text.replace(/\s+/g, ' ').trim();
    const chars = [...flat];
    return `Lines: ${chars.length > MAX_LABEL_CHARS ? `${chars.slice(0, MAX_LABEL_CHARS - 1).join('')}…` : flat}`;
}

/**
 * Follows the latest clip: calls `onClip(clip, how)` with the stored one at start (when there is
 * one) and then each new one the moment it is stored. `how` is the delivery's reason
 * (`stored`, `initial`, `posted`, `catchUp`, `transient`). A clip seen through both the mailbox
 * and the defaults key (same `id`) is delivered once.
 */
export class ClipSource {
    /**
     * @param {object} options
     * @param {import('./wormhole.js').WormholeBus} options.bus
     * @param {string} [options.group] default `LINES_GROUP` or {@link DEFAULT_GROUP}
     * @param {function(object, string): void} options.onClip
     * @param {function(Error): void} [options.onError]
     */
    constructor({bus, group = undefined, onClip, onError = null}) {
        this.bus = bus;
        this.group = group ?? (GLib.getenv('LINES_GROUP') || DEFAULT_GROUP);
        this.onClip = onClip;
        this.onError = onError ?? (e => console.warn(`Lines: ${e.message}`));
        this.latest = null;
        this._subs = [];
        this.ready = null;
    }

    /**
     * Starts following. Resolves once both subscriptions are active on the bus (and the stored
     * clip, if any, was delivered).
     * @returns {Promise<void>}
     */
    start() {
        const take = (message, how) => {
            let clip;
            try {
                clip = toClip(message);
            } catch (e) {
                this.onError(e);
                return;
            }
            if (this.latest && clip.id !== '' && clip.id === this.latest.id)
                return;
            this.latest = clip;
            this.onClip(clip, how);
        };
        this._subs.push(this.bus.listen({group: this.group, directory: DIRECTORY, identifiers: [IDENTIFIER],
            stored: true, onError: e => this.onError(e)}, d => {
            if (d.message !== null)
                take(d.message, d.reason);
        }));
        this._subs.push(this.bus.listenDefaults({group: this.group, keys: [IDENTIFIER], initial: true,
            onError: e => this.onError(e)}, c => {
            if (!c.removed)
                take(c.value, c.reason);
        }));
        /** Settles once both subscriptions are active (see {@link ClipSource#start}). */
        this.ready = Promise.all(this._subs.map(s => s.ready)).then(() => {});
        return this.ready;
    }

    /** Stops following (the bus is left as it is). */
    stop() {
        for (const s of this._subs)
            s.cancel();
        this._subs = [];
    }
}

// SPDX-License-Identifier: MIT
/**
 * Bus addresses, the app ID of a sandboxed participant (contract section 8), calls to the bus
 * daemon, and the reading of a signal's arguments (contract section 1).
 * @module wormhole/address
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

import {CALL_TIMEOUT_MS} from './names.js';

const BUS_NAME = 'org.freedesktop.DBus';
const BUS_PATH = '/org/freedesktop/DBus';
const BUS_INTERFACE = 'org.freedesktop.DBus';
const INTEGER_TYPES = 'ynqiuxt';

/**
 * The socket path of a `unix:path=` bus address (the first one that has it), unescaped.
 * @param {string} address
 * @returns {string|null} null for abstract sockets and other transports
 */
export function socketPathOf(address) {
    for (const entry of address.split(';')) {
        if (!entry.startsWith('unix:'))
            continue;
        for (const pair of entry.slice(5).split(',')) {
            if (pair.startsWith('path='))
                return decodeURIComponent(pair.slice(5));
        }
    }
    return null;
}

/**
 * The app ID of a sandboxed participant (contract section 8): `/.flatpak-info` when present,
 * else the given one, else `WORMHOLE_APP_ID`, else `FLATPAK_ID`.
 * @param {string|null} [given]
 * @returns {string|null}
 */
export function appId(given = null) {
    if (GLib.file_test('/.flatpak-info', GLib.FileTest.EXISTS)) {
        try {
            const kf = new GLib.KeyFile();
            kf.load_from_file('/.flatpak-info', GLib.KeyFileFlags.NONE);
            const name = kf.get_string('Application', 'name');
            if (name)
                return name;
        } catch (_) {}
    }
    return given || GLib.getenv('WORMHOLE_APP_ID') || GLib.getenv('FLATPAK_ID') || null;
}

export function callAsync(connection, method, parameters, replyType) {
    return new Promise((resolve, reject) => {
        connection.call(BUS_NAME, BUS_PATH, BUS_INTERFACE, method, parameters,
            replyType ? new GLib.VariantType(replyType) : null, Gio.DBusCallFlags.NONE, CALL_TIMEOUT_MS, null,
            (conn, result) => {
                try {
                    resolve(conn.call_finish(result));
                } catch (e) {
                    reject(e);
                }
            });
    });
}

export function readState(params) {
    if (params.n_children() < 2)
        return null;
    const v = params.get_child_value(1);
    const t = v.get_type_string();
    if (t.length !== 1 || !INTEGER_TYPES.includes(t))
        return null;
    const small = {y: 'get_byte', n: 'get_int16', q: 'get_uint16', i: 'get_int32', u: 'get_uint32'}[t];
    // x, t: printed, so exact past 2^53
    const n = small ? BigInt(v[small]()) : BigInt(v.print(false));
    return n < 0n ? null : n;
}

export function firstString(params) {
    if (!params || !params.get_type_string().startsWith('(') || params.n_children() < 1)
        return null;
    const v = params.get_child_value(0);
    return v.get_type_string() === 's' ? v.get_string()[0] : null;
}

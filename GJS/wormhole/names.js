// SPDX-License-Identifier: MIT
/**
 * Names, buckets and match rules (contract section 1), and the checks of every name, group,
 * directory, identifier and suite (contract section 2).
 * @module wormhole/names
 */
import {WormholeError, shown} from './errors.js';

/** The version of the Wormhole contract this module implements (`wormholectl --version`'s). */
export const CONTRACT_VERSION = '1.4';
/** The version of this module: the project's (`Sources/Wormhole/Version.swift`; `scripts/version.sh --check`). */
export const VERSION = '2.0.0';
/** The object path of every Wormhole signal. */
export const OBJECT_PATH = '/org/wormhole/Notify1';
/** The interface of hand-typed triggers (and the prefix of every bucket interface). */
export const PLAIN_INTERFACE = 'org.wormhole.Notify1';
/** The longest notification name, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 900;
/** The bus daemon's longest match rule, in bytes. */
export const MAX_RULE_BYTES = 1024;
/** The largest transient message, in bytes of compact JSON. */
export const MAX_TRANSIENT_BYTES = 64 * 1024;
/** The default largest stored message a reader accepts. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** How deep JSON may nest before a reader refuses it (the Swift suite reader's limit). */
export const MAX_JSON_DEPTH = 512;
/** The bound of every call to the bus, in milliseconds. */
export const CALL_TIMEOUT_MS = 5000;
/** The directory name reserved for shared defaults. */
export const PREFERENCES = 'Preferences';

const encoder = new TextEncoder();

// ---------------------------------------------------------------------------------------------
// Names, buckets and match rules (contract section 1)

/**
 * The 32-bit FNV-1a hash of a string's UTF-8 bytes.
 * @param {string} text
 * @returns {number} an unsigned 32-bit integer
 */
export function fnv1a32(text) {
    let hash = 0x811c9dc5;
    for (const byte of encoder.encode(text)) {
        hash ^= byte;
        hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return hash >>> 0;
}

/**
 * The bucket interface a Wormhole sender posts `name` on.
 * @param {string} name
 * @returns {string} `org.wormhole.Notify1.B` + four upper-case hex digits
 */
export function bucketInterface(name) {
    const low = (fnv1a32(name) & 0xffff).toString(16).toUpperCase().padStart(4, '0');
    return `${PLAIN_INTERFACE}.B${low}`;
}

/**
 * Quotes a value for a match rule: `'…'`, each `'` written as `'\''` (a backslash stays literal).
 * @param {string} value
 * @returns {string}
 */
export function quoteRuleValue(value) {
    return `'${value.replaceAll("'", "'\\''")}'`;
}

/**
 * The match rule of an exact name on one interface.
 * @param {string} name
 * @param {string} iface
 * @param {string} [member]
 * @returns {string}
 */
export function exactRule(name, iface, member = 'Posted') {
    return `type='signal',interface=${quoteRuleValue(iface)},member=${quoteRuleValue(member)},` +
        `arg0=${quoteRuleValue(name)}`;
}

/**
 * The match rule of every name below a prefix that ends in `/`.
 * @param {string} prefix
 * @returns {string}
 */
export function prefixRule(prefix) {
    return `type='signal',path='${OBJECT_PATH}',member='Posted',arg0path=${quoteRuleValue(prefix)}`;
}
/**
 * Checks a notification name (1 to 900 bytes of UTF-8, no NUL, exact-name rule at most 1024 bytes).
 * @param {string} name
 * @returns {string} the name
 * @throws {WormholeError} `invalidName`, naming it
 */
export function validateName(name) {
    if (typeof name !== 'string')
        throw new WormholeError('invalidName', `notification name ${shown(name)} is not a string`, name);
    if (name.isWellFormed && !name.isWellFormed())
        throw new WormholeError('invalidName', `notification name ${shown(name)} is not valid UTF-8`, name);
    const bytes = encoder.encode(name).length;
    if (bytes === 0)
        throw new WormholeError('invalidName', 'notification name is empty (it must be 1 to 900 bytes)', name);
    if (bytes > MAX_NAME_BYTES) {
        throw new WormholeError('invalidName',
            `notification name ${shown(name)} is ${bytes} bytes, longer than the limit of ${MAX_NAME_BYTES}`, name);
    }
    if (name.includes('\0'))
        throw new WormholeError('invalidName', `notification name ${shown(name)} contains a NUL byte`, name);
    if (/[\uD800-\uDFFF]/.test(name.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, '')))
        throw new WormholeError('invalidName', `notification name ${shown(name)} is not valid UTF-8`, name);
    const rule = encoder.encode(exactRule(name, bucketInterface(name))).length;
    if (rule > MAX_RULE_BYTES) {
        throw new WormholeError('invalidName', `notification name ${shown(name)} cannot be observed: its match ` +
            `rule would be ${rule} bytes, and the bus daemon accepts at most ${MAX_RULE_BYTES}`, name);
    }
    return name;
}

/**
 * Checks a prefix: a valid name that ends in `/`.
 * @param {string} prefix
 * @returns {string}
 */
export function validatePrefix(prefix) {
    validateName(prefix);
    if (!prefix.endsWith('/'))
        throw new WormholeError('invalidName', `prefix ${shown(prefix)} does not end in "/"`, prefix);
    return prefix;
}

const COMPONENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

function validateComponent(kind, code, value, limit) {
    if (typeof value !== 'string' || !COMPONENT.test(value) || value.length > limit) {
        throw new WormholeError(code, `${kind} ${shown(value)} is invalid: it must be 1 to ${limit} bytes of ` +
            'A-Z a-z 0-9 . _ - not starting with "."', value);
    }
    return value;
}

/** @param {string} group @returns {string} the group, checked (contract section 2) */
export function validateGroup(group) {
    return validateComponent('group identifier', 'invalidGroup', group, 255);
}

/** @param {string} directory @returns {string} a wormhole directory name, checked (not `Preferences`) */
export function validateDirectory(directory) {
    validateComponent('directory', 'invalidDirectory', directory, 255);
    if (directory === PREFERENCES) {
        throw new WormholeError('invalidDirectory',
            `directory "${PREFERENCES}" is reserved for shared defaults`, directory);
    }
    return directory;
}

/** @param {string} identifier @returns {string} a message identifier, checked */
export function validateIdentifier(identifier) {
    return validateComponent('identifier', 'invalidIdentifier', identifier, 200);
}

/** @param {string} suite @returns {string} a suite name, checked */
export function validateSuite(suite) {
    return validateComponent('suite', 'invalidSuite', suite, 200);
}

/**
 * The notification name of a mailbox.
 * @param {string} group @param {string} directory @param {string} identifier
 * @returns {string} `<group>/<directory>/<identifier>`
 */
export function mailboxName(group, directory, identifier) {
    return `${validateGroup(group)}/${validateDirectory(directory)}/${validateIdentifier(identifier)}`;
}

/**
 * The notification name of a shared-defaults key (checked as a name).
 * @param {string} group @param {string} suite @param {string} key
 * @returns {string} `<group>/Preferences/<suite>/<key>`
 */
export function defaultsKeyName(group, suite, key) {
    if (typeof key !== 'string' || key.length === 0 || key.includes('\0'))
        throw new WormholeError('invalidKey', `key ${shown(key)} is invalid: it must be 1 or more bytes without NUL`, key);
    const name = `${validateGroup(group)}/${PREFERENCES}/${validateSuite(suite)}/${key}`;
    try {
        return validateName(name);
    } catch (e) {
        throw new WormholeError('invalidKey', `key ${shown(key)} is invalid: ${e.message}`, key);
    }
}

// SPDX-License-Identifier: MIT
/**
 * Wormhole for GJS: listen to Darwin-style notifications, mailboxes, journals and shared
 * defaults, read shared defaults, receive transient messages and post, as contract 1.4 of the
 * Wormhole project says, from a `gjs -m` program or a GNOME Shell 45+ extension.
 *
 * This file is the one entry point; the modules are in the folder `wormhole/` beside it (keep
 * the two together when vendoring: docs/gjs.md, *Vendoring*). No binaries: the bus through
 * `Gio.DBusConnection`, the files through `Gio.File`. What needs `flock(2)` (storing a mailbox
 * message, writing shared defaults, appending to a journal) goes through the project's
 * command-line tool, found and checked by `findTool`. This module never rings the doorbell and
 * is never rung (contract section 9).
 *
 *     import {WormholeBus} from './wormhole.js';
 *     const bus = WormholeBus.connect();                 // DBUS_SESSION_BUS_ADDRESS, own connection
 *     const sub = bus.listen({group: 'group.com.example.lines', directory: 'lines',
 *         identifiers: ['toShell']}, d => print(d.identifier, d.text));
 *     await sub.ready;                                   // the match rules are active
 *
 * @module wormhole
 */
export {WormholeError} from './wormhole/errors.js';
export {
    CALL_TIMEOUT_MS, CONTRACT_VERSION, DEFAULT_MAX_MESSAGE_BYTES, MAX_JSON_DEPTH, MAX_NAME_BYTES, MAX_RULE_BYTES,
    MAX_TRANSIENT_BYTES, OBJECT_PATH, PLAIN_INTERFACE, PREFERENCES, VERSION, bucketInterface, defaultsKeyName,
    exactRule, fnv1a32, mailboxName, prefixRule, quoteRuleValue, validateDirectory, validateGroup,
    validateIdentifier, validateName, validatePrefix, validateSuite
} from './wormhole/names.js';
export {
    JSONParser, JSONSyntaxError, RawNumber, decodeJSONBytes, decodeUTF8, decodeUTF8Async, decodeUTF8Pieces, parseJSON,
    parseJSONAsync, stringifyJSON
} from './wormhole/json.js';
export {
    containerRoot, joinChunks, readContainerFile, readContainerFileAsync, readMessage, sameChunks,
    readMessageAsync
} from './wormhole/files.js';
export {DefaultsSnapshot, TypedValue, readDefaults} from './wormhole/defaults.js';
export {Subscription} from './wormhole/subscription.js';
export {
    DefaultsListener, DefaultsObserver, NameObserver, NotificationListener
} from './wormhole/observers.js';
export {MailboxListener} from './wormhole/mailbox.js';
export {JournalListener} from './wormhole/journal-listener.js';
export {JournalGap, JournalReader, crc32c, readJournalCursor, segmentName} from './wormhole/journal.js';
export {WormholeBus} from './wormhole/bus.js';
export {appId, socketPathOf} from './wormhole/address.js';
export {
    TOOL_NAME, TOOL_PACKAGE, TOOL_VERSION_MARK, appendJournal, clearMessage, deleteDefault, findTool, runWormhole,
    sendMessage, writeDefault
} from './wormhole/tool.js';

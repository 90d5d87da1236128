// SPDX-License-Identifier: MIT
/**
 * What goes through the project's command-line tool: the writes that need `flock(2)`, which
 * Gio 2.74 cannot take (storing a mailbox message, writing shared defaults, appending to a
 * journal). The tool is found in one place, {@link findTool}, and checked from its
 * `--version` line (contract section 4, v1.4), so that no other program of the same name is
 * started for a write (Debian's magic-wormhole installs a `wormhole`, which is never looked for).
 * @module wormhole/tool
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

import {WormholeError, shown} from './errors.js';
import {suiteOf} from './defaults.js';
import {parseJSONAsync} from './json.js';
import {defaultsKeyName, mailboxName, validateGroup} from './names.js';

// Awaits in loops are sequential on purpose: pieces, records and deliveries keep their order.
/* eslint-disable no-await-in-loop */

/** The name the tool is looked for under on `PATH` (the Debian package's and the build's). */
export const TOOL_NAME = 'wormholectl';
/** What this project's tool writes in its `--version` line (`wormholectl 2.0.0 (contract 1.4)`). */
export const TOOL_VERSION_MARK = '(contract 1.';
/** The Debian package that installs the tool. */
export const TOOL_PACKAGE = 'wormholectl';
/** How long `--version` may take, in milliseconds. */
const VERSION_TIMEOUT_MS = 10000;

const found = new Map(); // the override ('' for none) → Promise of the path

// Runs argv to its end: {status, stdout, stderr}; `timeoutMs` > 0 ends it after that long.
function communicate(argv, {input = null, env = {}, timeoutMs = 0} = {}) {
    const launcher = new Gio.SubprocessLauncher({
        flags: Gio.SubprocessFlags.STDIN_PIPE |
        Gio.SubprocessFlags.STDOUT_PIPE | Gio.SubprocessFlags.STDERR_PIPE,
    });
    for (const [k, v] of Object.entries(env))
        launcher.setenv(k, v, true);
    const proc = launcher.spawnv(argv);
    let timer = 0;
    if (timeoutMs > 0) {
        timer = GLib.timeout_add(GLib.PRIORITY_DEFAULT, timeoutMs, () => {
            timer = 0;
            proc.force_exit();
            return GLib.SOURCE_REMOVE;
        });
    }
    return new Promise((resolve, reject) => {
        proc.communicate_utf8_async(input, null, (p, result) => {
            if (timer)
                GLib.source_remove(timer);
            try {
                const [, stdout, stderr] = p.communicate_utf8_finish(result);
                resolve({
                    status: p.get_if_exited() ? p.get_exit_status() : 128 + p.get_term_sig(),
                    stdout: stdout ?? '', stderr: stderr ?? '',
                });
            } catch (e) {
                reject(e);
            }
        });
    });
}

// The first line of `path --version` when it is this project's tool, else why not.
async function checkVersion(path) {
    let r;
    try {
        r = await communicate([path, '--version'], {timeoutMs: VERSION_TIMEOUT_MS});
    } catch (e) {
        return {ok: false, why: `${path} could not be started (${e.message})`};
    }
    const line = `${r.stdout}${r.stderr}`.split('\n').find(l => l.trim() !== '') ?? '';
    if (r.status === 0 && line.includes(TOOL_VERSION_MARK))
        return {ok: true, line};
    return {
        ok: false, why: `${path} is another program (its --version says ${JSON.stringify(line.slice(0, 80))}, ` +
        `not "… ${TOOL_VERSION_MARK}x)")`,
    };
}

async function lookUp(override) {
    const tried = [];
    const candidates = [];
    if (override) {
        const path = override.includes('/') ? override : GLib.find_program_in_path(override);
        if (path === null)
            tried.push(`${override} (WORMHOLE_BIN or the command option) is not on PATH`);
        else
            candidates.push(path);
    } else {
        const path = GLib.find_program_in_path(TOOL_NAME);
        if (path === null)
            tried.push(`no ${TOOL_NAME} on PATH`);
        else
            candidates.push(path);
    }
    for (const path of candidates) {
        const check = await checkVersion(path);
        if (check.ok)
            return path;
        tried.push(check.why);
    }
    const looked = `'${override || TOOL_NAME}'`;
    throw new WormholeError('toolMissing', `Wormhole's command-line tool was not found (looked for ${looked}: ` +
        `${tried.join('; ')}). Install the Debian package '${TOOL_PACKAGE}', or build it from source ` +
        "(swift build --product wormholectl) and set WORMHOLE_BIN to the executable's path", override || TOOL_NAME);
}

/**
 * Finds the project's command-line tool, once per override (the answer is cached): `command`
 * when given, else `WORMHOLE_BIN` (a path, or a name looked up on `PATH`), else `wormholectl`
 * on `PATH`. A candidate is taken only when its `--version` line has `(contract 1.` (this
 * project's `wormholectl 2.0.0 (contract 1.4)`), so another program is never started for a write.
 * @param {object} [options]
 * @param {string} [options.command] an explicit executable (path or name)
 * @returns {Promise<string>} the executable's path
 * @throws {WormholeError} `toolMissing`, naming the programs looked for and the package
 */
export function findTool({command = null} = {}) {
    const override = command ?? GLib.getenv('WORMHOLE_BIN') ?? '';
    let promise = found.get(override);
    if (!promise) {
        promise = lookUp(override);
        found.set(override, promise);
        promise.catch(() => found.delete(override)); // not cached: it may be installed later
    }
    return promise;
}

/**
 * Runs the `wormholectl` command with arguments (plus, when `bus` is given, its `--bus-address`
 * and its container root as `WORMHOLE_CONTAINER_ROOT`).
 * @param {string[]} args
 * @param {object} [options]
 * @param {string} [options.input] standard input
 * @param {WormholeBus} [options.bus]
 * @param {string} [options.command] the executable (default: {@link findTool}'s)
 * @returns {Promise<{status: number, stdout: string, stderr: string}>} rejects with `toolMissing`
 *   when the tool is not found
 */
export async function runWormhole(args, {input = null, bus = null, command = null} = {}) {
    const argv = [await findTool({command}), ...args];
    if (bus && bus.address) {
        // Before a `--` (after it, every word is an argument).
        const end = argv.indexOf('--');
        argv.splice(end < 0 ? argv.length : end, 0, '--bus-address', bus.address);
    }
    // The command uses the participant's container root.
    return communicate(argv, {input, env: bus && bus.root ? {WORMHOLE_CONTAINER_ROOT: bus.root} : {}});
}

// The JSON checked in slices (a large message never holds the main loop); a bad one rejects.
async function checkJSON(json) {
    try {
        await parseJSONAsync(json);
    } catch (e) {
        throw new WormholeError('invalidJSON', `message ${shown(json)} is not one JSON text: ${e.message}`, json);
    }
}

async function mustRun(args, options) {
    if (options.input !== undefined && options.input !== null)
        await checkJSON(options.input);
    const r = await runWormhole(args, options);
    if (r.status !== 0) {
        throw new WormholeError('toolFailed', `wormholectl ${args[0]} exited ${r.status}: ` +
            `${r.stderr.split('\n')[0]}`, r.status);
    }
    return r;
}

/**
 * Stores a mailbox message and posts (`wormholectl send`): the temporary file under `flock`.
 * @param {object} options `{group, directory, identifier, json (text), bus, command}`
 * @returns {Promise<{status, stdout, stderr}>} rejects with `invalidJSON` (the JSON is checked
 *   in slices first), `toolMissing`, or `toolFailed` on a non-zero exit; an invalid group, directory
 *   or identifier throws at once
 */
export function sendMessage({group, directory = 'wormhole', identifier, json, bus = null, command = null}) {
    mailboxName(group, directory, identifier);
    return mustRun(['send', '--group', group, '--directory', directory, identifier], {input: json, bus, command});
}

/**
 * Appends a journal record (`wormholectl send --journal`).
 * @param {object} options `{group, directory, identifier, json, bus, command}`
 */
export function appendJournal({group, directory = 'wormhole', identifier, json, bus = null, command = null}) {
    mailboxName(group, directory, identifier);
    return mustRun(['send', '--journal', '--group', group, '--directory', directory, identifier],
        {input: json, bus, command});
}

/**
 * Empties a mailbox (`wormholectl clear`).
 * @param {object} options `{group, directory, identifier, bus, command}`
 */
export function clearMessage({group, directory = 'wormhole', identifier, bus = null, command = null}) {
    mailboxName(group, directory, identifier);
    return mustRun(['clear', '--group', group, '--directory', directory, identifier], {bus, command});
}

/**
 * Writes a shared-defaults value (`wormholectl defaults write`, under the suite lock).
 * @param {object} options `{group, suite, key, json, bus, command}`
 */
export function writeDefault({group, suite = undefined, key, json, bus = null, command = null}) {
    validateGroup(group);
    const s = suiteOf(group, suite);
    defaultsKeyName(group, s, key);
    return mustRun(['defaults', 'write', '--group', group, '--suite', s, '--', key], {input: json, bus, command});
}

/**
 * Removes a shared-defaults key (`wormholectl defaults delete`).
 * @param {object} options `{group, suite, key, bus, command}`
 */
export function deleteDefault({group, suite = undefined, key, bus = null, command = null}) {
    validateGroup(group);
    const s = suiteOf(group, suite);
    defaultsKeyName(group, s, key);
    return mustRun(['defaults', 'delete', '--group', group, '--suite', s, '--', key], {bus, command});
}


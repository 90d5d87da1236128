// SPDX-License-Identifier: MIT
/**
 * A small test harness for `gjs -m` test programs: a private dbus-daemon, temporary
 * directories, child processes whose output lines are awaited with bounded timeouts, and a
 * runner. No sleeps: every wait is on an event (a line, a callback) with a deadline that fails
 * the test.
 */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import System from 'system';

import {WormholeBus} from '../wormhole.js';

/** The repository (two levels above this file). */
export const REPO = Gio.File.new_for_uri(import.meta.url).get_parent().get_parent().get_parent().get_path();

/** The directory of the Swift tools: `WORMHOLE_SWIFT_BIN`, else `<repo>/.build/debug`. */
export const SWIFT_BIN = GLib.getenv('WORMHOLE_SWIFT_BIN') || `${REPO}/.build/debug`;

/** The `wormholectl` executable. */
export const WORMHOLE = `${SWIFT_BIN}/wormholectl`;

/** The default bound of a wait, in milliseconds. */
export const TIMEOUT_MS = 20000;

/** A failed expectation. */
export class AssertionError extends Error {}

/**
 * Fails unless `cond`.
 * @param {boolean} cond
 * @param {string} message
 */
export function assert(cond, message) {
    if (!cond)
        throw new AssertionError(message);
}

/**
 * Fails unless `a` and `b` are equal as JSON-ish text.
 * @param {*} a @param {*} b @param {string} what
 */
export function assertEqual(a, b, what) {
    const sa = show(a), sb = show(b);
    if (sa !== sb)
        throw new AssertionError(`${what}: got ${sa}, expected ${sb}`);
}

function show(v) {
    return JSON.stringify(v, (k, x) => typeof x === 'bigint' ? `${x}n` : x);
}

/**
 * Waits for a promise, failing after `ms`.
 * @template T
 * @param {Promise<T>} promise
 * @param {string} what what was awaited, for the failure
 * @param {number} [ms]
 * @returns {Promise<T>}
 */
export function within(promise, what, ms = TIMEOUT_MS) {
    let source = 0;
    const timeout = new Promise((_, reject) => {
        source = GLib.timeout_add(GLib.PRIORITY_DEFAULT, ms, () => {
            source = 0;
            reject(new AssertionError(`timed out after ${ms} ms waiting for ${what}`));
            return GLib.SOURCE_REMOVE;
        });
    });
    return Promise.race([promise, timeout]).finally(() => {
        if (source)
            GLib.source_remove(source);
    });
}

/**
 * A queue of values with awaiting readers: callbacks push, tests await `next()`.
 */
export class Inbox {
    constructor() {
        this.items = [];
        this.waiters = [];
    }

    /** @param {*} item */
    push(item) {
        const w = this.waiters.shift();
        if (w)
            w(item);
        else
            this.items.push(item);
    }

    /**
     * The next item, within a bound.
     * @param {string} what
     * @param {number} [ms]
     */
    next(what, ms = TIMEOUT_MS) {
        if (this.items.length)
            return Promise.resolve(this.items.shift());
        let resolve;
        const p = new Promise(r => (resolve = r));
        this.waiters.push(resolve);
        return within(p, what, ms).catch(e => {
            this.waiters = this.waiters.filter(w => w !== resolve);
            throw e;
        });
    }

    /**
     * The next item for which `pred` holds (earlier ones are dropped).
     * @param {function(*): boolean} pred
     * @param {string} what
     * @param {number} [ms]
     */
    async until(pred, what, ms = TIMEOUT_MS) {
        const deadline = GLib.get_monotonic_time() + ms * 1000;
        for (;;) {
            const left = Math.max(1, Math.floor((deadline - GLib.get_monotonic_time()) / 1000));
            const item = await this.next(what, left);
            if (pred(item))
                return item;
        }
    }
}

/** A temporary directory (mode 0700), removed by {@link removeTree}. */
export function tempDir(prefix) {
    return GLib.dir_make_tmp(`${prefix}-XXXXXX`);
}

/** Removes a directory tree (test cleanup). */
export function removeTree(path) {
    if (path)
        GLib.spawn_command_line_sync(`rm -rf ${GLib.shell_quote(path)}`);
}

/**
 * A child process with its standard output and error read line by line into inboxes.
 */
export class Child {
    /**
     * @param {string[]} argv
     * @param {object} [options]
     * @param {object} [options.env] variables to set (a value of null unsets)
     * @param {boolean} [options.stdin] keep a pipe to standard input
     */
    constructor(argv, {env = {}, stdin = false} = {}) {
        const launcher = new Gio.SubprocessLauncher({
            flags: Gio.SubprocessFlags.STDOUT_PIPE | Gio.SubprocessFlags.STDERR_PIPE |
                (stdin ? Gio.SubprocessFlags.STDIN_PIPE : 0),
        });
        for (const [k, v] of Object.entries(env)) {
            if (v === null)
                launcher.unsetenv(k);
            else
                launcher.setenv(k, v, true);
        }
        this.argv = argv;
        this.proc = launcher.spawnv(argv);
        this.stdout = new Inbox();
        this.stderr = new Inbox();
        this.stdoutText = [];
        this.stderrText = [];
        this._read(this.proc.get_stdout_pipe(), this.stdout, this.stdoutText);
        this._read(this.proc.get_stderr_pipe(), this.stderr, this.stderrText);
        this.exited = new Promise(resolve => {
            this.proc.wait_async(null, (p, r) => {
                try {
                    p.wait_finish(r);
                } catch (_) {}
                resolve(p.get_if_exited() ? p.get_exit_status() : 128 + p.get_term_sig());
            });
        });
    }

    _read(pipe, inbox, log) {
        const stream = new Gio.DataInputStream({base_stream: pipe, close_base_stream: true});
        const step = () => {
            stream.read_line_async(GLib.PRIORITY_DEFAULT, null, (s, r) => {
                let line;
                try {
                    [line] = s.read_line_finish_utf8(r);
                } catch (e) {
                    line = null;
                }
                if (line === null) {
                    inbox.push(null);
                    return;
                }
                log.push(line);
                inbox.push(line);
                step();
            });
        };
        step();
    }

    /** Writes text to standard input. */
    write(text) {
        this.proc.get_stdin_pipe().write_all(new TextEncoder().encode(text), null);
    }

    /** Closes standard input. */
    closeInput() {
        this.proc.get_stdin_pipe().close(null);
    }

    /**
     * Waits for a line on standard error equal to `line` (`ready`), failing on other lines
     * before it when `strict`.
     */
    async waitStderr(line, what, ms = TIMEOUT_MS) {
        const got = await this.stderr.until(l => l === null || l === line, what, ms);
        if (got === null)
            throw new AssertionError(`${what}: ${this.argv[1]} ended first; stderr: ${this.stderrText.join(' | ')}`);
    }

    /** The next line on standard output (null at its end). */
    nextLine(what, ms = TIMEOUT_MS) {
        return this.stdout.next(what, ms);
    }

    /** Sends a signal. */
    kill(sig = 15) {
        this.proc.send_signal(sig);
    }

    /** Waits for the exit status, within a bound. */
    finished(what = 'the child to exit', ms = TIMEOUT_MS) {
        return within(this.exited, `${what} (${this.argv.join(' ')})`, ms);
    }
}

/**
 * A private dbus-daemon from `<repo>/dbus/wormhole-session.conf`, listening on
 * `unix:path=<dir>/bus`.
 */
export class PrivateBus {
    /** @param {string} [dir] the directory of the socket (a new temporary one by default) */
    constructor(dir = null) {
        this.dir = dir ?? tempDir('wormhole-gjs-bus');
        this.socket = `${this.dir}/bus`;
        this.address = `unix:path=${this.socket}`;
        this.child = null;
    }

    /** Starts the daemon and waits for it to print its address. */
    async start() {
        this.child = new Child(['dbus-daemon', `--config-file=${REPO}/dbus/wormhole-session.conf`,
            `--address=${this.address}`, '--print-address', '--nofork']);
        const line = await this.child.nextLine('dbus-daemon to print its address');
        assert(line !== null && line.startsWith('unix:path='), `dbus-daemon printed ${line}`);
        return this;
    }

    /** Stops the daemon (SIGTERM) and waits for it to exit. */
    async stop() {
        if (!this.child)
            return;
        this.child.kill(15);
        await this.child.finished('dbus-daemon to stop');
        this.child = null;
    }
}

/**
 * Runs tests in order, each with a bound; prints `ok`/`FAIL` lines; exits 1 when one failed.
 * @param {Array<[string, function(): Promise<void>]>} tests
 * @param {object} [options]
 * @param {function(): Promise<void>} [options.teardown]
 */
export async function run(tests, {teardown = null} = {}) {
    const only = GLib.getenv('GJS_TEST_FILTER');
    let failed = 0, passed = 0;
    for (const [name, fn] of tests) {
        if (only && !name.includes(only))
            continue;
        try {
            await within(fn(), `test "${name}"`, 60000);
            passed++;
            print(`ok - ${name}`);
        } catch (e) {
            failed++;
            print(`FAIL - ${name}: ${e.message}`);
            if (!(e instanceof AssertionError))
                printerr(e.stack);
        }
    }
    if (teardown)
        await teardown();
    print(`${passed} passed, ${failed} failed`);
    return failed;
}

/**
 * A fresh world for one test: a container root, a runtime directory (0700; passed to the Swift
 * side unless GJS_TEST_RUNTIME=unset), a group, a participant on `bus`, and runners of the
 * Swift `wormholectl` tool. What it makes is undone by the `cleanups` the test program runs.
 * @param {PrivateBus} bus
 * @param {Array<function(): *>} cleanups
 * @param {string} tag makes the group unique
 */
export function makeWorld(bus, cleanups, tag) {
    const withRuntime = GLib.getenv('GJS_TEST_RUNTIME') !== 'unset';
    const root = tempDir('wormhole-gjs-root');
    const runtime = tempDir('wormhole-gjs-runtime');
    cleanups.push(() => removeTree(root), () => removeTree(runtime));
    const env = {
        WORMHOLE_CONTAINER_ROOT: root,
        XDG_RUNTIME_DIR: withRuntime ? runtime : null,
        DBUS_SESSION_BUS_ADDRESS: bus.address,
        WORMHOLE_LOG: null,
    };
    const group = `group.org.example.gjs${tag}`;
    const errors = new Inbox();
    const wb = new WormholeBus({address: bus.address, root, onBusLost: () => {}, onBusBack: () => {}});
    cleanups.push(() => wb.close());
    /** Runs `wormholectl ARGS` to completion. */
    const tool = async (args, input = null) => {
        const child = new Child([WORMHOLE, ...args, '--bus-address', bus.address], {env, stdin: input !== null});
        if (input !== null) {
            child.write(input);
            child.closeInput();
        }
        const status = await child.finished(`wormholectl ${args[0]}`);
        await child.stdout.until(l => l === null, 'stdout end');
        return {status, stdout: child.stdoutText, stderr: child.stderrText};
    };
    /** Starts a long-running `wormholectl ARGS` and waits for its `ready`. */
    const ready = async args => {
        const child = new Child([WORMHOLE, ...args, '--bus-address', bus.address], {env});
        cleanups.push(() => child.kill(9));
        await child.waitStderr('ready', `ready from wormholectl ${args[0]}`);
        return child;
    };
    return {root, runtime, env, group, wb, tool, ready, errors};
}

/**
 * Runs a test program's tests (see {@link run}), then its cleanups (last first) and its bus,
 * and exits with 1 when a test failed.
 * @param {Array<[string, function(): Promise<void>]>} tests
 * @param {PrivateBus} bus
 * @param {Array<function(): *>} cleanups
 */
export async function runProgram(tests, bus, cleanups) {
    const failed = await run(tests, {
        teardown: async () => {
            for (const c of cleanups.reverse()) {
                try {
                    await c();
                } catch (e) {
                    printerr(`cleanup: ${e.message}`);
                }
            }
            await bus.stop();
            removeTree(bus.dir);
        },
    });
    System.exit(failed ? 1 : 0);
}

/**
 * A participant on a private bus of its own, which a test may stop and start again: `events`
 * receives `lost` and `back`.
 * @param {string} root the container root
 * @param {Array<function(): *>} cleanups
 * @returns {Promise<{own: PrivateBus, wb: WormholeBus, events: Inbox}>}
 */
export async function restartableBus(root, cleanups) {
    const own = await new PrivateBus().start();
    cleanups.push(() => own.stop(), () => removeTree(own.dir));
    const events = new Inbox();
    const wb = new WormholeBus({
        address: own.address, root,
        onBusLost: () => events.push('lost'), onBusBack: () => events.push('back'),
    });
    cleanups.push(() => wb.close());
    return {own, wb, events};
}

/**
 * The value after `flag` on the program's command line (`ARGV`), else `fallback`.
 * @param {string} flag
 * @param {string|null} fallback
 * @returns {string|null}
 */
export function option(flag, fallback) {
    const i = ARGV.indexOf(flag);
    return i >= 0 ? ARGV[i + 1] : fallback;
}

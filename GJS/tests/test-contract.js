// SPDX-License-Identifier: MIT
// The contract as data (contract/ at the repository's root): the constants, the one table of
// error codes and the test vectors that the Swift and Python suites read too.
// Run: gjs -m GJS/tests/test-contract.js
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import System from 'system';
import * as W from '../wormhole.js';
import {REPO, assert, assertEqual, run} from './harness.js';

const decoder = new TextDecoder('utf-8');

/** One JSON file of contract/. */
function load(relative) {
    const [, bytes] = GLib.file_get_contents(`${REPO}/contract/${relative}`);
    return JSON.parse(decoder.decode(bytes));
}

/** A vector's text: `key` itself, or `build` (each string repeated its count). */
function textOf(vector, key) {
    if (key in vector)
        return vector[key];
    return vector.build.map(([piece, count]) => piece.repeat(count)).join('');
}

function hexBytes(hex) {
    const bytes = new Uint8Array(hex.length / 2);
    for (let i = 0; i < bytes.length; i++)
        bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
    return bytes;
}

const errors = load('errors.json').codes;
const codes = new Set(errors.map(row => row.code));
const former = new Set(errors.flatMap(row => row.formerly?.gjs ?? []));

/** The table's code for a vector: it must be in the table; the module must use exactly it. */
function tableCode(code) {
    assert(errors.some(r => r.code === code), `${code} is in the table`);
    return code;
}

/** Runs `fn`, which must throw; returns what it threw. */
function thrown(fn, what) {
    try {
        fn();
    } catch (e) {
        return e;
    }
    throw new Error(`${what} was not refused`);
}

const tests = [
    ['the constants the module exports are the contract\'s', () => {
        const constants = load('constants.json');
        assertEqual(W.CONTRACT_VERSION, constants.contractVersion, 'contract version');
        assert(`(contract ${W.CONTRACT_VERSION})`.startsWith(W.TOOL_VERSION_MARK), 'the tool lookup accepts this version');
        assertEqual(W.OBJECT_PATH, constants.objectPath, 'object path');
        assertEqual(W.PLAIN_INTERFACE, constants.plainInterface, 'plain interface');
        assertEqual(`${W.PLAIN_INTERFACE}.B`, constants.bucketInterfacePrefix, 'bucket prefix');
        assertEqual(W.PREFERENCES, constants.preferencesDirectory, 'preferences directory');
        assertEqual(W.MAX_NAME_BYTES, constants.limits.nameBytes, 'name bytes');
        assertEqual(W.MAX_RULE_BYTES, constants.limits.matchRuleBytes, 'match rule bytes');
        assertEqual(W.MAX_TRANSIENT_BYTES, constants.limits.transientMessageBytes, 'transient bytes');
        assertEqual(W.DEFAULT_MAX_MESSAGE_BYTES, constants.limits.defaultMaxMessageBytes, 'message bytes');
        assertEqual(W.MAX_JSON_DEPTH, constants.limits.jsonDepth, 'JSON depth');
    }],
    ['FNV-1a vectors', () => {
        for (const vector of load('vectors/fnv.json').vectors)
            assertEqual(W.fnv1a32(vector.input).toString(16).padStart(8, '0'), vector.fnv1a32, `fnv1a32(${vector.input})`);
    }],
    ['valid names: their bucket and their two exact-name match rules', () => {
        const vectors = load('vectors/names.json').valid;
        assert(vectors.length > 0, 'vectors');
        for (const vector of vectors) {
            const name = textOf(vector, 'name');
            W.validateName(name);
            assertEqual(W.bucketInterface(name), vector.bucket, `bucket of ${name.slice(0, 30)}`);
            assertEqual([W.exactRule(name, vector.bucket), W.exactRule(name, W.PLAIN_INTERFACE)], vector.exactRules,
                `rules of ${name.slice(0, 30)}`);
        }
    }],
    ['invalid names are refused with the contract\'s code and words', () => {
        const file = load('vectors/names.json');
        for (const vector of file.invalid) {
            // A JS string cannot hold bytes that are not UTF-8: such bytes arrive as a lone
            // surrogate (what a D-Bus binding or a careless decoder hands over), the same case.
            const name = 'utf8Hex' in vector ? '\uD800' : textOf(vector, 'name');
            const error = thrown(() => W.validateName(name), vector.reason);
            assert(error instanceof W.WormholeError, `${vector.reason}: a WormholeError (${error})`);
            assert(error.code === tableCode(file.errorCode), `${vector.reason}: code ${error.code}`);
            if (vector.messageContains)
                assert(error.message.includes(vector.messageContains), `${error.message} names ${vector.messageContains}`);
        }
    }],
    ['prefixes: the rule for a valid one, the refusal of one without a slash', () => {
        for (const vector of load('vectors/names.json').prefixes) {
            if (vector.valid) {
                W.validatePrefix(vector.prefix);
                assertEqual(W.prefixRule(vector.prefix), vector.rule, `rule of ${vector.prefix}`);
            } else {
                const error = thrown(() => W.validatePrefix(vector.prefix), vector.prefix);
                assertEqual(error.code, 'invalidName', 'code');
                assert(error.message.includes(vector.messageContains), `${error.message} names the prefix`);
            }
        }
    }],
    ['groups, directories and identifiers: valid ones pass, invalid ones are refused with their code', () => {
        const checks = {group: W.validateGroup, directory: W.validateDirectory, identifier: W.validateIdentifier};
        for (const [kind, entry] of Object.entries(load('vectors/components.json').kinds)) {
            assert(checks[kind], `a check for ${kind}`);
            for (const vector of entry.valid)
                checks[kind](textOf(vector, 'value'));
            for (const vector of entry.invalid) {
                const value = textOf(vector, 'value');
                const error = thrown(() => checks[kind](value), `${kind} ${JSON.stringify(value)}`);
                assert(error.code === tableCode(entry.errorCode),
                    `${kind} ${JSON.stringify(value)}: code ${error.code}`);
                if (vector.messageContains)
                    assert(error.message.includes(vector.messageContains), `${error.message}`);
            }
        }
    }],
    ['JSON texts: kept byte for byte, compacted without respelling, refused', () => {
        const file = load('vectors/json.json');
        const encoder = new TextEncoder();
        for (const text of file.kept)
            assertEqual(W.decodeJSONBytes(encoder.encode(text)).text, text, `kept: ${text}`);
        const raw = {number: source => new W.RawNumber(source)};
        for (const [input, output] of file.compact)
            assertEqual(W.stringifyJSON(W.parseJSON(input, raw)), output, `compact: ${input}`);
        for (const vector of file.refused) {
            const bytes = 'hex' in vector ? hexBytes(vector.hex) : encoder.encode(vector.text);
            const error = thrown(() => W.decodeJSONBytes(bytes), `refused: ${vector.reason}`);
            assert(error instanceof W.JSONSyntaxError, `${vector.reason}: a JSONSyntaxError (${error})`);
            if (vector.messageContains)
                assert(error.message.includes(vector.messageContains), `${error.message} names ${vector.messageContains}`);
        }
    }],
    ['every code the module raises is in the contract\'s table', () => {
        const found = new Set(), literals = new Set();
        const folder = Gio.File.new_for_path(`${REPO}/GJS`);
        const visit = dir => {
            const children = dir.enumerate_children('standard::name,standard::type', Gio.FileQueryInfoFlags.NONE, null);
            for (let info = children.next_file(null); info; info = children.next_file(null)) {
                const child = dir.get_child(info.get_name());
                if (info.get_file_type() === Gio.FileType.DIRECTORY && !['tests', 'bench'].includes(info.get_name())) {
                    visit(child);
                } else if (info.get_name().endsWith('.js')) {
                    const text = decoder.decode(child.load_contents(null)[1]);
                    for (const m of text.matchAll(/WormholeError\(\s*'([a-zA-Z]+)'/g))
                        found.add(m[1]);
                    // A code handed on to a helper that throws it (validateComponent's).
                    for (const m of text.matchAll(/validateComponent\('[^']*', '([a-zA-Z]+)'/g))
                        found.add(m[1]);
                    for (const m of text.matchAll(/'([a-z][a-zA-Z]+)'/g))
                        literals.add(m[1]);
                }
            }
        };
        visit(folder);
        assert(found.size >= 8, `the scan found the codes (${[...found]})`);
        const outside = [...found].filter(code => !codes.has(code));
        assertEqual(outside, [], 'codes outside contract/errors.json');
        const left = [...literals].filter(name => former.has(name) && !codes.has(name));
        assertEqual(left, [], "former names (errors.json's formerly) still written in the module");
    }],
];


/** A scratch directory, removed at the end of the run. */
const scratch = GLib.dir_make_tmp('wormhole-gjs-contract-XXXXXX');

/** Sets a file's mode (GLib's chmod is not introspected). */
function chmod(path, mode) {
    Gio.File.new_for_path(path).set_attribute_uint32('unix::mode', mode, Gio.FileQueryInfoFlags.NOFOLLOW_SYMLINKS, null);
}

/** Writes `bytes` at `path` with `mode`, making its parents 0700. */
function writeFile(path, bytes, mode = 0o600) {
    GLib.mkdir_with_parents(GLib.path_get_dirname(path), 0o700);
    GLib.file_set_contents(path, bytes);
    chmod(path, mode);
}

let scratchCount = 0;
function freshRoot() {
    const root = `${scratch}/${++scratchCount}`;
    GLib.mkdir_with_parents(root, 0o700);
    return root;
}

/**
 * Whether a JS value read from a suite is the vectors' [type, value]. GJS reads nested values as
 * plain JS values (an integer and a double of the same value are one number there), so below the
 * top level the value is compared, not its type.
 */
function sameValue(value, [type, expected]) {
    switch (type) {
    case 'integer': return BigInt(value) === BigInt(expected);
    case 'double':
        if (expected === 'nan')
            return Number.isNaN(value);
        if (expected === 'inf' || expected === '-inf')
            return value === (expected === 'inf' ? Infinity : -Infinity);
        return Object.is(value, expected);
    case 'bool': case 'string': case 'url': return value === expected;
    case 'date': return value instanceof Date && value.getTime() === expected * 1000;
    case 'data': return GLib.base64_encode(value) === expected;
    case 'array':
        return Array.isArray(value) && value.length === expected.length && value.every((v, i) => sameValue(v, expected[i]));
    case 'dictionary': {
        const keys = Object.keys(expected).sort();
        return JSON.stringify(Object.keys(value).sort()) === JSON.stringify(keys) &&
            keys.every(k => sameValue(value[k], expected[k]));
    }
    default: return false;
    }
}

const TOP_TYPES = {
    integer: 'int', double: 'double', bool: 'bool', string: 'string', date: 'date', data: 'data',
    url: 'url', array: 'array', dictionary: 'dictionary', unknown: 'unknown',
};

tests.push(
    ['suite files read as their typed values; corrupt ones are refused naming the byte', () => {
        const file = load('vectors/suites.json');
        const encoder = new TextEncoder();
        for (const vector of file.readable) {
            const root = freshRoot();
            writeFile(`${root}/group.vectors/Preferences/group.vectors.json`, vector.text);
            const snapshot = W.readDefaults({group: 'group.vectors', root});
            assertEqual(snapshot.keys(), Object.keys(vector.values).sort(), `keys of ${vector.text.slice(0, 30)}`);
            for (const [key, want] of Object.entries(vector.values)) {
                const got = snapshot.typed(key);
                assertEqual(got.type, TOP_TYPES[want[0]], `type of ${key}`);
                if (want[0] !== 'unknown')
                    assert(sameValue(got.value, want), `${key}: ${String(got.value)} is ${JSON.stringify(want)}`);
            }
        }
        for (const vector of file.corrupt) {
            const root = freshRoot();
            const bytes = 'hex' in vector ? hexBytes(vector.hex) : encoder.encode(vector.text);
            writeFile(`${root}/group.vectors/Preferences/group.vectors.json`, bytes);
            const error = thrown(() => W.readDefaults({group: 'group.vectors', root}).keys(), vector.reason);
            assert(error.code === tableCode(file.errorCode), `${vector.reason}: code ${error.code}`);
            assert(error.message.includes(`byte offset ${vector.offset}`) || error.message.includes(`byte ${vector.offset}`),
                `${vector.reason}: ${error.message} names byte ${vector.offset}`);
        }
    }],
    ['journals read in order, every range that cannot be read reported in its place', async () => {
        for (const vector of load('vectors/journals.json').cases) {
            const root = freshRoot();
            for (const [name, hex] of Object.entries(vector.files))
                writeFile(`${root}/group.vectors/wormhole/events.journal/${name}`, hexBytes(hex));
            const reader = new W.JournalReader({root, group: 'group.vectors', directory: 'wormhole', identifier: 'events'});
            const events = [];
            let position = {segment: null, offset: 16, expected: 1n};
            for (;;) {
                // eslint-disable-next-line no-await-in-loop
                const walked = await reader.walk(position);
                for (const item of walked.items) {
                    if (item instanceof W.JournalGap) {
                        events.push(item.reason === 'retention' ? ['gap', `${item.from}`, `${item.to}`]
                            : ['damaged', `${item.from}`, `${item.to}`, item.reason, item.file]);
                    } else {
                        events.push(['record', `${item.sequence}`, decoder.decode(item.payload)]);
                    }
                }
                position = walked.position;
                if (!walked.more)
                    break;
            }
            assertEqual(events, vector.read.map(e => e.map(String)), vector.name);
        }
    }],
    ['containers, directories and files that are links, another user\'s or writable by others are refused', () => {
        const file = load('vectors/containers.json');
        for (const vector of file.cases) {
            const base = freshRoot();
            const root = `${base}/root`;
            const directory = `${root}/group.vectors/wormhole`;
            writeFile(`${directory}/inbox.json`, '{"n":1}');
            const part = {container: `${root}/group.vectors`, directory, file: `${directory}/inbox.json`}[vector.path];
            if (vector.change === 'mode') {
                chmod(part, parseInt(vector.mode, 8));
            } else if (vector.change === 'symlink') {
                const moved = `${base}/elsewhere-${GLib.path_get_basename(part)}`;
                Gio.File.new_for_path(part).move(Gio.File.new_for_path(moved), Gio.FileCopyFlags.NONE, null, null);
                Gio.File.new_for_path(part).make_symbolic_link(moved, null);
            } else if (vector.change === 'owner') {
                if (new Gio.Credentials().get_unix_user() !== 0)
                    continue; // only root can give a file to another user
                const chown = Gio.Subprocess.new(['chown', '65534:65534', part], Gio.SubprocessFlags.NONE);
                assert(chown.wait_check(null), 'chown');
            }
            const read = () => W.readMessage({group: 'group.vectors', identifier: 'inbox', root});
            if (!vector.refused) {
                assertEqual(read().text, '{"n":1}', vector.name);
                continue;
            }
            const error = thrown(read, vector.name);
            assert(error.code === tableCode(file.errorCode), `${vector.name}: code ${error.code}`);
        }
    }],
    ['the fuzz corpus\'s names and JSON texts get the same answers', () => {
        const checks = {group: W.validateGroup, directory: W.validateDirectory, identifier: W.validateIdentifier};
        const strict = new TextDecoder('utf-8', {fatal: true});
        for (const vector of load('vectors/corpus-components.json').cases) {
            let text = null;
            try {
                text = strict.decode(hexBytes(vector.hex));
            } catch (_) {
                text = null;
            }
            for (const [kind, check] of Object.entries(checks)) {
                let valid = text !== null;
                try {
                    if (valid)
                        check(text);
                } catch (_) {
                    valid = false;
                }
                assertEqual(valid, vector[kind], `${kind} ${vector.hex}`);
            }
        }
        const file = load('vectors/corpus-json.json');
        for (const hex of file.kept)
            assertEqual(W.decodeJSONBytes(hexBytes(hex)).text, strict.decode(hexBytes(hex)), `kept ${hex.slice(0, 40)}`);
        for (const hex of file.refused)
            thrown(() => W.decodeJSONBytes(hexBytes(hex)), `refused ${hex.slice(0, 40)}`);
    }]
);

const failed = await run(tests, {teardown: () => Gio.Subprocess.new(['rm', '-rf', scratch], Gio.SubprocessFlags.NONE).wait(null)});
System.exit(failed ? 1 : 0);

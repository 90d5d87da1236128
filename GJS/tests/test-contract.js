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

/** The table's code and the name this module used for it before (until the rename lands). */
function acceptedCodes(code) {
    const row = errors.find(r => r.code === code);
    assert(row, `${code} is in the table`);
    return [code, ...row.formerly?.gjs ?? []];
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
            assert(acceptedCodes(file.errorCode).includes(error.code), `${vector.reason}: code ${error.code}`);
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
                assert(acceptedCodes(entry.errorCode).includes(error.code),
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
        const found = new Set();
        const folder = Gio.File.new_for_path(`${REPO}/GJS`);
        const visit = dir => {
            const children = dir.enumerate_children('standard::name,standard::type', Gio.FileQueryInfoFlags.NONE, null);
            for (let info = children.next_file(null); info; info = children.next_file(null)) {
                const child = dir.get_child(info.get_name());
                if (info.get_file_type() === Gio.FileType.DIRECTORY && !['tests', 'bench'].includes(info.get_name()))
                    visit(child);
                else if (info.get_name().endsWith('.js'))
                    for (const m of decoder.decode(child.load_contents(null)[1]).matchAll(/WormholeError\(\s*'([a-zA-Z]+)'/g))
                        found.add(m[1]);
            }
        };
        visit(folder);
        assert(found.size >= 8, `the scan found the codes (${[...found]})`);
        const outside = [...found].filter(code => !codes.has(code) && !former.has(code));
        assertEqual(outside, [], 'codes outside contract/errors.json');
    }],
];

const failed = await run(tests);
System.exit(failed ? 1 : 0);

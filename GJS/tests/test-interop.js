// SPDX-License-Identifier: MIT
// GJS module ↔ Swift `wormholectl` across processes, on a private dbus-daemon.
// Run: gjs -m GJS/tests/test-interop.js   (WORMHOLE_SWIFT_BIN: the directory of `wormholectl`;
// GJS_TEST_RUNTIME=unset runs the Swift side without XDG_RUNTIME_DIR, =set (default) with a
// throwaway 0700 one, as in a desktop session.)
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import * as W from '../wormhole.js';
import {
    Child, Inbox, PrivateBus, WORMHOLE, assert, assertEqual, makeWorld, restartableBus, runProgram
} from './harness.js';

const bus = await new PrivateBus().start();
let counter = 0;
const cleanups = [];

const world = () => makeWorld(bus, cleanups, `${process()}-${++counter}`);

function process() {
    return GLib.getenv('GJS_TEST_RUNTIME') === 'unset' ? 'n' : 'r';
}

const tests = [
    ['Swift post → GJS observe (state kept, up to 2^64-1; no state when none)', async () => {
        const w = world();
        const name = `${w.group}.refresh`;
        const got = new Inbox();
        await w.wb.listenNotifications(name, n => got.push(n)).ready;
        assertEqual((await w.tool(['post', name, '--state', '42'])).status, 0, 'post status');
        let n = await got.next('the post with state 42');
        assertEqual([n.name, n.state, n.reason], [name, 42n, 'posted'], 'delivery');
        await w.tool(['post', name, '--state', '18446744073709551615']);
        n = await got.next('the post with state 2^64-1');
        assertEqual(n.state, 18446744073709551615n, 'state 2^64-1');
    }],

    ['hand-typed dbus-send (plain interface, name only; int32 and negative states) → GJS observe', async () => {
        const w = world();
        const name = `${w.group}.hand`;
        const got = new Inbox();
        await w.wb.listenNotifications(name, n => got.push(n)).ready;
        const send = async (...args) => {
            const c = new Child(['dbus-send', `--bus=${bus.address}`, '--type=signal', '/org/wormhole/Notify1',
                ...args]);
            assertEqual(await c.finished('dbus-send'), 0, 'dbus-send status');
        };
        await send('org.wormhole.Notify1.Posted', `string:${name}`);
        assertEqual((await got.next('name-only post')).state, null, 'no state');
        await send('org.wormhole.Notify1.Posted', `string:${name}`, 'int32:5');
        assertEqual((await got.next('int32 state')).state, 5n, 'int32 state');
        await send(`${W.bucketInterface(name)}.Posted`, `string:${name}`, 'int64:-3');
        assertEqual((await got.next('negative state')).state, null, 'a negative state is no state');
        await send(`${W.bucketInterface(name)}.Posted`, `string:${name}`, 'string:x', 'string:y');
        assertEqual((await got.next('a string state')).state, null, 'a non-integer state is no state');
        // A signal on another bucket than the name's is not this name's (only the plain or its own).
        await send('org.wormhole.Notify1.B0000.Posted', `string:${name}`);
        await send('org.wormhole.Notify1.Posted', `string:${name}`, 'byte:7');
        assertEqual((await got.next('byte state')).state, 7n, 'the wrong bucket was not delivered; byte state');
    }],

    ['two observers of one name share its rules; cancelling one leaves the other working', async () => {
        const w = world();
        const name = `${w.group}.shared`;
        const a = new Inbox(), b = new Inbox();
        const subA = w.wb.listenNotifications(name, n => a.push(n.state));
        const subB = w.wb.listenNotifications(name, n => b.push(n.state));
        await subB.ready; // the second waits for the first's AddMatch
        await w.tool(['post', name, '--state', '1']);
        assertEqual([await a.next('a'), await b.next('b')], [1n, 1n], 'both');
        subA.cancel();
        await w.tool(['post', name, '--state', '2']);
        assertEqual(await b.next('b after a cancelled'), 2n, 'the rule stayed');
        assertEqual(a.items.length, 0, 'a cancelled subscription gets nothing');
    }],

    ['Swift post → GJS prefix observer', async () => {
        const w = world();
        const got = new Inbox();
        await w.wb.listenNotifications(`${w.group}/`, n => got.push(n), {prefix: true}).ready;
        await w.tool(['post', `${w.group}/wormhole/a`, '--state', '7']);
        await w.tool(['post', `${w.group}x/other`, '--state', '8']);
        await w.tool(['post', `${w.group}/b`, '--state', '9']);
        assertEqual([(await got.next('a')).name, (await got.next('b')).name], [`${w.group}/wormhole/a`, `${w.group}/b`],
            'names below the prefix only');
    }],

    ['GJS post → Swift observe (bucket interface, exact state)', async () => {
        const w = world();
        const name = `${w.group}.from-gjs`;
        const obs = await w.ready(['observe', name, '--count', '2', '--timeout', '20']);
        await w.wb.post(name, {state: 18446744073709551615n});
        await w.wb.post(name, {state: 3});
        const a = JSON.parse((await obs.nextLine('first observe line')).replace(/:(\d{16,})/, ':"$1"'));
        const b = JSON.parse(await obs.nextLine('second observe line'));
        assertEqual([a.name, a.state, b.state], [name, '18446744073709551615', 3], 'observe lines');
        assertEqual(await obs.finished('observe'), 0, 'observe status');
    }],

    ['a post without a state carries the name\'s last state as the bus knows it (posted or received), else 0', async () => {
        const w = world();
        const name = `${w.group}.stateless`;
        const obs = await w.ready(['observe', name, '--count', '5', '--timeout', '20']);
        await w.wb.post(name); // this bus knows no state of the name: 0
        await w.wb.post(name, {state: 7});
        await w.wb.post(name); // the state is the name's: 7 again
        const other = new W.WormholeBus({address: bus.address, root: w.root});
        cleanups.push(() => other.close());
        const heard = new Inbox();
        const sub = other.observe(name, n => heard.push(n)); // the deprecated alias still works
        assert(sub instanceof W.NotificationListener, 'observe is listenNotifications');
        await sub.ready;
        assertEqual((await w.tool(['post', name, '--state', '9'])).status, 0, 'Swift post');
        assertEqual((await heard.next('the Swift post')).state, 9n, 'received');
        await other.post(name); // another process's state, received: 9
        const states = [];
        for (let i = 0; i < 5; i++)
            states.push(JSON.parse(await obs.nextLine(`observe line ${i}`)).state);
        assertEqual(states, [0, 7, 7, 9, 9], 'states the Swift observer saw');
        assertEqual(await obs.finished('observe'), 0, 'observe status');
        assert(W.NameObserver === W.NotificationListener && W.DefaultsObserver === W.DefaultsListener,
            'the 0.x class names are aliases');
    }],

    ['Swift send → GJS listen: the stored text exactly (1e400, long integers), then cleared', async () => {
        const w = world();
        const got = new Inbox();
        await w.wb.listen({group: w.group, directory: 'lines', identifiers: ['clip']}, d => got.push(d)).ready;
        const text = '{"big":123456789012345678901234567890,"huge":1e400,"s":"Le café coûte 3 €"}';
        assertEqual((await w.tool(['send', '--group', w.group, '--directory', 'lines', 'clip', text])).status, 0, 'send');
        const d = await got.next('the message');
        assertEqual([d.identifier, d.reason], ['clip', 'posted'], 'delivery');
        assertEqual(W.stringifyJSON(W.parseJSON(d.text)), W.stringifyJSON(d.message), 'message is the text');
        assertEqual(W.stringifyJSON(d.message), text, 'lossless');
        assertEqual(d.message.s, 'Le café coûte 3 €', 'UTF-8');
        await w.tool(['clear', '--group', w.group, '--directory', 'lines', 'clip']);
        const c = await got.next('the cleared event');
        assertEqual([c.reason, c.message], ['cleared', null], 'cleared');
    }],

    ['GJS listen: stored message on start; every-post off skips the same bytes', async () => {
        const w = world();
        await w.tool(['send', '--group', w.group, 'inbox', '[1,2,3]']);
        const got = new Inbox();
        await w.wb.listen({group: w.group, identifiers: ['inbox'], stored: true}, d => got.push(d)).ready;
        const s = await got.next('the stored message');
        assertEqual([s.reason, s.text], ['stored', '[1,2,3]'], 'stored');
        await w.tool(['send', '--group', w.group, 'inbox', '[4]']);
        assertEqual((await got.next('the new message')).text, '[4]', 'new');
    }],

    ['a rename onto I.json with no Posted (its sender died) is a catch-up; a posted one is delivered once', async () => {
        const w = world();
        await w.tool(['send', '--group', w.group, 'd', '"first"']);
        const got = new Inbox();
        await w.wb.listen({group: w.group, identifiers: ['d']}, d => got.push(d)).ready;
        await w.tool(['send', '--group', w.group, 'd', '"posted"']);
        assertEqual([(await got.next('the posted one')).text], ['"posted"'], 'posted');
        // A writer that dies between its rename and its signal: the temporary file, then the rename.
        const dir = `${w.root}/${w.group}/wormhole`;
        GLib.file_set_contents(`${dir}/.d.999-ab.tmp`, '"unsignalled"');
        Gio.File.new_for_path(`${dir}/.d.999-ab.tmp`).move(Gio.File.new_for_path(`${dir}/d.json`),
            Gio.FileCopyFlags.OVERWRITE, null, null);
        const c = await got.next('the catch-up of the unsignalled rename');
        assertEqual([c.reason, c.text], ['catchUp', '"unsignalled"'], 'no duplicate of the posted one came first');
        await w.tool(['send', '--group', w.group, 'd', '"next"']);
        assertEqual([(await got.next('the next one')).reason], ['posted'], 'then posts again');
    }],

    ['Swift send --transient → GJS listen (reason transient)', async () => {
        const w = world();
        const got = new Inbox();
        await w.wb.listen({group: w.group, identifiers: ['ping']}, d => got.push(d)).ready;
        assertEqual((await w.tool(['send', '--transient', '--group', w.group, 'ping', '{"n":1}'])).status, 0, 'send');
        const d = await got.next('the transient message');
        assertEqual([d.reason, d.text, d.message.n], ['transient', '{"n":1}', 1], 'transient');
    }],

    ['GJS post of a mailbox name, GJS send (through wormhole) and GJS transient → Swift listen', async () => {
        const w = world();
        await w.tool(['send', '--group', w.group, 'box', '"first"']);
        const listen = await w.ready(['listen', '--group', w.group, 'box', '--count', '3', '--timeout', '20']);
        // A post alone wakes the listener, which reads the stored message.
        await w.wb.post(W.mailboxName(w.group, 'wormhole', 'box'));
        const a = JSON.parse(await listen.nextLine('the posted line'));
        assertEqual([a.identifier, a.message], ['box', 'first'], 'listen line after a GJS post');
        await W.sendMessage({
            group: w.group, identifier: 'box', json: '{"from":"gjs"}', bus: w.wb,
            command: WORMHOLE,
        });
        const b = JSON.parse(await listen.nextLine('the sent line'));
        assertEqual(b.message, {from: 'gjs'}, 'listen line after sendMessage');
        // Transient messages need no lock: the module sends them itself.
        await w.wb.sendTransient({group: w.group, identifier: 'box', json: '{ "t" : [1, 2.50, 1e400] }'});
        const t = await listen.nextLine('the transient line');
        assert(t.includes('"reason":"transient"') && t.includes('1e400'), `transient line ${t}`);
        assertEqual(await listen.finished('listen'), 0, 'listen status');
    }],

    ['Swift defaults write → GJS reads every type and observes changes and removals', async () => {
        const w = world();
        const wr = (k, v) => w.tool(['defaults', 'write', '--group', w.group, k, v]);
        await wr('n', '42');
        await wr('d', '2.0');
        await wr('s', '"EUR"');
        await wr('when', '{"$date":1700000000.5}');
        await wr('blob', '{"$data":"AAE="}');
        await wr('link', '{"$url":"file:///tmp/a%20b"}');
        await wr('with.dots/and spaces', '{"a":[1,true,{"$double":"inf"}]}');
        const snap = W.readDefaults({group: w.group, root: w.root});
        assertEqual([snap.integer('n'), snap.typed('d').type, snap.double('d'), snap.string('s')], [42, 'double', 2, 'EUR'],
            'scalars');
        assertEqual(snap.date('when').getTime(), 1700000000500, 'date');
        assertEqual([...snap.data('blob')], [0, 1], 'data');
        assertEqual(snap.url('link'), 'file:///tmp/a%20b', 'url');
        assertEqual(snap.dictionary('with.dots/and spaces').a[2], Infinity, 'nested double tag');
        let mismatch = null;
        try {
            snap.integer('d');
        } catch (e) {
            mismatch = e.code;
        }
        assertEqual(mismatch, 'typeMismatch', 'a Double is not an Int');
        const all = new Inbox(), one = new Inbox();
        await w.wb.listenDefaults({group: w.group}, c => all.push(c)).ready;
        await w.wb.listenDefaults({group: w.group, keys: ['s']}, c => one.push(c)).ready;
        await wr('s', '"USD"');
        const c = await one.next('the change of s');
        assertEqual([c.key, c.value, c.removed], ['s', 'USD', false], 'one key');
        assertEqual((await all.next('the change on the prefix')).key, 's', 'whole suite');
        await w.tool(['defaults', 'delete', '--group', w.group, 'n']);
        const r = await all.next('the removal');
        assertEqual([r.key, r.value, r.removed], ['n', null, true], 'removed');
        await wr('s', '"GBP"');
        assertEqual((await one.next('the second change of s')).value, 'GBP', 'n did not wake the key observer');
        // Writes through the module go through the command (flock): observed like any other.
        await W.writeDefault({group: w.group, key: 's', json: '"CHF"', bus: w.wb, command: WORMHOLE});
        assertEqual((await one.next('the module write')).value, 'CHF', 'writeDefault');
    }],

    ['hostile files: BOM, invalid UTF-8, over the size limit, not JSON, symlink → errors, then a good one', async () => {
        const w = world();
        const got = new Inbox();
        await w.wb.listen({
            group: w.group, identifiers: ['h'], maxBytes: 64,
            onError: (e, id) => w.errors.push(`${id}: ${e.code}: ${e.message}`),
        }, d => got.push(d)).ready;
        await w.tool(['send', '--group', w.group, 'h', '0']);
        await got.next('the first message');
        const path = `${w.root}/${w.group}/wormhole/h.json`;
        const put = bytes => {
            GLib.unlink(path);
            GLib.file_set_contents(path, bytes);
            Gio.File.new_for_path(path).set_attribute_uint32('unix::mode', 0o600, Gio.FileQueryInfoFlags.NONE, null);
        };
        const name = W.mailboxName(w.group, 'wormhole', 'h');
        const cases = [
            [new Uint8Array([0xef, 0xbb, 0xbf, 0x31]), 'byte-order mark'],
            [new Uint8Array([0x22, 0xff, 0x22]), 'invalid UTF-8 at byte offset 1'],
            [new TextEncoder().encode(`"${'x'.repeat(100)}"`), 'larger than the limit of 64'],
            [new TextEncoder().encode('{"a":'), 'not one JSON document'],
        ];
        for (const [bytes, expected] of cases) {
            put(bytes);
            await w.wb.post(name);
            const e = await w.errors.next(`the error for ${expected}`);
            assert(e.includes(expected), `error "${e}" should say "${expected}"`);
        }
        GLib.unlink(path);
        GLib.file_set_contents(`${w.root}/elsewhere.json`, '1');
        Gio.File.new_for_path(path).make_symbolic_link(`${w.root}/elsewhere.json`, null);
        await w.wb.post(name);
        const e = await w.errors.next('the error for a symlink');
        assert(e.includes('symbolic link'), `error "${e}" should say symbolic link`);
        GLib.unlink(path);
        const dir = Gio.File.new_for_path(`${w.root}/${w.group}/wormhole`);
        dir.set_attribute_uint32('unix::mode', 0o777, Gio.FileQueryInfoFlags.NONE, null);
        await w.wb.post(name);
        const g = await w.errors.next('the error for a world-writable directory');
        assert(g.includes('writable by group or others'), `error "${g}" should say writable`);
        dir.set_attribute_uint32('unix::mode', 0o700, Gio.FileQueryInfoFlags.NONE, null);
        await w.tool(['send', '--group', w.group, 'h', '"good"']);
        assertEqual((await got.next('the good message after the errors')).message, 'good', 'still listening');
    }],

    ['hostile signals: non-string first argument, Message with bad JSON or over 64 KiB → dropped or reported', async () => {
        const w = world();
        const got = new Inbox();
        const name = W.mailboxName(w.group, 'wormhole', 't');
        await w.wb.listen({group: w.group, identifiers: ['t'], onError: e => w.errors.push(e.message)},
            d => got.push(d)).ready;
        const obs = new Inbox();
        await w.wb.listenNotifications(`${w.group}/`, n => obs.push(n), {prefix: true}).ready;
        const conn = w.wb.connection;
        // Through the bus: an int first argument matches no rule (the bus drops it); fed to the
        // dispatcher directly, it is dropped too, without a throw.
        conn.emit_signal(null, W.OBJECT_PATH, W.PLAIN_INTERFACE, 'Posted', new GLib.Variant('(i)', [5]));
        w.wb._onPosted(W.PLAIN_INTERFACE, new GLib.Variant('(i)', [5]));
        w.wb._onPosted(W.PLAIN_INTERFACE, new GLib.Variant('()', []));
        w.wb._onMessage(W.PLAIN_INTERFACE, new GLib.Variant('(u)', [5]));
        conn.emit_signal(null, W.OBJECT_PATH, W.bucketInterface(name), 'Message', new GLib.Variant('(ss)', [name, '{"a":']));
        assert((await w.errors.next('bad JSON report')).includes('not one JSON text'), 'bad JSON');
        conn.emit_signal(null, W.OBJECT_PATH, W.bucketInterface(name), 'Message',
            new GLib.Variant('(ss)', [name, `"${'x'.repeat(70000)}"`]));
        assert((await w.errors.next('over-size report')).includes('over the limit'), 'over-size');
        conn.emit_signal(null, W.OBJECT_PATH, W.PLAIN_INTERFACE, 'Message', new GLib.Variant('(si)', [name, 1]));
        assert((await w.errors.next('non-string report')).includes('not a string'), 'non-string message');
        conn.emit_signal(null, W.OBJECT_PATH, W.PLAIN_INTERFACE, 'Message', new GLib.Variant('(ss)', [name, '[1]']));
        assertEqual((await got.next('a good transient')).text, '[1]', 'good one after the bad ones');
    }],

    ['bad input is refused, naming the value, before the bus is touched', async () => {
        const w = world();
        const refuse = (fn, code, word) => {
            try {
                fn();
            } catch (e) {
                assertEqual(e.code, code, `code for ${word}`);
                assert(e.message.includes(word), `"${e.message}" names ${word}`);
                return;
            }
            throw new Error(`${word} was accepted`);
        };
        refuse(() => w.wb.listenNotifications('', () => {}), 'invalidName', 'empty');
        refuse(() => w.wb.listenNotifications('n'.repeat(901), () => {}), 'invalidName', '901 bytes');
        refuse(() => w.wb.listenNotifications("'".repeat(300), () => {}), 'invalidName', 'match');
        refuse(() => w.wb.listenNotifications('a/b', () => {}, {prefix: true}), 'invalidName', '"a/b"');
        refuse(() => w.wb.listen({group: 'bad group', identifiers: ['x']}, () => {}), 'invalidGroup', 'bad group');
        refuse(() => w.wb.listen({group: w.group, directory: 'Preferences', identifiers: ['x']}, () => {}),
            'invalidDirectory', 'Preferences');
        refuse(() => w.wb.listen({group: w.group, identifiers: ['.hidden']}, () => {}), 'invalidIdentifier', '.hidden');
        refuse(() => w.wb.post('x', {state: -1}), 'invalidValue', '-1');
        refuse(() => w.wb.post('bad\uD800name'), 'invalidName', 'not valid UTF-8');
        refuse(() => w.wb.post('nul\0name'), 'invalidName', 'NUL');
        refuse(() => w.wb.sendTransient({group: w.group, identifier: 'x', json: '{'}), 'invalidJSON', 'not one JSON');
        refuse(() => w.wb.sendTransient({group: w.group, identifier: 'x', json: `"${'x'.repeat(70000)}"`}),
            'transientTooLarge', 'over the limit');
        refuse(() => W.readDefaults({group: w.group, suite: 'a/b'}), 'invalidSuite', 'a/b');
        // Names with ' and \ are escaped in the rules and delivered.
        const odd = `${w.group}.it's\\odd`;
        const got = new Inbox();
        await w.wb.listenNotifications(odd, n => got.push(n)).ready;
        await w.tool(['post', odd, '--state', '1']);
        assertEqual((await got.next('the odd name')).name, odd, 'quotes and backslashes');
    }],

    ['a corrupt suite is an error naming the file and the offset; reading changes nothing', async () => {
        const w = world();
        await w.tool(['defaults', 'write', '--group', w.group, 'k', '1']);
        const path = `${w.root}/${w.group}/Preferences/${w.group}.json`;
        GLib.file_set_contents(path, '{"k":1,]');
        try {
            W.readDefaults({group: w.group, root: w.root});
            throw new Error('accepted');
        } catch (e) {
            assertEqual(e.code, 'corruptSuite', 'code');
            assert(e.message.includes(path) && e.message.includes('byte offset 7'), e.message);
        }
        const [, after] = GLib.file_get_contents(path);
        assertEqual(new TextDecoder().decode(after), '{"k":1,]', 'the file is as it was');
    }],

    ['the bus restarts: lost, back, one catch-up with what changed meanwhile', async () => {
        const w = world();
        const {own, wb, events} = await restartableBus(w.root, cleanups);
        const got = new Inbox();
        const notes = new Inbox();
        const keys = new Inbox();
        await wb.listen({group: w.group, identifiers: ['m']}, d => got.push(d)).ready;
        await wb.listenNotifications(`${w.group}.n`, n => notes.push(n)).ready;
        await wb.listenDefaults({group: w.group}, c => keys.push(c)).ready;
        const send = async (json, address) => {
            const c = new Child([WORMHOLE, 'send', '--group', w.group, 'm', json, '--bus-address', address],
                {env: w.env});
            return c.finished('send');
        };
        assertEqual(await send('1', own.address), 0, 'send');
        assertEqual((await got.next('the first message')).text, '1', 'first');
        await own.stop();
        assertEqual(await events.next('lost'), 'lost', 'lost the bus');
        assertEqual(await send('2', own.address), 0, 'send while the bus is down stores');
        const write = new Child([WORMHOLE, 'defaults', 'write', '--group', w.group, 'mode', '"dark"', '--bus-address',
            own.address], {env: w.env});
        assertEqual(await write.finished('defaults write while the bus is down'), 0, 'defaults write stores');
        await own.start();
        assertEqual(await events.next('back'), 'back', 'back on the bus');
        const c = await got.next('the catch-up');
        assertEqual([c.reason, c.text], ['catchUp', '2'], 'catch-up');
        assertEqual((await notes.next('the observer catch-up')).reason, 'catchUp', 'observer catch-up');
        const k = await keys.next('the defaults catch-up');
        assertEqual([k.key, k.value, k.reason], ['mode', 'dark', 'catchUp'], 'defaults catch-up');
        assertEqual(await send('3', own.address), 0, 'send after');
        assertEqual((await got.next('a post after the reconnect')).text, '3', 'rules re-added');
    }],

    ['a sandboxed participant (app ID) owns <APPID>.Wormhole.c<unique> before it posts', async () => {
        const w = world();
        const wb = new W.WormholeBus({address: bus.address, root: w.root, appId: 'org.example.Lines'});
        cleanups.push(() => wb.close());
        const name = `${w.group}.sandboxed`;
        const obs = await w.ready(['observe', name, '--count', '1', '--timeout', '20']);
        await wb.post(name, {state: 5});
        assert((await obs.nextLine('the observe line')).includes('"state":5'), 'delivered');
        const owned = `org.example.Lines.Wormhole.c${wb.connection.get_unique_name().slice(1).replaceAll('.', '_')}`;
        const reply = wb.connection.call_sync('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus',
            'GetNameOwner', new GLib.Variant('(s)', [owned]), null, Gio.DBusCallFlags.NONE, 5000, null);
        assertEqual(reply.deep_unpack()[0], wb.connection.get_unique_name(), `owner of ${owned}`);
    }],

    ['a shared connection (the Shell way): Gio.DBusConnection given, left open by close()', async () => {
        const w = world();
        const conn = Gio.DBusConnection.new_for_address_sync(bus.address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, null, null);
        const shared = new W.WormholeBus({connection: conn, root: w.root});
        const got = new Inbox();
        await shared.listenNotifications(`${w.group}.shell`, n => got.push(n)).ready;
        await w.tool(['post', `${w.group}.shell`]);
        assertEqual((await got.next('post on a shared connection')).name, `${w.group}.shell`, 'delivered');
        shared.close();
        assert(!conn.is_closed(), 'the shared connection stays open');
        conn.close_sync(null);
    }],
];

await runProgram(tests, bus, cleanups);

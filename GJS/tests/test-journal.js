// SPDX-License-Identifier: MIT
// Journal reading in GJS against journals the Swift side appends to, across processes, on a
// private dbus-daemon: order, nothing lost or twice (also across a bus restart), durable
// consumers (cursor, redelivery, the lock shared with Swift), damage reported like Swift's
// `journal check`, and the Promise-based sends.
// Run: gjs -m GJS/tests/test-journal.js   (WORMHOLE_SWIFT_BIN: the directory of the Swift tools)
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import * as W from '../wormhole.js';
import {
    Child, Inbox, PrivateBus, SWIFT_BIN, WORMHOLE, assert, assertEqual, makeWorld, restartableBus, runProgram
} from './harness.js';

const bus = await new PrivateBus().start();
const tag = GLib.getenv('GJS_TEST_RUNTIME') === 'unset' ? 'jn' : 'jr';
let counter = 0;
const cleanups = [];
const world = () => makeWorld(bus, cleanups, `${tag}-${++counter}`);
const PEER = `${SWIFT_BIN}/wormhole-test-peer`;

/** Appends COUNT records `{"p":PID,"i":I}` from the Swift test peer, BATCH per append. */
async function swiftAppend(w, id, count, batch, address = bus.address) {
    const child = new Child([PEER, 'journal-append', w.root, w.group, id, String(count), String(batch), address],
        {env: w.env});
    const status = await child.finished('the Swift appender', 300000);
    await child.stdout.until(l => l === null, 'the appender output end', 60000);
    return {status, lines: child.stdoutText};
}

/** Records into an inbox and a list; checks each number is the next one. */
function recorder() {
    const seen = [];
    const all = [];
    const inbox = new Inbox();
    const handler = r => {
        seen.push(r.sequence);
        all.push(r);
        inbox.push(r);
    };
    const upTo = async (n, what) => {
        while (seen.length < n)
            await inbox.next(what, 120000);
    };
    const check = n => {
        assertEqual(seen.length, n, 'records delivered (0 lost, 0 twice)');
        for (let k = 0; k < n; k++) {
            if (seen[k] !== BigInt(k + 1))
                throw new Error(`record ${k + 1} delivered as number ${seen[k]}: out of order, lost or twice`);
        }
    };
    return {seen, all, inbox, handler, upTo, check};
}

const tests = [
    ['10,000 records appended by Swift: in order, 0 lost, 0 twice, also across a bus restart', async () => {
        const w = world();
        const {own, wb, events} = await restartableBus(w.root, cleanups);
        const r = recorder();
        const messages = [];
        const sub = wb.listenJournal({group: w.group, identifier: 'log', from: 'start'}, rec => {
            messages.push(rec.message);
            r.handler(rec);
        });
        await sub.ready;
        assertEqual((await swiftAppend(w, 'log', 5000, 7, own.address)).status, 0, 'first appender');
        await r.upTo(5000, 'the first 5,000 records');
        await own.stop();
        assertEqual(await events.next('lost'), 'lost', 'lost the bus');
        // Appended while no bus runs: nobody is woken (the appender says so and exits 1).
        await swiftAppend(w, 'log', 5000, 13, own.address);
        await own.start();
        assertEqual(await events.next('back'), 'back', 'back on the bus');
        await r.upTo(10000, 'the 5,000 records appended while the bus was down (catch-up)');
        r.check(10000);
        assert(messages.every(m => typeof m.p === 'number' && typeof m.i === 'number'), 'messages parsed');
        const stat = JSON.parse((await w.tool(['journal', 'stat', '--group', w.group, 'log'])).stdout[0]);
        assertEqual([stat.first, stat.last], [1, 10000], 'Swift sees the same journal');
        print(`# 10,000 records: ${r.seen.length} delivered, in order, none twice`);
    }],

    ['from end (default), from a number; appendJournal and the Promise API', async () => {
        const w = world();
        for (const n of [1, 2, 3])
            await W.appendJournal({group: w.group, identifier: 'e', json: `{"n":${n}}`, bus: w.wb, command: WORMHOLE});
        const fromEnd = recorder();
        await w.wb.listenJournal({group: w.group, identifier: 'e'}, fromEnd.handler).ready;
        const fromTwo = [];
        const inbox = new Inbox();
        await w.wb.listenJournal({group: w.group, identifier: 'e', from: 2}, rec => {
            fromTwo.push(rec.sequence);
            inbox.push(rec);
        }).ready;
        const result = await W.appendJournal({
            group: w.group, identifier: 'e', json: '{"n":4,"big":1e400}', bus: w.wb,
            command: WORMHOLE,
        });
        assertEqual(result.status, 0, 'appendJournal resolves with the exit status');
        const rec = await fromEnd.inbox.next('the record appended after ready');
        assertEqual([rec.sequence, rec.text, W.stringifyJSON(rec.message)], [4n, '{"n":4,"big":1e400}',
            '{"n":4,"big":1e400}'], 'from end: only the record appended after ready, kept as written');
        while (fromTwo.length < 3)
            await inbox.next('records 2..4');
        assertEqual(fromTwo, [2n, 3n, 4n], 'from 2');
        const stored = await W.sendMessage({group: w.group, identifier: 'm', json: '{"x":1}', bus: w.wb, command: WORMHOLE});
        assertEqual(stored.status, 0, 'sendMessage resolves');
        const read = await W.readMessageAsync({group: w.group, identifier: 'm', root: w.root});
        assertEqual(read.text, '{"x":1}', 'readMessageAsync resolves with the stored text');
        assertEqual(await W.readMessageAsync({group: w.group, identifier: 'none', root: w.root}), null, 'empty: null');
        let refused = null;
        try {
            W.appendJournal({group: w.group, identifier: '../x', json: '1', bus: w.wb});
        } catch (e) {
            refused = e;
        }
        assert(refused instanceof W.WormholeError && refused.code === 'invalidIdentifier', 'bad identifier refused at once');
    }],

    ['a durable consumer: cursor stored per batch, resumes after a restart, lock shared with Swift', async () => {
        const w = world();
        assertEqual((await swiftAppend(w, 'c', 600, 100)).status, 0, 'append 600');
        const first = recorder();
        let sub = w.wb.listenJournal({group: w.group, identifier: 'c', consumer: 'gjs', from: 'start'}, first.handler);
        await sub.ready;
        await first.upTo(600, 'the consumer to read 600');
        first.check(600);
        assert(first.all.every(r => !r.redelivery), 'nothing flagged as redelivered on a first run');
        const stat = JSON.parse((await w.tool(['journal', 'stat', '--group', w.group, 'c'])).stdout[0]);
        assertEqual(stat.consumers, {gjs: 600}, "Swift reads GJS's stored cursor");
        // Swift refuses the consumer while GJS holds it.
        const busy = await w.tool(['listen', '--journal', '--group', w.group, 'c', '--consumer', 'gjs', '--timeout', '5']);
        assertEqual(busy.status, 1, `Swift's listen of a consumer GJS holds exits 1 (${busy.stderr.join(' | ')})`);
        sub.cancel();
        assertEqual((await swiftAppend(w, 'c', 50, 50)).status, 0, 'append 50 more');
        const second = recorder();
        sub = w.wb.listenJournal({group: w.group, identifier: 'c', consumer: 'gjs', from: 'start'}, second.handler);
        await sub.ready;
        await second.upTo(50, 'the consumer to resume');
        assertEqual([second.seen[0], second.seen[49]], [601n, 650n], 'resumed after the last acknowledged record');
        // A cursor left by a run that died mid-batch: its records come again, flagged.
        sub.cancel();
        const dir = `${w.root}/${w.group}/wormhole/c.journal`;
        const cursor = Gio.File.new_for_path(`${dir}/gjs.cursor`);
        cursor.replace_contents(new TextEncoder().encode('{"format":1,"acknowledged":620,"delivering":640}\n'), null,
            false, Gio.FileCreateFlags.PRIVATE | Gio.FileCreateFlags.REPLACE_DESTINATION, null);
        const third = recorder();
        sub = w.wb.listenJournal({group: w.group, identifier: 'c', consumer: 'gjs'}, third.handler);
        await sub.ready;
        await third.upTo(30, 'the records after the acknowledged one');
        const again = third.all.map(rec => [Number(rec.sequence), rec.redelivery]);
        assertEqual([again[0], again[19], again[20], again[29]], [[621, true], [640, true], [641, false], [650, false]],
            'records up to the stored delivering number come again as redeliveries');
        sub.cancel();
        // A cursor that does not parse is an error for that consumer alone, naming the file.
        cursor.replace_contents(new TextEncoder().encode('{"format":1,'), null, false,
            Gio.FileCreateFlags.REPLACE_DESTINATION, null);
        let bad = null;
        try {
            await w.wb.listenJournal({group: w.group, identifier: 'c', consumer: 'gjs'}, () => {}).ready;
        } catch (e) {
            bad = e;
        }
        assert(bad instanceof W.WormholeError && bad.code === 'invalidCursor' && bad.message.includes('gjs.cursor'),
            `an unreadable cursor: ${bad}`);
        const other = recorder();
        await w.wb.listenJournal({group: w.group, identifier: 'c', consumer: 'other', from: 649}, other.handler).ready;
        await other.upTo(2, 'another consumer of the same journal');
        cursor.delete(null);
        // Swift holds it: GJS is refused, naming the consumer.
        const holder = new Child([PEER, 'journal-consume', w.root, w.group, 'c', 'gjs', '0', bus.address],
            {env: w.env, stdin: true});
        cleanups.push(() => holder.kill(9));
        assertEqual((await swiftAppend(w, 'c', 1, 1)).status, 0, 'append 1 more');
        const line = await holder.nextLine('the Swift consumer to deliver record 1');
        assert(line && line.startsWith('1 0 '), `Swift's consumer (its cursor removed) starts from the beginning: ${line}`);
        let error = null;
        try {
            await w.wb.listenJournal({group: w.group, identifier: 'c', consumer: 'gjs'}, () => {}).ready;
        } catch (e) {
            error = e;
        }
        holder.closeInput();
        await holder.finished('the Swift consumer');
        assert(error instanceof W.WormholeError && error.code === 'consumerBusy' && error.message.includes("'gjs'"),
            `a consumer Swift holds is refused: ${error}`);
    }],

    ['damage is reported in its place, like Swift journal check, and reading goes on', async () => {
        const w = world();
        assertEqual((await swiftAppend(w, 'd', 40, 40)).status, 0, 'append 40');
        const segment = `${w.root}/${w.group}/wormhole/d.journal/${W.segmentName(1n)}`;
        const [, bytes] = GLib.file_get_contents(segment);
        // Flip a byte in the payload of a frame in the middle (frames of {"p":PID,"i":I}).
        const at = Math.floor(bytes.length / 2);
        bytes[at] ^= 0x55;
        Gio.File.new_for_path(segment).replace_contents(bytes, null, false, Gio.FileCreateFlags.NONE, null);
        const check = await w.tool(['journal', 'check', '--group', w.group, 'd']);
        assertEqual(check.status, 1, 'Swift journal check finds damage');
        const damaged = JSON.parse(check.stdout[0]).damaged;
        const gaps = [];
        const r = recorder();
        await w.wb.listenJournal({group: w.group, identifier: 'd', from: 'start', onDamage: g => gaps.push(g)},
            r.handler).ready;
        await r.upTo(40 - damaged.reduce((n, d) => n + (d.to - d.from + 1), 0), 'the readable records');
        assertEqual(gaps.map(g => [Number(g.from), Number(g.to), g.reason, g.file]),
            damaged.map(d => [d.from, d.to, d.reason, d.file]), 'the same ranges as Swift');
        assert(r.seen.every((s, k) => k === 0 || s > r.seen[k - 1]), 'in order');
        assertEqual(r.seen[r.seen.length - 1], 40n, 'reading went on to the last record');
    }],

    ['retention, a seal past the next number, an unsealed end, a foreign segment: ranges as Swift reports them', async () => {
        const w = world();
        assertEqual((await swiftAppend(w, 's', 10, 10)).status, 0, 'append 10');
        const dir = `${w.root}/${w.group}/wormhole/s.journal`;
        // Segments written by hand in the documented format (journal-format.md): 11..12 sealed
        // into 20.., a segment 30 named but never written, and 40..41.
        writeSegment(dir, 11n, [11n, 12n], 20n);
        writeSegment(dir, 20n, [20n, 21n], null);
        writeSegment(dir, 40n, [40n, 41n], null);
        GLib.mkdir_with_parents(`${dir}/${W.segmentName(30n)}`, 0o700); // a directory where a segment goes
        Gio.File.new_for_path(`${dir}/${W.segmentName(1n)}`).delete(null); // retention took 1..10
        const check = await w.tool(['journal', 'check', '--group', w.group, 's']);
        const damaged = JSON.parse(check.stdout[0]).damaged;
        const gaps = [];
        const r = recorder();
        await w.wb.listenJournal({group: w.group, identifier: 's', from: 'start', onDamage: g => gaps.push(g)},
            r.handler).ready;
        await r.upTo(6, 'the records of the three segments');
        assertEqual(r.seen, [11n, 12n, 20n, 21n, 40n, 41n], 'records across seals and gaps, in order');
        assertEqual(gaps.map(g => [Number(g.from), Number(g.to), g.reason]),
            [[1, 10, 'retention'], [13, 19, 'truncated'], [22, 29, 'truncated'], [30, 39, 'foreign']],
            'ranges');
        assertEqual(gaps.filter(g => g.isDamage).map(g => [Number(g.from), Number(g.to), g.reason, g.file]),
            damaged.map(d => [d.from, d.to, d.reason, d.file]), 'the damage Swift journal check reports');
    }],
];

/** Writes a segment file: the header, one record `{"n":N}` per number, and a seal when given. */
function writeSegment(dir, first, numbers, sealTo) {
    const frames = [];
    const frame = (length, sequence, payload) => {
        const bytes = new Uint8Array(24 + payload.length);
        const view = new DataView(bytes.buffer);
        view.setUint32(0, length, true);
        view.setBigUint64(4, sequence, true);
        view.setBigUint64(12, 1700000000000000000n + sequence, true);
        bytes.set(payload, 20);
        view.setUint32(20 + payload.length, W.crc32c(bytes, 0, 20 + payload.length), true);
        frames.push(bytes);
    };
    for (const n of numbers) {
        const payload = new TextEncoder().encode(`{"n":${n}}`);
        frame(payload.length, n, payload);
    }
    if (sealTo !== null)
        frame(0xffffffff, sealTo, new Uint8Array(0));
    const header = new Uint8Array(16);
    header.set([0x57, 0x48, 0x4a, 0x4c, 1], 0);
    new DataView(header.buffer).setBigUint64(8, first, true);
    const all = new Uint8Array(16 + frames.reduce((n, f) => n + f.length, 0));
    all.set(header, 0);
    let at = 16;
    for (const f of frames) {
        all.set(f, at);
        at += f.length;
    }
    Gio.File.new_for_path(`${dir}/${W.segmentName(first)}`).replace_contents(all, null, false,
        Gio.FileCreateFlags.PRIVATE, null);
}

await runProgram(tests, bus, cleanups);

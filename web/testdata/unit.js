// Unit tests for roomcast.js: backoff, id parsing, the dedupe/gap cursor and
// the Subscription state machine (with a stand-in EventSource). They run in
// the browser that the Go tests drive; the results land in window.unitResults as
// {passed: [names], failed: [{name, error}]}.

import {
  backoffDelay, parseEventId, formatEventId, Cursor, subscribe, State, ROOM_PATTERN,
} from '/roomcast.js';

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

function ok(cond, msg) {
  if (!cond) throw new Error(msg);
}

function eq(got, want, msg) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${msg}: got ${g}, want ${w}`);
}

const tick = (ms = 0) => new Promise((resolve) => setTimeout(resolve, ms));

// A stand-in for EventSource that the tests drive by hand. Each test gets
// its own subclass, so `all` lists only that test's instances.
function fakeEventSource() {
  return class FakeEventSource {
    static CONNECTING = 0;
    static OPEN = 1;
    static CLOSED = 2;
    static all = [];

    constructor(url, init) {
      this.url = url;
      this.init = init;
      this.readyState = 0;
      this.closed = false;
      this.listeners = new Map();
      FakeEventSource.all.push(this);
    }

    addEventListener(type, fn) {
      if (!this.listeners.has(type)) this.listeners.set(type, []);
      this.listeners.get(type).push(fn);
    }

    close() {
      this.readyState = 2;
      this.closed = true;
    }

    // Drivers.
    fire(type, props = {}) {
      for (const fn of this.listeners.get(type) ?? []) fn({ type, ...props });
    }

    open() {
      this.readyState = 1;
      this.fire('open');
    }

    send(data, type = 'message') {
      const text = typeof data === 'string' ? data : JSON.stringify(data);
      const id = typeof data === 'object' && type !== 'resync' ? `${data.epoch}:${data.seq}` : '';
      this.fire(type, { data: text, lastEventId: id });
    }

    // The stream ended; the browser retries by itself.
    drop() {
      this.readyState = 0;
      this.fire('error');
    }

    // The browser gave up (non-200, wrong type, network failure).
    fail() {
      this.readyState = 2;
      this.fire('error');
    }
  };
}

const ev = (seq, epoch = 'e1', room = 'r') => ({
  room, epoch, seq, ts: Date.now(), type: 'message', body: { n: seq },
});

// recorder subscribes with a fake EventSource and records every callback.
function recorder(options = {}, target = 'r') {
  const ES = fakeEventSource();
  const rec = { ES, events: [], resyncs: [], gaps: [], states: [], errors: [] };
  rec.sub = subscribe(target, {
    EventSource: ES,
    baseUrl: 'http://gw.test/',
    onEvent: (e) => rec.events.push(e),
    onResync: (r) => rec.resyncs.push(r),
    onGap: (g) => rec.gaps.push(g),
    onState: (s, d) => rec.states.push({ s, ...d }),
    onError: (e) => rec.errors.push(e.message),
    ...options,
  });
  rec.last = () => ES.all.at(-1);
  return rec;
}

// --- backoffDelay ---------------------------------------------------------

test('backoff: ceiling doubles from base up to cap', () => {
  const almostOne = () => 0.999999;
  const got = [0, 1, 2, 3, 4, 5, 6].map((a) => backoffDelay(a, { base: 100, cap: 1000 }, almostOne));
  eq(got, [99, 199, 399, 799, 999, 999, 999], 'delays at the top of each range');
});

test('backoff: full jitter starts at zero', () => {
  eq(backoffDelay(5, { base: 100, cap: 1000 }, () => 0), 0, 'delay with random 0');
});

test('backoff: spread is uniform over [0, ceiling)', () => {
  const samples = Array.from({ length: 4000 }, () => backoffDelay(3, { base: 100, cap: 10000 }));
  ok(samples.every((d) => Number.isInteger(d) && d >= 0 && d < 800), 'every delay in [0, 800)');
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  ok(mean > 360 && mean < 440, `mean ${mean} near 400`);
  ok(Math.min(...samples) < 40 && Math.max(...samples) > 760, 'samples reach both ends');
});

test('backoff: a long outage stays at the cap', () => {
  const d = backoffDelay(1e6, { base: 1000, cap: 30000 }, () => 0.999999);
  eq(d, 29999, 'delay after a million attempts');
  eq(backoffDelay(-3, { base: 100, cap: 1000 }, () => 0.999999), 99, 'negative attempt counts as 0');
});

test('backoff: defaults are 1 s base and 30 s cap', () => {
  eq(backoffDelay(0, undefined, () => 0.999999), 999, 'first delay');
  eq(backoffDelay(20, undefined, () => 0.999999), 29999, 'capped delay');
});

// --- event ids --------------------------------------------------------------

test('ids: parse epoch:seq and bare seq', () => {
  eq(parseEventId('k3x9q:48'), { epoch: 'k3x9q', seq: 48 }, 'full id');
  eq(parseEventId('48'), { epoch: '', seq: 48 }, 'bare seq');
  eq(parseEventId('a:b:7'), { epoch: 'a:b', seq: 7 }, 'the last colon splits');
  eq(parseEventId('0'), { epoch: '', seq: 0 }, 'zero');
});

test('ids: reject malformed ids', () => {
  for (const bad of ['', null, undefined, 'abc', ':5', 'e:', 'e:-1', 'e:1.5', 'e: 3', '1e3', 'e:9999999999999999']) {
    eq(parseEventId(bad), null, `parseEventId(${JSON.stringify(bad)})`);
  }
});

test('ids: format is the inverse of parse', () => {
  for (const id of ['k3x9q:48', '12', 'x:0']) eq(formatEventId(parseEventId(id)), id, `round trip of ${id}`);
});

test('room names follow the gateway pattern', () => {
  for (const good of ['lobby', 'a.b_c~d-1', 'x'.repeat(128)]) ok(ROOM_PATTERN.test(good), `${good} is valid`);
  for (const bad of ['', 'a/b', 'a:b', '{x}', 'a b', 'x'.repeat(129), 'é']) ok(!ROOM_PATTERN.test(bad), `${bad} is invalid`);
});

// --- Cursor -----------------------------------------------------------------

test('cursor: first event is taken as is, then dedupe by seq', () => {
  const c = new Cursor();
  eq(c.lastEventId, '', 'no position yet');
  eq(c.accept(ev(5)).duplicate, false, 'first event');
  eq(c.accept(ev(5)).duplicate, true, 'same seq again');
  eq(c.accept(ev(3)).duplicate, true, 'older seq');
  eq(c.accept(ev(6)), { duplicate: false, gap: null, epochChanged: false, previous: { epoch: 'e1', seq: 5 } }, 'next seq');
  eq(c.lastEventId, 'e1:6', 'position');
});

test('cursor: a gap names the missing range', () => {
  const c = new Cursor('e1:2');
  eq(c.accept(ev(3)).gap, null, 'no gap at last+1');
  eq(c.accept(ev(7)).gap, { room: 'r', epoch: 'e1', from: 4, to: 6 }, 'gap 4..6');
  eq(c.accept(ev(8)).gap, null, 'position moved past the gap');
});

test('cursor: a bare seq start adopts the first epoch', () => {
  const c = new Cursor('10');
  eq(c.accept(ev(10, 'e9')).duplicate, true, 'seq 10 was seen');
  const v = c.accept(ev(12, 'e9'));
  eq([v.duplicate, v.epochChanged, v.gap], [false, false, { room: 'r', epoch: 'e9', from: 11, to: 11 }], 'seq 12');
  eq(c.lastEventId, 'e9:12', 'position');
});

test('cursor: another epoch is flagged, never deduped against the old one', () => {
  const c = new Cursor('old:50');
  const v = c.accept(ev(1, 'new'));
  eq([v.duplicate, v.epochChanged, v.gap], [false, true, null], 'first event of the new epoch');
  eq(c.accept(ev(1, 'new')).duplicate, true, 'then dedupe in the new epoch');
});

test('cursor: resync moves the position; a repeated one is a no-op', () => {
  const c = new Cursor('old:9');
  eq(c.resync({ room: 'r', epoch: 'new', seq: 4 }), true, 'first resync');
  eq(c.lastEventId, 'new:4', 'position after resync');
  eq(c.resync({ room: 'r', epoch: 'new', seq: 4 }), false, 'same resync again');
  eq(c.accept(ev(4, 'new')).duplicate, true, 'seq at the resync point');
  eq(c.accept(ev(5, 'new')).gap, null, 'live continues after it');
});

test('cursor: a resync behind the position in its epoch is ignored, unless a fork', () => {
  const c = new Cursor();
  for (let seq = 11; seq <= 13; seq++) c.accept(ev(seq, 'e'));
  eq(c.resync({ room: 'r', epoch: 'e', seq: 11 }), false, 'resync behind');
  eq(c.resync({ room: 'r', epoch: 'e', seq: 13 }), false, 'resync at the position');
  eq(c.position('r'), { epoch: 'e', seq: 13 }, 'position kept');
  eq(c.lastEventId, 'e:13', 'lastEventId kept');
  eq(c.accept(ev(12, 'e')).duplicate, true, 'a repeated event stays a duplicate');
  eq(c.resync({ room: 'r', epoch: 'e', seq: 12, fork: true }), true, 'fork behind');
  eq(c.position('r'), { epoch: 'e', seq: 12 }, 'a fork moves back');
  eq(c.accept(ev(13, 'e')).duplicate, false, 'the forked history\'s 13 is new');
  eq(c.resync({ room: 'r', epoch: 'e', seq: 20 }), true, 'resync ahead');
  eq(c.resync({ room: 'r', epoch: 'f', seq: 1 }), true, 'resync to another epoch');
});

test('subscribe: a resync behind what was delivered is not passed on', () => {
  const rec = recorder();
  const es = rec.last();
  es.open();
  for (let seq = 11; seq <= 13; seq++) es.send(ev(seq));
  es.send({ room: 'r', epoch: 'e1', seq: 11 }, 'resync');
  es.send(ev(12));
  es.send(ev(13));
  es.send(ev(14));
  eq(rec.resyncs, [], 'no resync');
  eq(rec.events.map((e) => e.seq), [11, 12, 13, 14], 'each event once');
  eq(rec.sub.lastEventId, 'e1:14', 'lastEventId');
  rec.sub.close();
});

test('cursor: rooms are independent', () => {
  const c = new Cursor();
  c.accept(ev(3, 'e', 'a'));
  eq(c.accept(ev(1, 'e', 'b')).duplicate, false, 'room b seq 1 after room a seq 3');
  eq(c.position('a'), { epoch: 'e', seq: 3 }, 'room a');
  eq(c.position('b'), { epoch: 'e', seq: 1 }, 'room b');
  eq(c.lastEventId, 'e:1', 'the latest move');
});

// --- Subscription -------------------------------------------------------------

test('subscribe: a room name resolves against baseUrl', () => {
  const rec = recorder();
  eq(rec.last().url, 'http://gw.test/rooms/r/events', 'stream URL');
  eq(rec.sub.state, State.CONNECTING, 'state');
  eq(rec.states.map((s) => s.s), ['connecting'], 'states');
  rec.sub.close();
});

test('subscribe: bad targets throw', () => {
  for (const bad of ['', 'bad room', '{x}', 42]) {
    let threw = false;
    try {
      subscribe(bad, { EventSource: fakeEventSource() });
    } catch (e) {
      threw = e instanceof TypeError;
    }
    ok(threw, `subscribe(${JSON.stringify(bad)}) throws a TypeError`);
  }
});

test('subscribe: the start position goes in the query', () => {
  const a = recorder({ lastEventId: 'e1:7' });
  eq(a.last().url, 'http://gw.test/rooms/r/events?lastEventId=e1%3A7', 'from options');
  a.sub.close();
  const b = recorder({}, 'http://gw.test/rooms/r/events?x=1&lastEventId=e1%3A3');
  eq(b.last().url, 'http://gw.test/rooms/r/events?x=1&lastEventId=e1%3A3', 'from the URL');
  eq(b.sub.lastEventId, 'e1:3', 'position');
  b.sub.close();
});

test('subscribe: every event once, duplicates dropped and counted', () => {
  const rec = recorder();
  const es = rec.last();
  es.open();
  for (const s of [1, 2, 2, 1, 3]) es.send(ev(s));
  eq(rec.events.map((e) => e.seq), [1, 2, 3], 'delivered seqs');
  eq(rec.events[2].id, 'e1:3', 'event id');
  eq(rec.events[2].body, { n: 3 }, 'event body');
  eq(rec.sub.stats.duplicates, 2, 'duplicates');
  eq(rec.sub.stats.events, 3, 'events');
  eq(rec.sub.lastEventId, 'e1:3', 'position');
  rec.sub.close();
});

test('subscribe: a gap is reported and the event still delivered', () => {
  const rec = recorder();
  const es = rec.last();
  es.open();
  es.send(ev(1));
  es.send(ev(4));
  eq(rec.gaps, [{ room: 'r', epoch: 'e1', from: 2, to: 3 }], 'gaps');
  eq(rec.events.map((e) => e.seq), [1, 4], 'delivered');
  eq(rec.sub.stats.gaps, 1, 'gap count');
  rec.sub.close();
});

test('subscribe: resync is passed on, and live continues after it', () => {
  const rec = recorder({ lastEventId: 'old:9' });
  const es = rec.last();
  es.open();
  es.send({ room: 'r', epoch: 'new', seq: 2 }, 'resync');
  es.send({ room: 'r', epoch: 'new', seq: 2 }, 'resync');
  es.send(ev(3, 'new'));
  eq(rec.resyncs, [{ room: 'r', epoch: 'new', seq: 2, previous: 'old:9' }], 'one resync');
  eq(rec.events.map((e) => `${e.epoch}:${e.seq}`), ['new:3'], 'events');
  eq(rec.gaps, [], 'no gap');
  eq(rec.sub.stats.resyncs, 1, 'resync count');
  rec.sub.close();
});

test('subscribe: an epoch change without resync is reported as one', () => {
  const rec = recorder();
  const es = rec.last();
  es.open();
  es.send(ev(7, 'old'));
  es.send(ev(1, 'new'));
  eq(rec.resyncs, [{ room: 'r', epoch: 'new', seq: 0, previous: 'old:7' }], 'synthesised resync');
  eq(rec.events.map((e) => `${e.epoch}:${e.seq}`), ['old:7', 'new:1'], 'events');
  rec.sub.close();
});

test('subscribe: the browser\'s own reconnect is left alone', () => {
  const rec = recorder();
  const es = rec.last();
  es.open();
  es.send(ev(1));
  es.drop();
  eq(rec.sub.state, State.RECONNECTING, 'state after the stream ended');
  eq(rec.states.at(-1).reason, 'ended', 'reason');
  es.open();
  es.send(ev(2));
  eq(rec.ES.all.length, 1, 'no new EventSource');
  eq(rec.sub.state, State.OPEN, 'open again');
  eq(rec.sub.stats.reconnects, 1, 'reconnects');
  eq(rec.sub.stats.recreates, 0, 'recreates');
  eq(rec.events.map((e) => e.seq), [1, 2], 'events');
  rec.sub.close();
});

test('subscribe: a CLOSED source is recreated with lastEventId', async () => {
  const rec = recorder({ random: () => 0 });
  const first = rec.last();
  first.open();
  first.send(ev(1));
  first.send(ev(2));
  first.fail();
  ok(first.closed, 'the dead source is closed');
  eq(rec.states.at(-1), { s: 'reconnecting', reason: 'closed', attempt: 1, delay: 0 }, 'state');
  await tick(5);
  eq(rec.ES.all.length, 2, 'a second EventSource');
  const second = rec.last();
  eq(second.url, 'http://gw.test/rooms/r/events?lastEventId=e1%3A2', 'resumes from the last id');
  eq(rec.sub.url, second.url, 'url getter');
  second.open();
  second.send(ev(2));
  second.send(ev(3));
  first.send(ev(9)); // a stale source must be ignored
  eq(rec.events.map((e) => e.seq), [1, 2, 3], 'events');
  eq(rec.sub.stats.recreates, 1, 'recreates');
  rec.sub.close();
});

test('subscribe: a source recreated without a position reports an unanchored resync once open', async () => {
  const rec = recorder({ random: () => 0 });
  const first = rec.last();
  first.open(); // the server anchored it, but no event told the module where
  first.fail();
  await tick(5);
  const second = rec.last();
  eq(second.url, 'http://gw.test/rooms/r/events', 'no position to resume from');
  eq(rec.resyncs, [], 'nothing reported before the new source is open');
  second.open();
  eq(rec.resyncs, [{ room: 'r', epoch: '', seq: 0, previous: null, unanchored: true }], 'unanchored resync');
  eq(rec.sub.stats.resyncs, 1, 'resync count');
  second.send(ev(5));
  second.drop();
  second.open(); // the browser's own reconnect keeps its position: nothing to report
  eq(rec.resyncs.length, 1, 'one report');
  eq(rec.events.map((e) => e.seq), [5], 'events');
  rec.sub.close();
});

test('subscribe: a source recreated with a position, or before any opened, reports nothing', async () => {
  for (const lastEventId of ['e1:4', undefined]) {
    const rec = recorder({ random: () => 0, lastEventId });
    rec.last().fail();
    await tick(5);
    rec.last().open();
    eq(rec.resyncs, [], `no resync (start ${lastEventId})`);
    rec.sub.close();
  }
});

test('subscribe: backoff grows while failing and resets once healthy', async () => {
  const rec = recorder({ random: () => 0.999999, backoff: { base: 8, cap: 40 }, healthyAfter: 30 });
  const delays = () => rec.states.filter((s) => s.reason === 'closed').map((s) => s.delay);
  for (let i = 0; i < 4; i++) {
    rec.last().fail();
    await tick(rec.states.at(-1).delay + 10);
  }
  eq(delays(), [7, 15, 31, 39], 'growing, capped delays');
  // Open, but fail before the connection counts as healthy: keeps growing.
  rec.last().open();
  rec.last().fail();
  eq(delays().at(-1), 39, 'no reset before healthyAfter');
  await tick(50);
  rec.last().open();
  await tick(60);
  rec.last().fail();
  eq(delays().at(-1), 7, 'reset after a healthy connection');
  rec.sub.close();
});

test('subscribe: close cancels a pending recreate', async () => {
  const rec = recorder({ random: () => 0.5, backoff: { base: 40, cap: 40 } });
  rec.last().fail();
  rec.sub.close();
  await tick(60);
  eq(rec.ES.all.length, 1, 'no new EventSource after close');
  eq(rec.sub.state, State.CLOSED, 'state');
  eq(rec.states.at(-1).s, 'closed', 'last state reported');
  rec.sub.close(); // a second close is harmless
  eq(rec.states.filter((s) => s.s === 'closed').length, 1, 'closed reported once');
});

test('subscribe: close closes the live source', () => {
  const rec = recorder();
  rec.last().open();
  rec.sub.close();
  ok(rec.last().closed, 'source closed');
  rec.last().send(ev(1));
  eq(rec.events.length, 0, 'nothing delivered after close');
});

test('subscribe: the online event skips the backoff wait', async () => {
  const rec = recorder({ random: () => 0.999999, backoff: { base: 60000, cap: 60000 } });
  rec.last().fail();
  eq(rec.ES.all.length, 1, 'waiting');
  window.dispatchEvent(new Event('online'));
  eq(rec.ES.all.length, 2, 'recreated at once');
  rec.sub.close();
  window.dispatchEvent(new Event('online'));
  eq(rec.ES.all.length, 2, 'no effect after close');
});

test('subscribe: listens for the listed types and resync', () => {
  const rec = recorder({ types: ['chat', 'message', 'resync'] });
  const es = rec.last();
  eq([...es.listeners.keys()].sort(), ['chat', 'error', 'message', 'open', 'resync'], 'listeners');
  eq(es.listeners.get('resync').length, 1, 'resync handled once, never as an app type');
  es.open();
  es.send({ ...ev(1), type: 'chat' }, 'chat');
  eq(rec.events.map((e) => e.type), ['chat'], 'custom type delivered');
  rec.sub.close();
});

test('subscribe: malformed data goes to onError', () => {
  const rec = recorder();
  const es = rec.last();
  es.open();
  es.send('not json');
  es.send({ room: 'r', epoch: 'e1' });
  es.send({ room: 'r', epoch: 'e1', seq: -1 });
  es.send('not json either', 'resync');
  eq(rec.errors.length, 4, 'errors');
  eq(rec.events.length, 0, 'nothing delivered');
  es.send(ev(1));
  eq(rec.events.length, 1, 'still working');
  rec.sub.close();
});

test('subscribe: a throwing callback does not break the subscription', () => {
  const reported = [];
  const original = globalThis.reportError;
  globalThis.reportError = (err) => reported.push(err.message);
  try {
    const seen = [];
    const ES = fakeEventSource();
    const sub = subscribe('r', {
      EventSource: ES,
      baseUrl: 'http://gw.test/',
      onEvent: (e) => {
        seen.push(e.seq);
        if (e.seq === 1) throw new Error('app bug');
      },
    });
    const es = ES.all[0];
    es.open();
    es.send(ev(1));
    es.send(ev(2));
    eq(seen, [1, 2], 'second event still delivered');
    eq(reported, ['app bug'], 'the exception was reported');
    sub.close();
  } finally {
    globalThis.reportError = original;
  }
});

test('subscribe: withCredentials is passed to EventSource', () => {
  const rec = recorder({ withCredentials: true });
  eq(rec.last().init, { withCredentials: true }, 'init');
  rec.sub.close();
});

// --- Runner -------------------------------------------------------------------

const list = document.getElementById('results');
const results = { passed: [], failed: [] };
for (const t of tests) {
  const li = document.createElement('li');
  try {
    await t.fn();
    results.passed.push(t.name);
    li.textContent = `ok   ${t.name}`;
  } catch (err) {
    results.failed.push({ name: t.name, error: String(err?.stack ?? err) });
    li.textContent = `FAIL ${t.name}: ${err?.message ?? err}`;
  }
  list.append(li);
}
document.getElementById('summary').textContent =
  `${results.passed.length} passed, ${results.failed.length} failed`;
window.unitResults = results;

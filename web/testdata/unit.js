// Unit tests for roomcast.js: backoff, id parsing, the dedupe/gap cursor and
// the Subscription state machine (with a stand-in EventSource). They run in
// the browser that the Go tests drive; the results land in window.unitResults as
// {passed: [names], failed: [{name, error}]}.

import {
  backoffDelay, parseEventId, formatEventId, Cursor, subscribe, State, ROOM_PATTERN,
  roomSetHash, formatToken, parseToken,
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

    // The stream's anchor, as the gateway sends it right after retry: to a
    // stream opened without a resume point: where the stream starts.
    anchor(room, epoch, seq) {
      const id = epoch ? `${epoch}:${seq}` : String(seq);
      this.fire('anchor', { data: JSON.stringify({ room, epoch, seq }), lastEventId: id });
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
  first.open(); // no anchor (an older gateway's bare id) and no event told the module where
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

test('anchor: a source recreated before any event resumes from the anchor and reports nothing', async () => {
  const rec = recorder({ random: () => 0 });
  const first = rec.last();
  first.open();
  first.anchor('r', 'e1', 4);
  eq(rec.sub.lastEventId, 'e1:4', 'lastEventId from the anchor');
  first.fail();
  await tick(5);
  const second = rec.last();
  eq(second.url, 'http://gw.test/rooms/r/events?lastEventId=e1%3A4', 'resumes from the anchor');
  second.open();
  second.send(ev(5));
  second.send(ev(6));
  eq(rec.resyncs, [], 'nothing unanchored');
  eq(rec.gaps, [], 'no gap');
  eq(rec.events.map((e) => e.seq), [5, 6], 'events');
  rec.sub.close();
});

test('anchor: never an application event, even listed in types; it checks the first event for a gap', () => {
  const rec = recorder({ types: ['anchor', 'note'] });
  const es = rec.last();
  eq((es.listeners.get('anchor') ?? []).length, 1, 'one anchor listener: the module\'s own');
  es.open();
  es.anchor('r', '', 0); // a room without history
  eq(rec.sub.lastEventId, '0', 'lastEventId');
  eq(rec.events, [], 'no event');
  es.send(ev(2, 'e1'));
  eq(rec.gaps, [{ room: 'r', epoch: 'e1', from: 1, to: 1 }], 'seq 1 is missing after the anchor 0');
  es.anchor('r', 'e1', 9); // a known room keeps its position
  eq(rec.sub.lastEventId, 'e1:2', 'position after an anchor of a known room');
  es.send(ev(3, 'e1'));
  eq(rec.events.map((e) => e.seq), [2, 3], 'events');
  eq(rec.errors, [], 'no error');
  rec.sub.close();
});

test('anchor: malformed data is reported and seeds nothing', () => {
  const rec = recorder();
  const es = rec.last();
  es.open();
  es.fire('anchor', { data: '{"room":"r","seq":"x"}', lastEventId: 'e1:4' });
  eq(rec.errors.length, 1, 'one error');
  ok(rec.errors[0].startsWith('roomcast: malformed anchor data'), rec.errors[0]);
  eq(rec.sub.lastEventId, '', 'no position');
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

test('subscribe: listens for the listed types, resync and anchor', () => {
  const rec = recorder({ types: ['chat', 'message', 'resync'] });
  const es = rec.last();
  eq([...es.listeners.keys()].sort(), ['anchor', 'chat', 'error', 'expired', 'message', 'open', 'resync'], 'listeners');
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

// --- Credentials: tickets and reauth ---------------------------------------------

// until resolves once cond() holds, polling once per macrotask; it fails
// after `ms` so a broken module fails the test instead of hanging the runner.
async function until(cond, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await tick(1);
  }
}

// ticketSource returns a getTicket that resolves to t1, t2, … and counts
// its calls; fail(n) makes the nth call reject.
function ticketSource({ fail = () => false } = {}) {
  const fn = () => {
    fn.calls++;
    if (fail(fn.calls)) return Promise.reject(new Error(`backend down ${fn.calls}`));
    return Promise.resolve(`t${fn.calls}`);
  };
  fn.calls = 0;
  return fn;
}

// deferred returns a promise and the functions that settle it.
function deferred() {
  const d = {};
  d.promise = new Promise((resolve, reject) => Object.assign(d, { resolve, reject }));
  return d;
}

const param = (es, name) => new URL(es.url).searchParams.get(name);

// A macrotask runs only after every pending microtask (promise reaction) has:
// the marker after which a settled getTicket has had every chance to act.
const settled = () => tick(0);

test('tickets: getTicket is called before every connect, and each URL has a fresh ticket', async () => {
  const getTicket = ticketSource();
  const rec = recorder({ getTicket, random: () => 0 });
  await until(() => rec.ES.all.length === 1, 'the first source');
  const first = rec.last();
  eq(first.url, 'http://gw.test/rooms/r/events?ticket=t1', 'first URL');
  first.open();
  first.send(ev(1));
  first.send(ev(2));
  first.fail(); // refused (401, 403) or the network: the browser gave up
  await until(() => rec.ES.all.length === 2, 'a second source');
  const second = rec.last();
  eq([param(second, 'ticket'), param(second, 'lastEventId')], ['t2', 'e1:2'], 'second source: new ticket, the cursor');
  second.open();
  second.send(ev(3));
  second.drop(); // the stream ended: the browser would resend the used ticket
  ok(second.closed, 'the module closes an ended source itself');
  await until(() => rec.ES.all.length === 3, 'a third source');
  eq([param(rec.last(), 'ticket'), param(rec.last(), 'lastEventId')], ['t3', 'e1:3'], 'third source');
  eq(getTicket.calls, 3, 'one ticket per connect');
  ok(!rec.sub.url.includes('ticket'), `the url getter leaves the ticket out: ${rec.sub.url}`);
  eq(rec.sub.url, 'http://gw.test/rooms/r/events?lastEventId=e1%3A3', 'url getter');
  ok(rec.states.every((s) => !s.url?.includes('ticket')), 'no ticket in a state detail');
  eq(rec.events.map((e) => e.seq), [1, 2, 3], 'events');
  rec.sub.close();
});

test('tickets: a ticket in the target URL is replaced, and a sync getTicket works', () => {
  let n = 0;
  const rec = recorder({ getTicket: () => `s${++n}` }, 'http://gw.test/rooms/r/events?ticket=stale&x=1');
  eq(rec.ES.all.length, 1, 'a sync ticket opens at once');
  eq(rec.last().url, 'http://gw.test/rooms/r/events?x=1&ticket=s1', 'URL');
  rec.sub.close();
});

test('tickets: reauth closes the source, and a new ticket resumes from the cursor', async () => {
  const getTicket = ticketSource();
  const reauths = [];
  const rec = recorder({ getTicket, random: () => 0, onReauth: (r) => reauths.push(r), types: ['chat'] });
  await until(() => rec.ES.all.length === 1, 'the first source');
  const first = rec.last();
  first.open();
  for (let seq = 1; seq <= 3; seq++) first.send(ev(seq));
  first.send({ room: 'r', exp: 1795960692 }, 'reauth');
  ok(first.closed, 'the source is closed on reauth');
  eq(reauths, [{ room: 'r', exp: 1795960692 }], 'onReauth');
  eq(rec.sub.stats.reauths, 1, 'reauths');
  eq(rec.states.at(-1), { s: 'reconnecting', reason: 'reauth', attempt: 1, delay: 0 }, 'state');
  first.send(ev(4)); // nothing more is read from the old source
  await until(() => rec.ES.all.length === 2, 'a second source');
  const second = rec.last();
  eq([param(second, 'ticket'), param(second, 'lastEventId')], ['t2', 'e1:3'], 'resumes from the cursor with a new ticket');
  second.open();
  second.send(ev(3)); // a replay that overlaps
  second.send(ev(4));
  second.send(ev(5));
  eq(rec.events.map((e) => e.seq), [1, 2, 3, 4, 5], 'each event once, none lost');
  eq(rec.events.filter((e) => e.type !== 'message'), [], 'no reauth among the events');
  eq([rec.sub.stats.duplicates, rec.sub.stats.gaps, rec.resyncs.length, rec.errors.length], [1, 0, 0, 0], 'duplicates, gaps, resyncs, errors');
  rec.sub.close();
});

test('subscribe: an expired marker goes to onExpired and moves the position on', () => {
  const expired = [];
  const rec = recorder({ types: ['expired'], onExpired: (x) => expired.push(x) });
  const es = rec.last();
  eq(es.listeners.get('expired').length, 1, 'expired handled once, never as an app type');
  es.open();
  es.send(ev(1));
  es.send({ room: 'r', epoch: 'e1', seq: 2 }, 'expired');
  es.send({ room: 'r', epoch: 'e1', seq: 2 }, 'expired');
  es.send(ev(3));
  eq(rec.events.map((e) => e.seq), [1, 3], 'the events around it');
  eq(expired, [{ room: 'r', epoch: 'e1', seq: 2, id: 'e1:2' }], 'the marker, once');
  eq([rec.sub.stats.expired, rec.sub.stats.duplicates, rec.gaps.length, rec.sub.lastEventId], [1, 1, 0, 'e1:3'], 'expired, duplicates, gaps, position');
  rec.sub.close();
});

test('tickets: reauth is never an application event, even when listed in types', () => {
  const reauths = [];
  const rec = recorder({ types: ['chat', 'reauth'], onReauth: (r) => reauths.push(r) });
  const es = rec.last();
  eq([...es.listeners.keys()].sort(), ['anchor', 'chat', 'error', 'expired', 'message', 'open', 'reauth', 'resync'], 'listeners');
  eq(es.listeners.get('reauth').length, 1, 'reauth handled once, never as an app type');
  es.open();
  es.send(ev(1));
  es.send({ room: 'r', exp: 1795960692 }, 'reauth');
  es.send({ ...ev(2), type: 'chat' }, 'chat'); // the marker after the reauth
  eq(rec.events.map((e) => e.seq), [1, 2], 'events');
  eq(reauths, [{ room: 'r', exp: 1795960692 }], 'onReauth');
  eq(rec.sub.stats.reauths, 1, 'reauths');
  eq(rec.errors, [], 'errors');
  rec.sub.close();

  // With neither getTicket nor onReauth nothing acts on it: not even listened for.
  const plain = recorder({ types: ['chat', 'reauth'] });
  eq([...plain.last().listeners.keys()].sort(), ['anchor', 'chat', 'error', 'expired', 'message', 'open', 'resync'], 'listeners without onReauth');
  plain.last().open();
  plain.last().send({ room: 'r', exp: 1795960692 }, 'reauth');
  plain.last().send(ev(1));
  eq([plain.events.map((e) => e.seq), plain.errors, plain.sub.stats.reauths], [[1], [], 0], 'events, errors, reauths');
  plain.sub.close();
});

test('tickets: without getTicket a reauth leaves the source to the browser', () => {
  const reauths = [];
  const rec = recorder({ withCredentials: true, onReauth: (r) => reauths.push(r) });
  const es = rec.last();
  es.open();
  es.send(ev(1));
  es.send({ room: 'r', exp: 1795960692 }, 'reauth');
  ok(!es.closed, 'the source stays open: a cookie is resent on the browser\'s reconnect');
  es.drop();
  eq(rec.states.at(-1).reason, 'ended', 'the browser reconnects by itself');
  es.open();
  es.send(ev(2));
  eq(rec.ES.all.length, 1, 'no new EventSource');
  eq(rec.last().url, 'http://gw.test/rooms/r/events', 'no ticket parameter');
  eq(rec.events.map((e) => e.seq), [1, 2], 'events');
  eq(rec.sub.stats.reauths, 1, 'reauths');
  eq(reauths, [{ room: 'r', exp: 1795960692 }], 'onReauth');
  rec.sub.close();
});

test('tickets: malformed reauth data goes to onError, and the source is still replaced', async () => {
  const getTicket = ticketSource();
  const reauths = [];
  const rec = recorder({ getTicket, random: () => 0, onReauth: (r) => reauths.push(r) });
  await until(() => rec.ES.all.length === 1, 'the first source');
  const first = rec.last();
  first.open();
  first.send(ev(1));
  first.send('{"room":"r","exp":"soon"}', 'reauth');
  eq(rec.errors.length, 1, 'one error');
  ok(rec.errors[0].includes('malformed reauth'), `error: ${rec.errors[0]}`);
  eq(reauths, [], 'onReauth not called');
  ok(first.closed, 'closed all the same');
  await until(() => rec.ES.all.length === 2, 'a second source');
  eq(param(rec.last(), 'ticket'), 't2', 'new ticket');
  rec.sub.close();
});

test('tickets: a getTicket that rejects goes to onError and waits for its backoff', async () => {
  const getTicket = ticketSource({ fail: (n) => n === 1 });
  const rec = recorder({ getTicket, random: () => 0.999999, backoff: { base: 60000, cap: 60000 } });
  await until(() => rec.errors.length === 1, 'the error');
  ok(rec.errors[0].startsWith('roomcast: get ticket: backend down 1'), `error: ${rec.errors[0]}`);
  eq(rec.states.at(-1), { s: 'reconnecting', reason: 'ticket', attempt: 1, delay: 59999 }, 'state');
  eq(rec.ES.all.length, 0, 'no source without a ticket');
  // The online event ends the wait: the next call is the second, not the hundredth.
  window.dispatchEvent(new Event('online'));
  await until(() => rec.ES.all.length === 1, 'a source');
  eq(getTicket.calls, 2, 'getTicket calls');
  eq(rec.errors.length, 1, 'errors');
  eq(param(rec.last(), 'ticket'), 't2', 'ticket');
  rec.sub.close();
});

test('tickets: getTicket failures back off like a refused source, then connect', async () => {
  let n = 0;
  const getTicket = () => {
    n++;
    if (n === 1) throw new Error('sync throw');
    if (n === 2) return Promise.resolve('');
    if (n === 3) return Promise.reject('a string');
    return `t${n}`;
  };
  const rec = recorder({ getTicket, random: () => 0.999999, backoff: { base: 8, cap: 40 } });
  await until(() => rec.ES.all.length === 1, 'a source after three failures', 10000);
  eq(rec.errors.length, 3, 'errors');
  ok(rec.errors[0].includes('sync throw'), `error 1: ${rec.errors[0]}`);
  ok(rec.errors[1].includes('no ticket'), `error 2: ${rec.errors[1]}`);
  ok(rec.errors[2].includes('a string'), `error 3: ${rec.errors[2]}`);
  eq(rec.states.filter((s) => s.reason === 'ticket').map((s) => [s.attempt, s.delay]), [[1, 7], [2, 15], [3, 31]], 'growing delays');
  eq(param(rec.last(), 'ticket'), 't4', 'ticket');
  rec.sub.close();
});

test('tickets: a getTicket that never settles times out, and a late ticket is dropped', async () => {
  const first = deferred();
  let calls = 0;
  const getTicket = () => (++calls === 1 ? first.promise : `t${calls}`);
  const rec = recorder({ getTicket, random: () => 0, ticketTimeout: 20 });
  await until(() => rec.ES.all.length === 1, 'a source after the timeout');
  eq(rec.errors.length, 1, 'errors');
  ok(rec.errors[0].includes('did not settle within 20 ms'), `error: ${rec.errors[0]}`);
  eq(param(rec.last(), 'ticket'), 't2', 'second ticket');
  first.resolve('t1');
  await settled();
  eq(rec.ES.all.length, 1, 'the late ticket opened nothing');
  rec.sub.close();
});

test('tickets: close while getTicket is pending opens nothing, and online does not start a second call', async () => {
  const pending = deferred();
  let calls = 0;
  const rec = recorder({ getTicket: () => { calls++; return pending.promise; } });
  eq(rec.states.map((s) => s.s), ['connecting'], 'connecting while the ticket is fetched');
  window.dispatchEvent(new Event('online'));
  eq(calls, 1, 'online does not start a second call');
  rec.sub.close();
  pending.resolve('t1');
  await settled();
  eq(rec.ES.all.length, 0, 'no source after close');
  eq(rec.sub.state, State.CLOSED, 'state');
  eq(rec.errors, [], 'errors');

  const failing = deferred();
  const rec2 = recorder({ getTicket: () => failing.promise });
  rec2.sub.close();
  failing.reject(new Error('too late'));
  await settled();
  eq([rec2.errors, rec2.ES.all.length, rec2.states.at(-1).s], [[], 0, 'closed'], 'a late rejection is dropped');
});

test('tickets: close from onError during a failed getTicket schedules nothing', async () => {
  let calls = 0;
  const ES = fakeEventSource();
  const states = [];
  const sub = subscribe('r', {
    EventSource: ES,
    baseUrl: 'http://gw.test/',
    random: () => 0,
    getTicket: () => { calls++; return Promise.reject(new Error('no')); },
    onError: () => sub.close(),
    onState: (s) => states.push(s),
  });
  await until(() => states.includes('closed'), 'closed');
  await settled();
  window.dispatchEvent(new Event('online'));
  eq([calls, ES.all.length, states], [1, 0, ['connecting', 'closed']], 'calls, sources, states');
});

test('tickets: close from onState or from getTicket itself opens nothing', async () => {
  // The second connect (after the first source fails) closes the subscription
  // from inside onState('connecting') or from inside getTicket.
  for (const where of ['onState', 'getTicket sync', 'getTicket async']) {
    let calls = 0;
    const ES = fakeEventSource();
    const states = [];
    const errors = [];
    const holder = {};
    holder.sub = subscribe('r', {
      EventSource: ES,
      baseUrl: 'http://gw.test/',
      random: () => 0,
      getTicket: () => {
        calls++;
        if (calls === 1) return 't1';
        if (where === 'getTicket sync') {
          holder.sub.close();
          return 't2';
        }
        return Promise.resolve().then(() => {
          holder.sub.close();
          return 't2';
        });
      },
      onState: (s) => {
        states.push(s);
        if (where === 'onState' && s === 'connecting' && states.length > 1) holder.sub.close();
      },
      onError: (e) => errors.push(e.message),
    });
    ES.all[0].fail();
    await until(() => holder.sub.state === State.CLOSED, `${where}: closed`);
    await settled();
    eq([ES.all.length, states, errors], [1, ['connecting', 'reconnecting', 'connecting', 'closed'], []], `${where}: sources, states, errors`);
    eq(calls, where === 'onState' ? 1 : 2, `${where}: getTicket calls`);
  }
});

test('tickets: withCredentials is passed to every EventSource', async () => {
  const rec = recorder({ getTicket: ticketSource(), withCredentials: true, random: () => 0 });
  await until(() => rec.ES.all.length === 1, 'the first source');
  rec.last().fail();
  await until(() => rec.ES.all.length === 2, 'a second source');
  eq(rec.ES.all.map((es) => [es.init, param(es, 'ticket')]), [[{ withCredentials: true }, 't1'], [{ withCredentials: true }, 't2']], 'init and ticket');
  rec.sub.close();
});

test('tickets: a source recreated before any event resumes from its anchor', async () => {
  const rec = recorder({ getTicket: ticketSource(), random: () => 0 });
  await until(() => rec.ES.all.length === 1, 'the first source');
  rec.last().open();
  rec.last().anchor('r', 'e1', 7);
  rec.last().send({ room: 'r', exp: 1795960692 }, 'reauth');
  await until(() => rec.ES.all.length === 2, 'a second source');
  eq(param(rec.last(), 'lastEventId'), 'e1:7', 'the anchor');
  ok(param(rec.last(), 'ticket'), 'with a new ticket');
  rec.last().open();
  eq(rec.resyncs, [], 'nothing unanchored');
  rec.sub.close();
});

test('tickets: a source recreated before any event or anchor still reports an unanchored resync', async () => {
  const rec = recorder({ getTicket: ticketSource(), random: () => 0 });
  await until(() => rec.ES.all.length === 1, 'the first source');
  rec.last().open();
  rec.last().send({ room: 'r', exp: 1795960692 }, 'reauth');
  await until(() => rec.ES.all.length === 2, 'a second source');
  eq(param(rec.last(), 'lastEventId'), null, 'no position');
  rec.last().open();
  eq(rec.resyncs, [{ room: 'r', epoch: '', seq: 0, previous: null, unanchored: true }], 'unanchored resync');
  rec.sub.close();
});

// --- Multiplexed streams ----------------------------------------------------------

const posOf = (obj) => (room) => obj[room] ?? null;

test('tokens: the grammar the gateway pins (TestTokenExact)', () => {
  eq(roomSetHash(['lobby', 'news']).toString(36), 'fjod8o', 'FNV-1a of "lobby\\nnews"');
  eq(formatToken(['lobby', 'news'], posOf({ lobby: { epoch: 'k3x9q0aa', seq: 48 } })), 'm1.fjod8o.k3x9q0aa:1c.', 'token');
});

test('tokens: round trip, and another room set or a malformed token is refused', () => {
  const rooms = ['a', 'b', 'c'];
  const t = formatToken(rooms, posOf({ a: { epoch: 'e1', seq: 35 }, c: { epoch: '', seq: 36 } }));
  eq([...parseToken(t, rooms)], [['a', { epoch: 'e1', seq: 35 }], ['b', null], ['c', { epoch: '', seq: 36 }]], 'parsed');
  eq(parseToken(t, ['a', 'b', 'd']), null, 'another room set');
  for (const bad of ['', 'e1:3', t + '.', t.replace('m1', 'm2'), t.replace('e1:z', 'e!:z'), t.replace('e1:z', 'e1:Z')]) {
    eq(parseToken(bad, rooms), null, `malformed ${JSON.stringify(bad)}`);
  }
});

// muxRecorder subscribes to several rooms with a fake EventSource.
function muxRecorder(rooms, options = {}) {
  const rec = recorder(options, rooms);
  // sendMux fires a frame of the multiplexed stream: its id is the token of
  // the positions the gateway has sent, given as {room: pos}.
  rec.sendMux = (es, data, positions, type = 'message') => {
    es.fire(type, { data: JSON.stringify(data), lastEventId: formatToken(rec.sub.rooms, posOf(positions)) });
  };
  return rec;
}

test('multi: one source for the rooms, sorted and distinct, and bad rooms throw', () => {
  const rec = muxRecorder(['b', 'a', 'b']);
  eq(rec.ES.all.length, 1, 'one source');
  eq(rec.last().url, 'http://gw.test/events?room=a&room=b', 'url');
  eq(rec.sub.rooms, ['a', 'b'], 'rooms');
  rec.sub.close();
  for (const bad of [[], ['a', 'b/c']]) {
    let threw = false;
    try {
      subscribe(bad, { EventSource: fakeEventSource(), baseUrl: 'http://gw.test/' });
    } catch (e) {
      threw = e instanceof TypeError;
    }
    ok(threw, `rooms ${JSON.stringify(bad)} throw a TypeError`);
  }
});

test('multi: dedupe and gaps per room, and a resync reported with its room', () => {
  const rec = muxRecorder(['a', 'b']);
  const es = rec.last();
  es.open();
  const at = { a: { epoch: 'e1', seq: 0 }, b: { epoch: 'e2', seq: 4 } };
  const send = (room, seq, epoch) => {
    at[room] = { epoch, seq };
    rec.sendMux(es, ev(seq, epoch, room), at);
  };
  send('a', 1, 'e1');
  send('b', 5, 'e2');
  send('a', 1, 'e1'); // a duplicate of room a only
  send('b', 7, 'e2'); // a gap in room b
  send('a', 2, 'e1');
  at.a = { epoch: 'e9', seq: 40 };
  rec.sendMux(es, { room: 'a', epoch: 'e9', seq: 40 }, at, 'resync');
  send('a', 41, 'e9');
  eq(rec.events.map((e) => `${e.room}${e.seq}`), ['a1', 'b5', 'b7', 'a2', 'a41'], 'events');
  eq(rec.gaps, [{ room: 'b', epoch: 'e2', from: 6, to: 6 }], 'the gap names its room');
  eq(rec.resyncs, [{ room: 'a', epoch: 'e9', seq: 40, previous: 'e1:2' }], 'the resync names its room');
  eq(rec.sub.stats.duplicates, 1, 'duplicates');
  rec.sub.close();
});

test('multi: a CLOSED source is recreated with the token of every room, a quiet room from its anchor', async () => {
  const rec = muxRecorder(['a', 'b'], { random: () => 0 });
  const first = rec.last();
  first.open();
  // b has had no event: its place comes from the frames' tokens (its anchor).
  rec.sendMux(first, ev(3, 'e1', 'a'), { a: { epoch: 'e1', seq: 3 }, b: { epoch: 'e2', seq: 7 } });
  first.fail();
  await tick(5);
  const second = rec.last();
  const want = formatToken(['a', 'b'], posOf({ a: { epoch: 'e1', seq: 3 }, b: { epoch: 'e2', seq: 7 } }));
  eq(new URL(second.url).searchParams.get('lastEventId'), want, 'resume token');
  eq(rec.sub.lastEventId, want, 'lastEventId');
  second.open();
  eq(rec.resyncs, [], 'every room had a position: nothing unanchored');
  rec.sendMux(second, ev(8, 'e2', 'b'), { a: { epoch: 'e1', seq: 3 }, b: { epoch: 'e2', seq: 8 } });
  eq(rec.events.map((e) => `${e.room}${e.seq}`), ['a3', 'b8'], 'events');
  eq(rec.gaps, [], 'no gap');
  rec.sub.close();
});

test('multi: the anchor seeds every room; a source recreated before any event resumes them all', async () => {
  const rec = muxRecorder(['a', 'b'], { random: () => 0, types: ['anchor'] });
  const first = rec.last();
  first.open();
  const at = { a: { epoch: 'e1', seq: 3 }, b: { epoch: '', seq: 0 } };
  rec.sendMux(first, { rooms: { a: 'e1:3', b: '0' } }, at, 'anchor');
  eq(rec.events, [], 'the anchor is no event');
  first.fail();
  await tick(5);
  const second = rec.last();
  eq(new URL(second.url).searchParams.get('lastEventId'), formatToken(['a', 'b'], posOf(at)), 'resume token');
  second.open();
  eq(rec.resyncs, [], 'nothing unanchored');
  rec.sendMux(second, ev(1, 'e2', 'b'), { ...at, b: { epoch: 'e2', seq: 1 } });
  eq(rec.events.map((e) => `${e.room}${e.seq}`), ['b1'], 'events');
  eq(rec.gaps, [], 'no gap');
  rec.sub.close();
});

test('multi: a start token seeds every room; a source recreated before any event reports each unknown room', async () => {
  const start = formatToken(['a', 'b', 'c'], posOf({ a: { epoch: 'e1', seq: 2 } }));
  const rec = muxRecorder(['c', 'b', 'a'], { random: () => 0, lastEventId: start });
  eq(new URL(rec.last().url).searchParams.get('lastEventId'), start, 'the start token');
  rec.last().open();
  rec.last().fail();
  await tick(5);
  rec.last().open();
  eq(rec.resyncs.map((r) => `${r.room}:${r.unanchored}`), ['b:true', 'c:true'], 'unanchored rooms');
  rec.sub.close();
  let threw = false;
  try {
    muxRecorder(['a', 'x'], { lastEventId: start });
  } catch (e) {
    threw = e instanceof TypeError;
  }
  ok(threw, 'a token of other rooms throws');
});

test('multi: reauth names every room and a ticketed source resumes from the token', async () => {
  const getTicket = ticketSource();
  const reauths = [];
  const rec = muxRecorder(['a', 'b'], { getTicket, random: () => 0, onReauth: (r) => reauths.push(r) });
  await until(() => rec.ES.all.length === 1, 'the first source');
  const first = rec.last();
  first.open();
  const at = { a: { epoch: 'e1', seq: 1 }, b: { epoch: 'e2', seq: 0 } };
  rec.sendMux(first, ev(1, 'e1', 'a'), at);
  first.fire('reauth', { data: JSON.stringify({ room: 'a', rooms: ['a', 'b'], exp: 1795960692 }) });
  eq(reauths, [{ room: 'a', rooms: ['a', 'b'], exp: 1795960692 }], 'onReauth');
  await until(() => rec.ES.all.length === 2, 'a second source');
  eq(param(rec.last(), 'lastEventId'), formatToken(['a', 'b'], posOf(at)), 'resumes every room');
  ok(param(rec.last(), 'ticket'), 'with a new ticket');
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

// roomcast.js: the browser client for roomcast rooms.
//
// A native EventSource already reconnects after `retry:` and resends its last
// id in the Last-Event-ID header. What it does not do is survive a non-200
// answer, a wrong content type or a network failure during connect (it goes
// to CLOSED for good), hand its position to a new EventSource, or notice a
// gap. subscribe() adds exactly that:
//
//   - a source that reaches CLOSED is recreated after a capped full-jitter
//     backoff (reset once a connection has stayed healthy), with the last
//     seen id in the `lastEventId` query parameter; before any event, the
//     stream's anchor (`event: anchor`, where the gateway started it) is that
//     id;
//   - duplicates are dropped by seq, per room; a gap (seq != last+1 within
//     one epoch) is reported;
//   - `event: resync` (the resume point was lost, trimmed or ahead) is passed
//     to the application, which refetches its snapshot;
//   - `event: expired` (an event whose time to live passed before it was
//     delivered: its id and position, no body) moves the position on like an
//     event and is passed to onExpired, never to onEvent;
//   - with `getTicket`, every connect carries a fresh single-use ticket in the
//     `ticket` query parameter, and the module replaces the source itself
//     whenever it ends (a native reconnect would resend a used ticket);
//     `event: reauth` (the credential expired or was revoked) is counted,
//     reported to onReauth and answered with a new ticket;
//   - the connection state is exposed, and close() stops everything.
//
// subscribe(['a', 'b'], …) follows several rooms on one stream
// (GET /events?room=a&room=b): the same guarantees per room, and a source it
// recreates resumes every room from a token built from its per-room cursors
// (formatToken), so a page needs one of the browser's six connections.
//
// No dependencies and no build step; import it from the gateway:
//
//   import { subscribe } from '/roomcast.js';
//   const sub = subscribe('lobby', {
//     onEvent: (ev) => render(ev.seq, ev.body),
//     onResync: () => reloadSnapshot(),
//     onState: (state) => showBadge(state),
//   });
//   // later
//   sub.close();

/** Valid room names, as the gateway checks them. */
export const ROOM_PATTERN = /^[A-Za-z0-9._~-]{1,128}$/;

/** The states a Subscription goes through. */
export const State = Object.freeze({
  CONNECTING: 'connecting', // a source is being opened
  OPEN: 'open', // the stream is live
  RECONNECTING: 'reconnecting', // waiting: the browser's retry or our backoff
  CLOSED: 'closed', // close() was called; nothing happens any more
});

/** Defaults of the subscribe() options, in milliseconds. */
export const DEFAULTS = Object.freeze({
  backoffBase: 1000, // first backoff ceiling
  backoffCap: 30000, // the ceiling never grows beyond this
  healthyAfter: 5000, // an open connection this old resets the backoff
  ticketTimeout: 10000, // a getTicket that has not settled by then has failed
});

// EventSource.readyState values; spelled out so a stand-in EventSource
// without the static constants works too.
const ES_CLOSED = 2;

// Event types the gateway itself sends; they cannot be application types.
const RESYNC = 'resync';
const REAUTH = 'reauth';
const ANCHOR = 'anchor';
const EXPIRED = 'expired';

/**
 * Full-jitter backoff: a delay drawn uniformly from [0, ceiling), where the
 * ceiling doubles with every attempt, from `base`, up to `cap`.
 *
 * @param {number} attempt 0 for the first retry after a healthy connection
 * @param {{base?: number, cap?: number}} [limits] in milliseconds
 * @param {() => number} [random] returns a number in [0, 1)
 * @returns {number} whole milliseconds
 */
export function backoffDelay(attempt, limits = {}, random = Math.random) {
  const base = limits.base ?? DEFAULTS.backoffBase;
  const cap = limits.cap ?? DEFAULTS.backoffCap;
  // Clamp the exponent so a long outage cannot overflow to Infinity.
  const ceiling = Math.min(cap, base * 2 ** Math.min(Math.max(attempt, 0), 30));
  return Math.floor(random() * ceiling);
}

/**
 * Parses an event id: "<epoch>:<seq>", or a bare "<seq>" meaning the
 * current epoch (epoch ''). Returns null when the id is not one of those.
 *
 * @param {string | null | undefined} id
 * @returns {{epoch: string, seq: number} | null}
 */
export function parseEventId(id) {
  if (typeof id !== 'string' || id === '') return null;
  const colon = id.lastIndexOf(':');
  const epoch = colon < 0 ? '' : id.slice(0, colon);
  const digits = id.slice(colon + 1);
  if (!/^\d{1,15}$/.test(digits) || (colon >= 0 && epoch === '')) return null;
  return { epoch, seq: Number(digits) };
}

/**
 * Formats a position as an event id, the inverse of parseEventId.
 *
 * @param {{epoch: string, seq: number}} pos
 */
export function formatEventId(pos) {
  return pos.epoch ? `${pos.epoch}:${pos.seq}` : String(pos.seq);
}

/**
 * Cursor remembers the newest position seen in each room and classifies
 * incoming events against it. It is the dedupe and gap logic of
 * Subscription, kept separate so it can be tested (and reused) on its own.
 */
export class Cursor {
  /** @type {Map<string, {epoch: string, seq: number}>} */
  #rooms = new Map();
  /** Position for a room not seen yet: the caller's initial lastEventId. */
  #start = null;
  /** Id of the most recent move in any room, '' before the first. */
  #last = '';

  /** @param {string} [lastEventId] where to start; see parseEventId */
  constructor(lastEventId) {
    this.#start = parseEventId(lastEventId);
    if (this.#start) this.#last = formatEventId(this.#start);
  }

  /** The position of `room`, or null when nothing is known about it. */
  position(room) {
    const pos = this.#rooms.get(room) ?? this.#start;
    return pos ? { ...pos } : null;
  }

  /** The id to resume from: the most recently seen event or resync. */
  get lastEventId() {
    return this.#last;
  }

  /**
   * Sets the position of a room the cursor knows nothing about (from a
   * multiplexed stream's token, or a stream's anchor: where the gateway
   * started it); a known room is left where it is. Before any event or
   * resync, the seeded position is lastEventId.
   *
   * @param {string} room
   * @param {{epoch: string, seq: number}} pos
   */
  seed(room, pos) {
    if (this.position(room)) return;
    this.#rooms.set(room, { epoch: pos.epoch, seq: pos.seq });
    if (this.#last === '') this.#last = formatEventId(pos);
  }

  /**
   * Classifies an event and, unless it is a duplicate, moves the room's
   * position to it.
   *
   * - duplicate: same epoch (or unknown epoch) and seq <= the position;
   * - gap: same epoch and seq > position + 1; `gap` names the missing range;
   * - epochChanged: the event belongs to another history than the
   *   position, and no resync announced it.
   *
   * @param {{room: string, epoch: string, seq: number}} ev
   */
  accept(ev) {
    const pos = this.position(ev.room);
    const verdict = { duplicate: false, gap: null, epochChanged: false, previous: pos };
    if (pos) {
      if (pos.epoch === '' || pos.epoch === ev.epoch) {
        if (ev.seq <= pos.seq) return { ...verdict, duplicate: true };
        if (ev.seq !== pos.seq + 1) {
          verdict.gap = { room: ev.room, epoch: ev.epoch, from: pos.seq + 1, to: ev.seq - 1 };
        }
      } else {
        verdict.epochChanged = true;
      }
    }
    this.#move(ev.room, { epoch: ev.epoch, seq: ev.seq });
    return verdict;
  }

  /**
   * Applies a resync: the room continues after {epoch, seq}. Returns false,
   * and stays where it is, when the resync is in the cursor's epoch at or
   * behind its position (a repeated resync, or one the stream has already
   * read past), true otherwise. A fork (`fork: true`: the history the cursor
   * saw was replaced) always moves it, back if need be.
   *
   * @param {{room: string, epoch: string, seq: number, fork?: boolean}} r
   */
  resync(r) {
    const pos = this.#rooms.get(r.room);
    if (pos && r.fork !== true && pos.epoch === r.epoch && r.seq <= pos.seq) return false;
    this.#move(r.room, { epoch: r.epoch, seq: r.seq });
    return true;
  }

  #move(room, pos) {
    this.#rooms.set(room, pos);
    this.#last = formatEventId(pos);
  }
}

/**
 * Subscription is one room's stream. Create it with subscribe().
 */
export class Subscription {
  #base; // URL of the stream, without our lastEventId parameter
  #rooms = null; // a multiplexed stream's rooms, sorted and distinct; null for one room
  #unknown = []; // rooms of the current source that started without a position
  #opts;
  #cursor;
  #EventSource;
  #source = null; // the current EventSource, null while waiting or closed
  /** @type {string} */
  #state = State.CONNECTING;
  #attempt = 0; // backoff attempts since the last healthy connection
  #retryTimer = 0;
  #healthyTimer = 0;
  #url = '';
  #started = false;
  #opened = false; // a source of this subscription has opened
  #unanchored = false; // the current source was recreated without a position after one had opened (no anchor arrived)
  #ticketed = false; // options.getTicket is set: every connect needs a fresh ticket
  #pending = null; // token of the getTicket call in flight, null when none is
  #ticketTimer = 0;
  #stats = { opens: 0, recreates: 0, events: 0, expired: 0, duplicates: 0, gaps: 0, resyncs: 0, reauths: 0 };

  /**
   * @param {string | URL} target a room name or the URL of a stream
   * @param {object} [options] see roomcast.d.ts
   */
  constructor(target, options = {}) {
    this.#opts = options;
    if (Array.isArray(target)) this.#rooms = roomSet(target);
    this.#base = this.#rooms ? multiURL(this.#rooms, options.baseUrl) : streamURL(target, options.baseUrl);
    const fromURL = this.#base.searchParams.get('lastEventId');
    this.#base.searchParams.delete('lastEventId');
    this.#ticketed = typeof options.getTicket === 'function';
    // A ticket is good for one connect: one in the target URL is never reused.
    if (this.#ticketed) this.#base.searchParams.delete('ticket');
    const start = options.lastEventId ?? fromURL ?? undefined;
    if (this.#rooms) {
      this.#cursor = new Cursor();
      if (start) {
        const positions = parseToken(start, this.#rooms);
        if (!positions) throw new TypeError(`roomcast: lastEventId is not a token of rooms ${this.#rooms.join(', ')}`);
        this.#seed(positions);
      }
    } else {
      this.#cursor = new Cursor(start);
    }
    this.#EventSource = options.EventSource ?? globalThis.EventSource;
    if (typeof this.#EventSource !== 'function') {
      throw new TypeError('roomcast: this environment has no EventSource');
    }
    globalThis.addEventListener?.('online', this.#onOnline);
    this.#connect();
  }

  /** The current state: one of the State values. */
  get state() {
    return this.#state;
  }

  /**
   * The URL of the current (or last) EventSource, lastEventId included and
   * the ticket left out.
   */
  get url() {
    return this.#url;
  }

  /**
   * The id the next new source would resume from ('' before any event); for
   * several rooms, the token of every room's position.
   */
  get lastEventId() {
    if (this.#rooms) {
      if (this.#rooms.every((room) => !this.#cursor.position(room))) return '';
      return formatToken(this.#rooms, (room) => this.#cursor.position(room));
    }
    return this.#cursor.lastEventId;
  }

  /** The rooms of a multiplexed subscription (sorted), or null for one room. */
  get rooms() {
    return this.#rooms ? [...this.#rooms] : null;
  }

  // #seed gives rooms the cursor does not know the positions of a token.
  #seed(positions) {
    for (const [room, pos] of positions) if (pos) this.#cursor.seed(room, pos);
  }

  // #seedFrom seeds from a multiplexed frame's id, once the frame is applied:
  // a room that has had no event yet gets its anchor from the gateway.
  #seedFrom(id) {
    if (!this.#rooms || !id) return;
    const positions = parseToken(id, this.#rooms);
    if (positions) this.#seed(positions);
  }

  /** Counters, for display and tests. A copy; it does not update. */
  get stats() {
    return { ...this.#stats, reconnects: Math.max(0, this.#stats.opens - 1) };
  }

  /** Stops the subscription for good: closes the source, cancels timers. */
  close() {
    if (this.#state === State.CLOSED) return;
    clearTimeout(this.#retryTimer);
    clearTimeout(this.#healthyTimer);
    clearTimeout(this.#ticketTimer);
    this.#pending = null; // a getTicket still in flight is ignored when it settles
    globalThis.removeEventListener?.('online', this.#onOnline);
    this.#source?.close();
    this.#source = null;
    this.#setState(State.CLOSED, {});
  }

  // #connect opens a new EventSource at the current position: at once, or
  // with getTicket, once a ticket has arrived. The first call opens the
  // initial source; later ones recreate one that is gone.
  #connect() {
    this.#retryTimer = 0;
    if (!this.#ticketed) {
      this.#open(null);
      return;
    }
    clearTimeout(this.#ticketTimer);
    const token = {};
    this.#pending = token;
    this.#setState(State.CONNECTING, { url: this.#resumeURL().href, attempt: this.#attempt });
    if (this.#pending !== token) return; // onState closed the subscription
    let ticket;
    try {
      ticket = this.#opts.getTicket();
    } catch (err) {
      this.#ticketFailed(token, err);
      return;
    }
    if (typeof ticket?.then !== 'function') {
      this.#ticketArrived(token, ticket);
      return;
    }
    const timeout = this.#opts.ticketTimeout ?? DEFAULTS.ticketTimeout;
    this.#ticketTimer = setTimeout(() => {
      this.#ticketFailed(token, new Error(`did not settle within ${timeout} ms`));
    }, timeout);
    Promise.resolve(ticket).then(
      (t) => this.#ticketArrived(token, t),
      (err) => this.#ticketFailed(token, err),
    );
  }

  // #ticketArrived opens the source with the ticket of the call `token`
  // names, unless that call is no longer the one in flight (close(), a
  // timeout).
  #ticketArrived(token, ticket) {
    if (token !== this.#pending) return;
    if (typeof ticket !== 'string' || ticket === '') {
      this.#ticketFailed(token, new TypeError(`no ticket (got ${ticket === '' ? 'an empty string' : typeof ticket})`));
      return;
    }
    this.#pending = null;
    clearTimeout(this.#ticketTimer);
    this.#open(ticket);
  }

  // #ticketFailed reports a getTicket that threw, rejected, returned no
  // ticket or did not settle in time, and tries again after the backoff.
  #ticketFailed(token, err) {
    if (token !== this.#pending) return;
    this.#pending = null;
    clearTimeout(this.#ticketTimer);
    const why = err instanceof Error ? err.message : String(err);
    this.#report('onError', new Error(`roomcast: get ticket: ${why}`, { cause: err }));
    this.#schedule('ticket');
  }

  // #resumeURL is the stream URL at the current position, without a ticket.
  #resumeURL() {
    const url = new URL(this.#base);
    const last = this.lastEventId;
    if (last) url.searchParams.set('lastEventId', last);
    return url;
  }

  // #open creates the EventSource; ticket is null without getTicket.
  #open(ticket) {
    const url = this.#resumeURL();
    const last = this.lastEventId;
    this.#url = url.href;
    if (ticket !== null) url.searchParams.set('ticket', ticket);
    if (this.#started) this.#stats.recreates++;
    // A recreated source without a position starts wherever the room is when it
    // opens: whatever was published since an earlier source opened is not
    // replayed. That happens only when no anchor told the module where the
    // earlier source started (an older gateway, or a connection that broke
    // before its anchor arrived). Say so once the new source is open, so that a
    // snapshot fetched then misses nothing.
    this.#unknown = this.#rooms ? this.#rooms.filter((room) => !this.#cursor.position(room)) : (last ? [] : [roomOf(this.#base)]);
    this.#unanchored = this.#opened && this.#unknown.length > 0;
    this.#started = true;

    const es = new this.#EventSource(url.href, {
      withCredentials: Boolean(this.#opts.withCredentials),
    });
    this.#source = es;
    es.addEventListener('open', () => this.#onOpen(es));
    es.addEventListener('error', () => this.#onError(es));
    const onMessage = (e) => this.#onMessage(es, e);
    for (const type of new Set(['message', ...(this.#opts.types ?? [])])) {
      if (type !== RESYNC && type !== REAUTH && type !== ANCHOR && type !== EXPIRED) es.addEventListener(type, onMessage);
    }
    es.addEventListener(EXPIRED, (e) => this.#onMessage(es, e, true));
    es.addEventListener(RESYNC, (e) => this.#onResync(es, e));
    es.addEventListener(ANCHOR, (e) => this.#onAnchor(es, e));
    // reauth is reserved either way (never an application event), but only
    // listened for when something acts on it.
    if (this.#ticketed || typeof this.#opts.onReauth === 'function') {
      es.addEventListener(REAUTH, (e) => this.#onReauth(es, e));
    }
    // With a ticket, CONNECTING was reported before getTicket was called.
    if (ticket === null) this.#setState(State.CONNECTING, { url: this.#url, attempt: this.#attempt });
  }

  // #schedule calls #connect after the backoff, unless close() was called.
  #schedule(reason) {
    if (this.#state === State.CLOSED) return;
    const delay = backoffDelay(this.#attempt, this.#opts.backoff, this.#opts.random);
    this.#attempt++;
    this.#retryTimer = setTimeout(() => this.#connect(), delay);
    this.#setState(State.RECONNECTING, { reason, attempt: this.#attempt, delay });
  }

  #onOpen(es) {
    if (es !== this.#source) return;
    this.#stats.opens++;
    this.#opened = true;
    clearTimeout(this.#healthyTimer);
    const healthyAfter = this.#opts.healthyAfter ?? DEFAULTS.healthyAfter;
    this.#healthyTimer = setTimeout(() => {
      this.#attempt = 0;
    }, healthyAfter);
    this.#setState(State.OPEN, { url: this.#url });
    if (this.#unanchored) {
      this.#unanchored = false;
      for (const room of this.#unknown) {
        this.#stats.resyncs++;
        this.#report('onResync', { room, epoch: '', seq: 0, previous: null, unanchored: true });
      }
    }
  }

  #onError(es) {
    if (es !== this.#source) return;
    clearTimeout(this.#healthyTimer);
    const ended = es.readyState !== ES_CLOSED;
    if (ended && !this.#ticketed) {
      // The stream ended or broke; the browser reconnects by itself after
      // `retry:`, sending Last-Event-ID.
      this.#setState(State.RECONNECTING, { reason: 'ended', attempt: this.#attempt });
      return;
    }
    // The browser gave up (non-200, wrong content type, network failure), or
    // it would reconnect with a ticket already used: recreate the source
    // ourselves, later, with a new ticket.
    es.close();
    this.#source = null;
    this.#schedule(ended ? 'ended' : 'closed');
  }

  // #onReauth handles `event: reauth`: the stream's credential expired or was
  // revoked, and the gateway ends the stream. With getTicket the source is
  // replaced at once, with a new ticket and from the cursor; without it the
  // browser reconnects by itself (sending a cookie the application may have
  // renewed in onReauth), and a refusal is retried as any other.
  #onReauth(es, e) {
    if (es !== this.#source) return;
    this.#stats.reauths++;
    if (this.#ticketed) {
      clearTimeout(this.#healthyTimer);
      es.close();
      this.#source = null;
    }
    const data = decodeReauth(e.data);
    if (data) {
      this.#report('onReauth', data);
    } else {
      this.#report('onError', new Error(`roomcast: malformed reauth data: ${String(e.data).slice(0, 200)}`));
    }
    if (this.#ticketed) this.#schedule('reauth');
  }

  // #onOnline skips the rest of a backoff wait when the network comes back.
  #onOnline = () => {
    if (this.#retryTimer === 0 || this.#state === State.CLOSED) return;
    clearTimeout(this.#retryTimer);
    this.#connect();
  };

  // #onMessage handles an event, or with expired an expired marker: the event
  // at its position outlived its time to live, and comes without a body. Both
  // move the room's position on, are dropped when repeated and show gaps.
  #onMessage(es, e, expired = false) {
    if (es !== this.#source) return;
    const data = decode(e.data, ['room', 'epoch', 'seq']);
    if (!data) {
      this.#report('onError', new Error(`roomcast: malformed event data: ${String(e.data).slice(0, 200)}`));
      return;
    }
    const verdict = this.#cursor.accept(data);
    this.#seedFrom(e.lastEventId);
    if (verdict.duplicate) {
      this.#stats.duplicates++;
      return;
    }
    if (verdict.epochChanged) {
      // The server should have said resync; never mix histories silently.
      this.#stats.resyncs++;
      this.#report('onResync', {
        room: data.room, epoch: data.epoch, seq: data.seq - 1,
        previous: formatEventId(verdict.previous),
      });
    }
    if (verdict.gap) {
      this.#stats.gaps++;
      this.#report('onGap', verdict.gap);
    }
    const id = e.lastEventId || formatEventId(data);
    if (expired) {
      this.#stats.expired++;
      this.#report('onExpired', { room: data.room, epoch: data.epoch, seq: data.seq, id });
      return;
    }
    this.#stats.events++;
    this.#report('onEvent', { type: 'message', ...data, id }, e);
  }

  // #onAnchor handles `event: anchor`, sent right after `retry:` on a stream
  // opened without a resume point (and on every multiplexed one): where the
  // gateway started the stream. It seeds the position of each room that has
  // none, so a source recreated before any event resumes from there. It is
  // never an application event.
  #onAnchor(es, e) {
    if (es !== this.#source) return;
    if (this.#rooms) {
      this.#seedFrom(e.lastEventId);
      return;
    }
    const data = decode(e.data, ['room', 'epoch', 'seq']);
    if (!data) {
      this.#report('onError', new Error(`roomcast: malformed anchor data: ${String(e.data).slice(0, 200)}`));
      return;
    }
    this.#cursor.seed(data.room, { epoch: data.epoch, seq: data.seq });
  }

  #onResync(es, e) {
    if (es !== this.#source) return;
    const data = decode(e.data, ['room', 'epoch', 'seq']);
    if (!data) {
      this.#report('onError', new Error(`roomcast: malformed resync data: ${String(e.data).slice(0, 200)}`));
      return;
    }
    const before = this.#cursor.position(data.room);
    const moved = this.#cursor.resync(data);
    this.#seedFrom(e.lastEventId);
    if (!moved) return;
    this.#stats.resyncs++;
    this.#report('onResync', {
      room: data.room, epoch: data.epoch, seq: data.seq,
      previous: before ? formatEventId(before) : null,
      ...(data.fork === true ? { fork: true } : {}),
    });
  }

  #setState(state, detail) {
    this.#state = state;
    this.#report('onState', state, detail);
  }

  // #report calls an application callback. An exception in it is reported
  // like an uncaught one, and never breaks the subscription.
  #report(name, ...args) {
    const fn = this.#opts[name];
    if (typeof fn !== 'function') return;
    try {
      fn(...args);
    } catch (err) {
      if (typeof globalThis.reportError === 'function') globalThis.reportError(err);
      else setTimeout(() => { throw err; });
    }
  }
}

/**
 * Subscribes to a room. `target` is a room name (resolved against
 * options.baseUrl, by default the directory roomcast.js was loaded from), the
 * full URL of a stream, or an array of room names: one multiplexed stream for
 * all of them (GET /events?room=a&room=b).
 *
 * @param {string | URL | string[]} target
 * @param {object} [options] see roomcast.d.ts
 * @returns {Subscription}
 */
export function subscribe(target, options = {}) {
  return new Subscription(target, options);
}

/**
 * The FNV-1a 32-bit hash of rooms (sorted, distinct) joined by "\n": the
 * room set a token is bound to.
 *
 * @param {string[]} rooms
 * @returns {number}
 */
export function roomSetHash(rooms) {
  let h = 0x811c9dc5;
  const text = rooms.join('\n');
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i); // room names are ASCII: one byte per character
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * Formats a multiplexed stream's resume token:
 * "m1." set, then "." and one position per room in sorted order, each
 * "<epoch>:<seq>" or a bare "<seq>" (seq in base 36), or empty for "from the
 * room's start".
 *
 * @param {string[]} rooms sorted and distinct
 * @param {(room: string) => ({epoch: string, seq: number} | null)} positionOf
 */
export function formatToken(rooms, positionOf) {
  let t = `m1.${roomSetHash(rooms).toString(36)}`;
  for (const room of rooms) {
    const pos = positionOf(room);
    t += '.';
    if (pos) t += (pos.epoch ? `${pos.epoch}:` : '') + pos.seq.toString(36);
  }
  return t;
}

/**
 * Parses a token of rooms (sorted, distinct): a Map of each room to its
 * position, or to null for an empty one. Null when the token is malformed or
 * of another room set.
 *
 * @param {string} token
 * @param {string[]} rooms
 * @returns {Map<string, {epoch: string, seq: number} | null> | null}
 */
export function parseToken(token, rooms) {
  if (typeof token !== 'string' || token.length > 4096) return null;
  const parts = token.trim().split('.');
  if (parts.length !== rooms.length + 2 || parts[0] !== 'm1') return null;
  if (!/^[0-9a-z]{1,7}$/.test(parts[1]) || parseInt(parts[1], 36) !== roomSetHash(rooms)) return null;
  const out = new Map();
  for (let i = 0; i < rooms.length; i++) {
    const p = parts[i + 2];
    if (p === '') {
      out.set(rooms[i], null);
      continue;
    }
    const m = /^(?:([A-Za-z0-9_-]{1,32}):)?([0-9a-z]{1,13})$/.exec(p);
    if (!m) return null;
    const seq = parseInt(m[2], 36);
    out.set(rooms[i], { epoch: m[1] ?? '', seq: Number.isSafeInteger(seq) ? seq : Number.MAX_SAFE_INTEGER });
  }
  return out;
}

// roomSet checks, sorts and dedupes the rooms of a multiplexed subscription.
function roomSet(list) {
  if (list.length === 0) throw new TypeError('roomcast: subscribe needs at least one room');
  for (const room of list) {
    if (typeof room !== 'string' || !ROOM_PATTERN.test(room)) {
      throw new TypeError(`roomcast: invalid room name ${JSON.stringify(room)}`);
    }
  }
  // Code-unit order is byte order for room names (ASCII), as the gateway sorts.
  return [...new Set(list)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

// multiURL is the multiplexed stream's URL for rooms.
function multiURL(rooms, baseUrl) {
  const base = baseUrl === undefined
    ? new URL('.', import.meta.url)
    : new URL(baseUrl, globalThis.location?.href ?? import.meta.url);
  const url = new URL('events', base);
  for (const room of rooms) url.searchParams.append('room', room);
  return url;
}

// streamURL turns a room name or URL into an absolute URL.
function streamURL(target, baseUrl) {
  if (target instanceof URL) return new URL(target.href);
  if (typeof target !== 'string' || target === '') {
    throw new TypeError('roomcast: subscribe needs a room name or a URL');
  }
  // Room names can contain neither '/' nor ':', URLs always contain one.
  if (!/[/:]/.test(target)) {
    if (!ROOM_PATTERN.test(target)) {
      throw new TypeError(`roomcast: invalid room name ${JSON.stringify(target)}`);
    }
    const base = baseUrl === undefined
      ? new URL('.', import.meta.url)
      : new URL(baseUrl, globalThis.location?.href ?? import.meta.url);
    return new URL(`rooms/${encodeURIComponent(target)}/events`, base);
  }
  return new URL(target, globalThis.location?.href ?? import.meta.url);
}

// roomOf returns the room of a stream URL, or '' when it names none.
function roomOf(url) {
  const m = /\/rooms\/([^/]+)\/events$/.exec(url.pathname);
  if (!m) return '';
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return '';
  }
}

// decodeReauth parses the data of `event: reauth`: {"room", "exp"}, exp in
// Unix seconds, and on a multiplexed stream "rooms", every room it ends. It returns null when the data is not that.
function decodeReauth(text) {
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    return null;
  }
  if (data === null || typeof data !== 'object') return null;
  if (typeof data.room !== 'string' || !Number.isSafeInteger(data.exp) || data.exp < 0) return null;
  if (Array.isArray(data.rooms) && data.rooms.every((r) => typeof r === 'string')) {
    return { room: data.room, rooms: data.rooms, exp: data.exp };
  }
  return { room: data.room, exp: data.exp };
}

// decode parses event data and checks it has the fields an envelope needs.
function decode(text, fields) {
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    return null;
  }
  if (data === null || typeof data !== 'object') return null;
  for (const f of fields) if (!(f in data)) return null;
  if (typeof data.room !== 'string' || typeof data.epoch !== 'string') return null;
  if (!Number.isSafeInteger(data.seq) || data.seq < 0) return null;
  return data;
}

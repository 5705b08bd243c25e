// Type declarations for roomcast.js, the browser client for roomcast rooms.
// Save this file next to roomcast.js (or point a `paths` entry at it) and
// import the module as usual:
//
//   import { subscribe, type RoomEvent } from './roomcast.js';

/** Valid room names: 1 to 128 of A-Z a-z 0-9 . _ ~ - */
export declare const ROOM_PATTERN: RegExp;

/** The states a subscription goes through. */
export declare const State: Readonly<{
  CONNECTING: 'connecting';
  OPEN: 'open';
  RECONNECTING: 'reconnecting';
  CLOSED: 'closed';
}>;

export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'closed';

/** Default option values, in milliseconds. */
export declare const DEFAULTS: Readonly<{
  backoffBase: number;
  backoffCap: number;
  healthyAfter: number;
  ticketTimeout: number;
}>;

/** One event of a room, as the gateway publishes it. */
export interface RoomEvent<Body = unknown> {
  room: string;
  /** Names one history of the room; it changes when that history is lost. */
  epoch: string;
  /** Dense per room and epoch: the next event has seq + 1. */
  seq: number;
  /** Publish time, Unix milliseconds. */
  ts: number;
  /** "message" unless the publisher chose another type. */
  type: string;
  body: Body;
  /** The SSE id, "<epoch>:<seq>". */
  id: string;
}

/** The stream lost its place: the room continues after {epoch, seq}. */
export interface Resync {
  room: string;
  epoch: string;
  seq: number;
  /** The position before the resync, or null when there was none. */
  previous: string | null;
  /** Present and true when the history forked: the events seen after seq were
   * replaced, so the position moved back. */
  fork?: true;
  /** Present and true when a source had to be recreated before anything told
   * the subscription where it was (no event, and no `event: anchor`: an older
   * gateway, or a connection that broke before its anchor arrived): events
   * published meanwhile may be missing. epoch is '' and seq 0 (unknown);
   * refetch the snapshot. Reported once the new source is open, so a snapshot
   * fetched then misses nothing. */
  unanchored?: true;
}

/** An event that outlived its time to live (the publisher's Event-TTL)
 * before it was delivered (`event: expired`): its place in the room, no body.
 * It moves the position on like an event. */
export interface Expired {
  room: string;
  epoch: string;
  seq: number;
  /** The expired event's SSE id, "<epoch>:<seq>" (on a multiplexed stream,
   * the stream's token). */
  id: string;
}

/** Events missing between two delivered ones, from..to inclusive. */
export interface Gap {
  room: string;
  epoch: string;
  from: number;
  to: number;
}

/** The stream's credential expired or was revoked (`event: reauth`). */
export interface Reauth {
  room: string;
  /** On a multiplexed stream: every room it ends (room is the first of them). */
  rooms?: string[];
  /** The credential's expiry, Unix seconds (a revoked one may not have reached it). */
  exp: number;
}

/** Detail passed with each state change. */
export interface StateDetail {
  /** The URL of the source being opened or open; never the ticket. */
  url?: string;
  /** Backoff attempts since the last healthy connection. */
  attempt?: number;
  /** Milliseconds until the source is recreated (every reason but an "ended"
   * without getTicket). */
  delay?: number;
  /**
   * "ended": the stream ended or broke; without getTicket the browser
   * reconnects by itself, with getTicket the source is recreated with a new
   * ticket (the browser would resend the used one);
   * "closed": the browser gave up (a refusal such as 401 or 403, a wrong
   * content type, a network failure) and the source will be recreated;
   * "reauth": the credential expired or was revoked, and the source will be
   * recreated with a new ticket;
   * "ticket": getTicket threw, rejected, returned no ticket or did not settle
   * within ticketTimeout; it is called again after the delay.
   */
  reason?: 'ended' | 'closed' | 'reauth' | 'ticket';
}

export interface SubscribeOptions<Body = unknown> {
  /** Called once per event, in seq order, never twice for one seq. */
  onEvent?: (event: RoomEvent<Body>, raw: MessageEvent) => void;
  /** The resume point was lost; refetch the room's state from your backend. */
  onResync?: (resync: Resync) => void;
  /** An event's time to live passed before it was delivered: it is never
   * passed to onEvent; this says which seq it was. */
  onExpired?: (expired: Expired) => void;
  /** Events are missing between two delivered ones. */
  onGap?: (gap: Gap) => void;
  /** Connection state changes. */
  onState?: (state: ConnectionState, detail: StateDetail) => void;
  /** Malformed event data, or a getTicket that failed (the original error
   * is the `cause`). */
  onError?: (error: Error) => void;
  /**
   * Returns a single-use ticket for the next connect: called before every
   * connect (the first, and each reconnect, since a ticket is good for one),
   * its result goes in the stream URL's `ticket` query parameter. Get it from
   * your backend, which asks the gateway's `POST /tickets`. When it is set,
   * the module closes the source itself whenever the stream ends, and
   * reconnects from its position after its backoff: the browser's own
   * reconnect would resend a used ticket and be refused for good. A call
   * that throws, rejects, returns no string or does not settle within
   * ticketTimeout is reported to onError and retried after the backoff.
   */
  getTicket?: () => string | PromiseLike<string>;
  /** Milliseconds a getTicket call may take before it counts as failed
   * (default 10000). */
  ticketTimeout?: number;
  /**
   * The stream's credential expired or was revoked (`event: reauth`; never
   * passed to onEvent). With getTicket the module reconnects with a new
   * ticket by itself. Without it the browser reconnects after the gateway's
   * `retry:` with whatever cookie it holds then: renew the cookie here.
   * reauth is listened for only when getTicket or onReauth is set.
   */
  onReauth?: (reauth: Reauth) => void;
  /**
   * Event types to receive besides "message". EventSource delivers only
   * types it listens for, so list every type the room carries: a type not
   * listed is invisible here, and its seqs show up as gaps. The gateway's own
   * frames (resync, reauth, anchor, expired) are never passed to onEvent,
   * listed or not; an expired marker goes to onExpired whatever the types.
   */
  types?: string[];
  /** Where to start: "<epoch>:<seq>" or a bare "<seq>" (current epoch). */
  lastEventId?: string;
  /**
   * Directory URL (ending in "/") that room names are resolved against.
   * Default: the directory roomcast.js was loaded from.
   */
  baseUrl?: string | URL;
  /** Passed to every EventSource: set it when the gateway is on another
   * origin and the credential is a cookie. */
  withCredentials?: boolean;
  /** Backoff before recreating a closed source, milliseconds. */
  backoff?: { base?: number; cap?: number };
  /** An open connection this old (ms) resets the backoff. */
  healthyAfter?: number;
  /** Source of randomness in [0, 1), for tests. */
  random?: () => number;
  /** EventSource constructor to use, for tests or polyfills. */
  EventSource?: typeof EventSource;
}

export interface SubscriptionStats {
  /** Successful connections, first one included. */
  opens: number;
  /** Opens after the first: the browser's reconnects plus recreations. */
  reconnects: number;
  /** EventSources created after the first, because one reached CLOSED. */
  recreates: number;
  /** Events delivered to onEvent. */
  events: number;
  /** Expired markers delivered to onExpired. */
  expired: number;
  /** Events dropped because their seq was already delivered. */
  duplicates: number;
  gaps: number;
  resyncs: number;
  /** `event: reauth` received (counted when getTicket or onReauth is set). */
  reauths: number;
}

export declare class Subscription {
  constructor(target: string | URL | string[], options?: SubscribeOptions);
  readonly state: ConnectionState;
  /** The rooms of a multiplexed subscription, sorted; null for one room. */
  readonly rooms: string[] | null;
  /** URL of the current source, lastEventId parameter included, ticket left out. */
  readonly url: string;
  /**
   * Where a new source would resume from ('' before any event or anchor); for
   * several rooms, the token of every room's position (see formatToken).
   */
  readonly lastEventId: string;
  /** A snapshot of the counters. */
  readonly stats: SubscriptionStats;
  /** Closes the source and cancels any pending reconnect. */
  close(): void;
}

/**
 * Subscribes to a room, by name or by stream URL, or to several rooms on one
 * stream (GET /events?room=a&room=b) by an array of names.
 */
export declare function subscribe<Body = unknown>(
  target: string | URL | string[],
  options?: SubscribeOptions<Body>,
): Subscription;

/** Full-jitter delay in [0, min(cap, base * 2^attempt)), whole ms. */
export declare function backoffDelay(
  attempt: number,
  limits?: { base?: number; cap?: number },
  random?: () => number,
): number;

export interface Position {
  /** '' when unknown (a bare seq means the current epoch). */
  epoch: string;
  seq: number;
}

export declare function parseEventId(id: string | null | undefined): Position | null;
export declare function formatEventId(pos: Position): string;

export interface Verdict {
  duplicate: boolean;
  gap: Gap | null;
  epochChanged: boolean;
  previous: Position | null;
}

/** Per-room positions: the dedupe and gap logic of Subscription. */
export declare class Cursor {
  constructor(lastEventId?: string);
  position(room: string): Position | null;
  readonly lastEventId: string;
  accept(event: { room: string; epoch: string; seq: number }): Verdict;
  resync(resync: { room: string; epoch: string; seq: number; fork?: boolean }): boolean;
  /** Sets the position of a room it knows nothing about (from a token or a
   * stream's anchor); a known room stays. Before any event or resync, the
   * seeded position becomes lastEventId. */
  seed(room: string, pos: Position): void;
}

/** FNV-1a 32 of the sorted, distinct rooms joined by "\n": a token's room set. */
export declare function roomSetHash(rooms: string[]): number;
/**
 * A multiplexed stream's resume token: "m1." set, then "." and each room's
 * position in sorted order ("<epoch>:<seq>", a bare "<seq>", seq in base 36,
 * or empty: from the room's start).
 */
export declare function formatToken(rooms: string[], positionOf: (room: string) => Position | null): string;
/** Each room's position (null: empty) in a token of rooms; null when malformed or of other rooms. */
export declare function parseToken(token: string, rooms: string[]): Map<string, Position | null> | null;

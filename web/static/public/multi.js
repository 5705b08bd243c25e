// The demo page's multi-room card: one stream for several rooms, through
// roomcast.js's subscribe([...]). Each event is shown with its room.

import { subscribe, ROOM_PATTERN } from '../roomcast.js';

const MAX_ROOMS = 32;

const $ = (id) => document.getElementById(id);
const form = $('multi-form');
const input = $('multi-rooms');
const follow = $('multi-follow');
const stop = $('multi-stop');
const log = $('multi-log');
const state = $('multi-state');
const MAX_ROWS = 200;

let sub = null;

const labels = { connecting: 'Connecting…', open: 'Live', reconnecting: 'Reconnecting…', closed: 'Not following' };

function setState(s) {
  state.dataset.state = s === 'closed' ? 'idle' : s;
  state.textContent = s === 'open' && sub ? `Live · ${sub.rooms.length} rooms` : labels[s] ?? s;
}

function add(kind, chip, text, title = '') {
  const li = document.createElement('li');
  li.dataset.kind = kind;
  const tag = document.createElement('span');
  tag.className = 'seq';
  tag.textContent = chip;
  if (title) tag.title = title;
  const body = document.createElement('span');
  body.className = 'body';
  body.textContent = text;
  li.append(tag, body, document.createElement('span'));
  log.prepend(li);
  while (log.children.length > MAX_ROWS) log.lastElementChild.remove();
}

function start(names) {
  sub?.close();
  sub = subscribe(names, {
    onEvent: (ev) => {
      add('event', ev.room, `#${ev.seq} ${JSON.stringify(ev.body)}`, `${ev.epoch}:${ev.seq}`);
      const li = log.firstElementChild;
      li.dataset.room = ev.room;
      li.dataset.seq = String(ev.seq);
    },
    onResync: (r) => add('sys', r.room, r.unanchored ? 'resumed live; refetch this room' : `resync: continues after #${r.seq}`),
    onGap: (g) => add('sys', g.room, `gap: #${g.from}–#${g.to} missing`),
    onState: (s) => setState(s),
  });
  follow.textContent = 'Follow again';
  stop.disabled = false;
}

form.addEventListener('submit', (e) => {
  e.preventDefault();
  const names = [...new Set(input.value.split(/[\s,]+/).filter(Boolean))];
  const bad = names.find((n) => !ROOM_PATTERN.test(n));
  // The gateway's default --max-rooms-per-stream; more would be refused for good.
  const tooMany = names.length > MAX_ROOMS;
  if (names.length === 0 || bad !== undefined || tooMany) {
    input.setCustomValidity(tooMany ? `At most ${MAX_ROOMS} rooms on one stream`
      : bad === undefined ? 'Name at least one room' : `Invalid room name: ${bad}`);
    input.reportValidity();
    return;
  }
  input.setCustomValidity('');
  start(names);
});

input.addEventListener('input', () => input.setCustomValidity(''));

stop.addEventListener('click', () => {
  sub?.close();
  sub = null;
  stop.disabled = true;
  follow.textContent = 'Follow';
  setState('closed');
});

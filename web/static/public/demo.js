// The demo page: join a room, watch its events arrive with their seq, see
// the connection come and go, and publish from the page.
//
// Everything goes through roomcast.js, so the page behaves like an
// application would: it resumes after drops and restarts, never shows an
// event twice and says so when history was lost.

import { subscribe, formatEventId, ROOM_PATTERN } from '../roomcast.js';

const MAX_ROWS = 200; // log lines kept on screen
const DEFAULT_ROOM = 'lobby';
const TYPE_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
// The gateway's own frames, in any case: a publisher may not use them.
const GATEWAY_TYPES = ['resync', 'reauth', 'anchor'];
// EventSource's own events: a listener could not tell them from the connection's.
const EVENTSOURCE_TYPES = ['error', 'open'];

const $ = (id) => document.getElementById(id);
const ui = {
  state: $('state'),
  joinForm: $('join-form'),
  room: $('room'),
  join: $('join'),
  leave: $('leave'),
  position: $('position'),
  events: $('count-events'),
  reconnects: $('count-reconnects'),
  resyncs: $('count-resyncs'),
  gaps: $('count-gaps'),
  publishForm: $('publish-form'),
  body: $('body'),
  type: $('type'),
  token: $('token'),
  publish: $('publish'),
  result: $('publish-result'),
  log: $('log'),
  clear: $('clear'),
};

let sub = null; // the current Subscription, null when not in a room
let resubscribing = false; // the next 'open' belongs to a resubscription
let room = ''; // the room joined
// After a reconnect, the id the stream was asked to resume after, until its
// first frame says whether it did (an event) or could not (a resync).
let resuming = null;
const types = new Set(); // event types listened for besides "message"
// Counters for the room, kept across resubscriptions.
const totals = { events: 0, reconnects: 0, resyncs: 0, gaps: 0 };

// --- Joining and leaving -------------------------------------------------

function join(name, resumeFrom) {
  sub?.close();
  if (name !== room) {
    // A new room starts a new log.
    ui.log.replaceChildren();
    Object.keys(totals).forEach((k) => { totals[k] = 0; });
  }
  room = name;
  resuming = null;
  ui.room.value = name;
  history.replaceState(null, '', `#${encodeURIComponent(name)}`);
  sub = subscribe(name, {
    types: [...types],
    lastEventId: resumeFrom,
    onEvent: (ev) => {
      if (resuming !== null) {
        addSystem(`Resumed after ${resuming}: nothing was missed.`, 'ok');
        resuming = null;
      }
      showEvent(ev);
    },
    onResync: (r) => {
      totals.resyncs++;
      updateFacts();
      const was = r.previous ?? resuming;
      resuming = null;
      const at = was ? ` after ${was}` : '';
      addSystem(`History was lost${at}: continuing from ${resyncPoint(r)}. An app would reload its state now.`, 'warn');
    },
    onGap: (g) => {
      resuming = null;
      totals.gaps++;
      updateFacts();
      const what = g.from === g.to ? `#${g.from} is` : `#${g.from}–#${g.to} are`;
      addSystem(`Gap: ${what} missing in epoch ${g.epoch}.`, 'bad');
    },
    onState: showState,
    onError: (err) => addSystem(err.message, 'bad'),
  });
  ui.leave.disabled = false;
  ui.join.textContent = 'Switch';
  updateFacts();
  updateSnippets();
}

function leave() {
  sub?.close();
  sub = null;
  ui.leave.disabled = true;
  ui.join.textContent = 'Join';
  addSystem(`Left room ${room}.`);
}

// resubscribe reopens the room with the current type list, from where the
// page is, so nothing published in between is missed.
function resubscribe() {
  if (!sub) return;
  resubscribing = true;
  join(room, sub.lastEventId || undefined);
}

// resyncPoint says where the stream continues after a resync.
function resyncPoint(r) {
  if (r.unanchored) return 'wherever the room is now';
  if (r.seq > 0) return formatEventId({ epoch: r.epoch, seq: r.seq });
  return r.epoch ? `the start of epoch ${r.epoch}` : 'the start of the room\'s new history';
}

// --- Rendering ------------------------------------------------------------

const STATE_VIEW = {
  connecting: { text: 'Connecting…', tone: 'warn' },
  open: { text: 'Live', tone: 'ok' },
  reconnecting: { text: 'Reconnecting…', tone: 'warn' },
  closed: { text: 'Not connected', tone: '' },
};

let wasOpen = false;

function showState(state, detail) {
  const view = STATE_VIEW[state] ?? { text: state, tone: '' };
  ui.state.dataset.state = state;
  ui.state.dataset.tone = view.tone;
  ui.state.textContent = view.text;
  if (state === 'open') {
    if (resubscribing) {
      resubscribing = false; // already announced by publish()
    } else if (wasOpen) {
      // Whether the stream resumed is known only from its first frame: an
      // event continuing the id, or a resync.
      totals.reconnects++;
      resuming = sub?.lastEventId || null;
      addSystem(resuming ? `Reconnected; resuming after ${resuming}…` : 'Reconnected.', resuming ? '' : 'ok');
    } else {
      addSystem(`Connected to room ${room}.`, 'ok');
    }
    wasOpen = true;
  } else if (state === 'reconnecting' && detail.reason === 'ended') {
    addSystem('Stream ended; the browser reconnects on its own.', 'warn');
  } else if (state === 'reconnecting') {
    const secs = (detail.delay / 1000).toFixed(1);
    addSystem(`Connection refused or failed; trying again in ${secs} s (attempt ${detail.attempt}).`, 'warn');
  } else if (state === 'closed' && !resubscribing) {
    wasOpen = false;
  }
  updateFacts();
}

function showEvent(ev) {
  totals.events++;
  const li = row('event');
  li.dataset.seq = String(ev.seq);
  li.dataset.epoch = ev.epoch;
  li.dataset.type = ev.type;
  li.querySelector('.seq').textContent = `#${ev.seq}`;
  li.querySelector('.seq').title = ev.id;
  const body = li.querySelector('.body');
  if (ev.type !== 'message') {
    const chip = document.createElement('span');
    chip.className = 'type';
    chip.textContent = ev.type;
    body.append(chip);
  }
  body.append(preview(ev.body));
  const latency = Math.max(0, Date.now() - ev.ts);
  li.querySelector('.when').textContent = `${clock(ev.ts)} · ${latency} ms`;
  li.querySelector('.when').title = 'publish time · publish-to-screen latency';
  prepend(li);
  updateFacts();
}

// addSystem logs a connection change, resync or gap. A line equal to the
// newest one is folded into it with a counter, so an outage reads as one
// line rather than a screenful.
function addSystem(text, tone = '') {
  const top = ui.log.firstElementChild;
  if (top?.dataset.kind === 'sys' && top.dataset.text === text) {
    const n = Number(top.dataset.repeat ?? '1') + 1;
    top.dataset.repeat = String(n);
    top.querySelector('.seq').textContent = `×${n}`;
    top.querySelector('.when').textContent = clock(Date.now());
    return;
  }
  const li = row('sys');
  li.classList.add('sys');
  li.dataset.text = text;
  if (tone) li.dataset.tone = tone;
  li.querySelector('.seq').textContent = '•';
  li.querySelector('.body').textContent = text;
  li.querySelector('.when').textContent = clock(Date.now());
  prepend(li);
}

function row(kind) {
  const li = document.createElement('li');
  li.dataset.kind = kind;
  for (const cls of ['seq', 'body', 'when']) {
    const span = document.createElement('span');
    span.className = cls;
    li.append(span);
  }
  return li;
}

function prepend(li) {
  ui.log.prepend(li);
  while (ui.log.childElementCount > MAX_ROWS) ui.log.lastElementChild.remove();
}

function preview(body) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

function clock(ms) {
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function updateFacts() {
  const id = sub?.lastEventId || '–';
  ui.position.textContent = id;
  ui.position.title = id;
  ui.events.textContent = String(totals.events);
  ui.reconnects.textContent = String(totals.reconnects);
  ui.resyncs.textContent = String(totals.resyncs);
  ui.gaps.textContent = String(totals.gaps);
}

// --- Publishing -------------------------------------------------------------

async function publish() {
  // The room on screen; the typed name only when no room is joined.
  const target = sub ? room : ui.room.value.trim();
  if (!ROOM_PATTERN.test(target)) {
    showResult('bad', 'Invalid room name', 'Use 1–128 of A–Z a–z 0–9 . _ ~ -');
    return;
  }
  const type = ui.type.value.trim();
  const refusal = typeRefusal(type);
  ui.type.toggleAttribute('aria-invalid', Boolean(refusal));
  if (refusal) {
    showResult('bad', `Type "${type}" cannot be published`, refusal);
    ui.type.focus();
    return;
  }
  if (type && type !== 'message' && !types.has(type)) {
    // EventSource only delivers the types it listens for: reopen the
    // stream from where the page is, now listening for this type too.
    types.add(type);
    if (sub) addSystem(`Now also listening for "${type}" events.`);
    resubscribe();
  }
  const text = ui.body.value;
  let contentType = 'application/json';
  try {
    JSON.parse(text);
  } catch {
    contentType = 'text/plain; charset=utf-8';
  }
  const url = new URL(`rooms/${encodeURIComponent(target)}/events`, document.baseURI);
  if (type) url.searchParams.set('type', type);
  const headers = { 'Content-Type': contentType };
  const token = ui.token.value.trim();
  if (token) headers.Authorization = `Bearer ${token}`;

  ui.publish.disabled = true;
  try {
    const res = await fetch(url, { method: 'POST', headers, body: text });
    const raw = await res.text();
    let data = null;
    try {
      data = JSON.parse(raw);
    } catch {
      // Not JSON: shown raw below.
    }
    if (res.ok && data) {
      showResult('ok', `Published #${data.seq}`, `id ${data.id} in room ${data.room}`);
    } else {
      showError(res, data, raw);
    }
  } catch (err) {
    showResult('bad', 'Could not reach the gateway', String(err.message ?? err));
  } finally {
    ui.publish.disabled = false;
  }
}

// typeRefusal says why the gateway would refuse an event type, or '' when it
// takes it (no type is "message").
function typeRefusal(type) {
  if (!type) return '';
  if (GATEWAY_TYPES.includes(type.toLowerCase())) {
    return `${GATEWAY_TYPES.join(', ')} (in any case) are reserved: the gateway sends them itself. Pick another type.`;
  }
  if (EVENTSOURCE_TYPES.includes(type)) {
    return `${EVENTSOURCE_TYPES.join(' and ')} are reserved: EventSource fires them itself. Pick another type.`;
  }
  if (!TYPE_PATTERN.test(type)) return 'Use 1–64 of A–Z a–z 0–9 . _ -';
  return '';
}

function showError(res, data, raw) {
  const title = `${res.status} ${res.statusText || 'error'}`;
  const code = data?.error ? ` · ${data.error}` : '';
  const hints = {
    401: 'This gateway wants a publisher token: paste it into Token.',
    403: 'This token or client may not publish here.',
    413: 'The body is larger than the gateway accepts.',
  };
  const message = data?.message ?? (raw.trim().slice(0, 300) || 'No details.');
  showResult('bad', title + code, message, hints[res.status], raw.trim() ? prettyJSON(raw) : '');
}

function showResult(tone, title, message, hint = '', details = '') {
  const box = ui.result;
  box.replaceChildren();
  box.dataset.tone = tone;
  const strong = document.createElement('strong');
  strong.textContent = title;
  box.append(strong, document.createElement('br'), message);
  if (hint) box.append(document.createElement('br'), hint);
  if (details) {
    const more = document.createElement('details');
    const summary = document.createElement('summary');
    summary.textContent = 'Response body';
    const pre = document.createElement('pre');
    pre.textContent = details;
    more.append(summary, pre);
    box.append(more);
  }
}

function prettyJSON(raw) {
  try {
    return JSON.stringify(JSON.parse(raw), null, 2);
  } catch {
    return raw;
  }
}

// --- Snippets ---------------------------------------------------------------

function updateSnippets() {
  const origin = new URL('.', document.baseURI).href.replace(/\/$/, '');
  const r = encodeURIComponent(room || DEFAULT_ROOM);
  $('snippet-follow').textContent = `curl -N ${origin}/rooms/${r}/events`;
  $('snippet-publish').textContent =
    `curl -X POST -H 'Content-Type: application/json' \\\n  -d '{"text":"hi"}' ${origin}/rooms/${r}/events`;
  $('snippet-js').textContent =
    `import { subscribe } from '${origin}/roomcast.js';\n\n` +
    `const sub = subscribe('${room || DEFAULT_ROOM}', {\n` +
    `  onEvent: (ev) => console.log(ev.seq, ev.body),\n` +
    `  onResync: () => { /* reload your state */ },\n` +
    `});`;
}

function copy(button) {
  const pre = $(button.dataset.copy);
  const done = (label) => {
    button.textContent = label;
    setTimeout(() => { button.textContent = 'Copy'; }, 1200);
  };
  navigator.clipboard?.writeText(pre.textContent).then(() => done('Copied'), () => {
    // No clipboard access: select the text so a keystroke copies it.
    getSelection().selectAllChildren(pre);
    done('Selected');
  });
}

// --- Wiring -------------------------------------------------------------------

ui.joinForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const name = ui.room.value.trim();
  if (ROOM_PATTERN.test(name)) join(name);
});
ui.leave.addEventListener('click', leave);
ui.type.addEventListener('input', () => ui.type.removeAttribute('aria-invalid'));
ui.publishForm.addEventListener('submit', (e) => {
  e.preventDefault();
  publish();
});
ui.body.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    publish();
  }
});
ui.clear.addEventListener('click', () => ui.log.replaceChildren());
for (const b of document.querySelectorAll('button.copy')) b.addEventListener('click', () => copy(b));

const fromHash = decodeURIComponent(location.hash.slice(1));
join(ROOM_PATTERN.test(fromHash) ? fromHash : DEFAULT_ROOM);

// The operator page: polls /admin/stats on its own, shows the numbers with a
// short history, and drains the pod (POST /admin/drain) after a
// confirmation.
//
// ?interval=<ms> on the page URL changes the refresh period (default 2 s).
//
// Only when the gateway asks for an admin token (a 401 from /admin/stats) does
// the page show a field for it; it keeps the token in this tab's sessionStorage,
// sent as a bearer credential. A call refused with a token that has since been
// replaced does not forget the new one.

const DEFAULT_INTERVAL = 2000;
const HISTORY = 60; // samples kept per sparkline

const params = new URLSearchParams(location.search);
const interval = Math.max(250, Number(params.get('interval')) || DEFAULT_INTERVAL);
const statsURL = new URL('admin/stats', document.baseURI);
const drainURL = new URL('admin/drain', document.baseURI);

const TOKEN_KEY = 'roomcast.adminToken';

const $ = (id) => document.getElementById(id);
const ui = {
  state: $('pod-state'),
  backend: $('backend'),
  uptime: $('uptime'),
  updated: $('updated'),
  auto: $('auto'),
  banner: $('banner'),
  drops: $('drops'),
  drain: $('drain'),
  drainResult: $('drain-result'),
  confirm: $('confirm'),
  confirmConnections: $('confirm-connections'),
  tokenForm: $('token-form'),
  token: $('token'),
};

// storedToken is the admin token this tab holds, or null.
function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

// headers are the request headers of an admin call sent with token (null for
// none).
function headers(token) {
  return token ? { Accept: 'application/json', Authorization: `Bearer ${token}` } : { Accept: 'application/json' };
}

// refused handles a 401 to a call sent with token. It forgets the token and
// asks for one, unless the token was replaced while the call was in flight: the
// refusal is then about the old one, and the new one has a call of its own.
// It reports whether the refusal is still current.
function refused(token) {
  if (storedToken() !== token) return false;
  sessionStorage.removeItem(TOKEN_KEY);
  ui.tokenForm.hidden = false;
  return true;
}

ui.tokenForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const token = ui.token.value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  ui.token.value = '';
  ui.tokenForm.hidden = true;
  refresh();
});

const STATES = {
  ready: { text: 'Ready', tone: 'ok' },
  draining: { text: 'Draining', tone: 'warn' },
  stopped: { text: 'Stopped', tone: 'bad' },
};

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

const series = new Map(); // stat name -> recent values, oldest first
let timer = 0;
let last = null; // the newest stats

// --- Polling ------------------------------------------------------------------

async function refresh() {
  clearTimeout(timer);
  timer = 0;
  const abort = new AbortController();
  const deadline = setTimeout(() => abort.abort(), Math.max(interval, 3000));
  // The poll carries the token it was sent with: a 401 speaks only for that one.
  const token = storedToken();
  try {
    const res = await fetch(statsURL, {
      cache: 'no-store',
      headers: headers(token),
      signal: abort.signal,
    });
    if (res.status === 401 && !refused(token)) return;
    if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
    render(await res.json());
    // The gateway answered: it takes this token, or asks for none.
    if (storedToken() === token) ui.tokenForm.hidden = true;
    ui.banner.hidden = true;
  } catch (err) {
    const why = err.name === 'AbortError' ? 'no answer' : err.message;
    ui.banner.textContent = `Cannot read /admin/stats (${why}). The numbers below are the last ones received.`;
    ui.banner.hidden = false;
  } finally {
    clearTimeout(deadline);
    schedule();
  }
}

function schedule() {
  clearTimeout(timer);
  timer = ui.auto.checked ? setTimeout(refresh, interval) : 0;
}

// --- Rendering ----------------------------------------------------------------

function render(s) {
  last = s;
  const view = STATES[s.state] ?? { text: String(s.state ?? 'unknown'), tone: '' };
  ui.state.dataset.state = s.state;
  ui.state.dataset.tone = view.tone;
  ui.state.textContent = view.text;

  // The log's backend (memory or redis) and whether it answers: Redis health
  // from this pod's side.
  const backend = s.backend ?? {};
  ui.backend.dataset.kind = backend.kind ?? 'unknown';
  ui.backend.dataset.up = String(Boolean(backend.up));
  ui.backend.dataset.tone = backend.up ? 'ok' : 'bad';
  ui.backend.textContent = `${backend.kind ?? 'log'} ${backend.up ? 'up' : 'down'}`;
  if (backend.changed_at) {
    ui.backend.title = `${backend.up ? 'Answering' : 'Not answering'} since ${new Date(backend.changed_at).toLocaleString()}`;
  }

  const drops = Object.entries(s.drops ?? {}).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const values = { ...s, drops_total: drops.reduce((sum, [, n]) => sum + n, 0) };

  for (const out of document.querySelectorAll('output[data-stat]')) {
    const key = out.dataset.stat;
    const v = values[key];
    if (typeof v !== 'number') continue;
    out.dataset.value = String(v);
    out.textContent = key.endsWith('_per_second') ? decimal.format(v) : integer.format(v);
    push(key, v);
  }
  ui.uptime.dataset.value = String(s.uptime_seconds ?? '');
  ui.uptime.textContent = duration(s.uptime_seconds ?? 0);
  ui.updated.textContent = new Date().toLocaleTimeString([], { hour12: false });

  ui.drops.replaceChildren(...drops.map(([reason, n]) => {
    const tr = document.createElement('tr');
    tr.dataset.reason = reason;
    const name = document.createElement('td');
    name.textContent = reason.replaceAll('_', ' ');
    const count = document.createElement('td');
    count.dataset.value = String(n);
    count.textContent = integer.format(n);
    tr.append(name, count);
    return tr;
  }));

  ui.drain.disabled = s.state !== 'ready';
  for (const [key, values] of series) spark(key, values);
}

function push(key, v) {
  const values = series.get(key) ?? [];
  values.push(v);
  if (values.length > HISTORY) values.shift();
  series.set(key, values);
}

// spark draws a filled line of the recent values into the tile's SVG.
function spark(key, values) {
  const svg = document.querySelector(`svg[data-spark="${key}"]`);
  if (!svg || values.length < 2) return;
  const [w, h] = [120, 28];
  // Zero at the bottom; headroom above the peak, so a steady value reads as
  // a line rather than a filled block.
  const min = Math.min(...values, 0);
  const span = Math.max(...values) * 1.25 - min || 1;
  // The line spans the tile from the first sample on, and gets denser as
  // history builds up.
  const step = w / (values.length - 1);
  const x0 = 0;
  const points = values.map((v, i) => `${(x0 + i * step).toFixed(1)},${(h - 2 - ((v - min) / span) * (h - 4)).toFixed(1)}`);
  const ns = 'http://www.w3.org/2000/svg';
  const area = document.createElementNS(ns, 'polygon');
  area.setAttribute('points', `${x0.toFixed(1)},${h} ${points.join(' ')} ${w},${h}`);
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', points.join(' '));
  svg.replaceChildren(area, line);
}

function duration(seconds) {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n) => String(n).padStart(2, '0');
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${pad(m)}m`;
  return `${m}m ${pad(s % 60)}s`;
}

// --- Draining -----------------------------------------------------------------

ui.drain.addEventListener('click', () => {
  ui.confirmConnections.textContent = integer.format(last?.connections ?? 0);
  ui.confirm.returnValue = '';
  ui.confirm.showModal();
});

ui.confirm.addEventListener('close', async () => {
  if (ui.confirm.returnValue !== 'drain') return;
  ui.drain.disabled = true;
  const box = ui.drainResult;
  try {
    const token = storedToken();
    const res = await fetch(drainURL, { method: 'POST', headers: headers(token) });
    if (res.status === 401) refused(token);
    const raw = await res.text();
    let data = null;
    try {
      data = JSON.parse(raw);
    } catch {
      // Shown raw below.
    }
    if (res.ok) {
      box.dataset.tone = 'ok';
      box.textContent = `Drain started: the pod is ${data?.state ?? 'draining'}.`;
    } else {
      box.dataset.tone = 'bad';
      box.textContent = `${res.status} ${data?.error ?? res.statusText}: ${data?.message ?? raw}`;
      ui.drain.disabled = false;
    }
  } catch (err) {
    box.dataset.tone = 'bad';
    box.textContent = `Could not reach the gateway: ${err.message}`;
    ui.drain.disabled = false;
  }
  refresh();
});

// --- Wiring -------------------------------------------------------------------

ui.auto.addEventListener('change', () => (ui.auto.checked ? refresh() : schedule()));
// Coming back to the tab shows fresh numbers at once.
document.addEventListener('visibilitychange', () => {
  if (!document.hidden && ui.auto.checked) refresh();
});
refresh();

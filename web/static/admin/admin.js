// The operator page: polls /admin/stats on its own, shows the numbers with a
// short history (a chart with its scale; counters are charted as rates), and drains the pod (POST /admin/drain) after a
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
// Stats that only grow: their charts plot the rate between two samples.
const COUNTERS = new Set(['published', 'delivered', 'drops_total']);

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

const series = new Map(); // stat name -> recent plotted samples {v, t}, oldest first
const counters = new Map(); // counter name -> its previous sample {v, t}
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

  const now = performance.now();
  for (const out of document.querySelectorAll('output[data-stat]')) {
    const key = out.dataset.stat;
    const v = values[key];
    if (typeof v !== 'number') continue;
    out.dataset.value = String(v);
    out.textContent = key.endsWith('_per_second') ? decimal.format(v) : integer.format(v);
    push(key, v, now);
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

// push adds a sample to a chart's history: the value itself for a gauge or a
// rate, the rate since the previous sample for a counter (a counter only
// grows, so its raw line says little).
function push(key, v, now) {
  let plotted = v;
  if (COUNTERS.has(key)) {
    const prev = counters.get(key);
    counters.set(key, { v, t: now });
    // No rate before two samples; a counter that went down belongs to a
    // restarted process: start again from it.
    if (!prev || v < prev.v || now <= prev.t) return;
    plotted = ((v - prev.v) * 1000) / (now - prev.t);
  }
  const values = series.get(key) ?? [];
  values.push({ v: plotted, t: now });
  if (values.length > HISTORY) values.shift();
  series.set(key, values);
}

// niceCeil is the smallest 1, 2 or 5 times a power of ten at or above v, so
// the top of a chart reads as a round number.
function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// chartLabel formats a scale value: integers as such, small rates with their
// decimals.
function chartLabel(v) {
  return Number.isInteger(v) ? integer.format(v) : decimal.format(v);
}

// spark draws the recent values into the tile's chart, on a scale from zero
// (or the lowest value, if negative) to a round number above the highest, with
// a little headroom: a steady value reads as a line at a known height, and the
// labels beside the chart say what the top and bottom are worth.
function spark(key, values) {
  const svg = document.querySelector(`svg[data-spark="${key}"]`);
  const chart = svg?.closest('.chart');
  if (!chart || values.length === 0) return;
  const [w, h] = [120, 28];
  const vs = values.map((s) => s.v);
  const lo = Math.min(0, ...vs);
  const hi = lo + niceCeil((Math.max(...vs) - lo) * 1.05);
  setLabel(chart.querySelector('.y-max'), hi);
  setLabel(chart.querySelector('.y-min'), lo);
  const secs = Math.round((values.at(-1).t - values[0].t) / 1000);
  const unit = COUNTERS.has(key) ? 'per second, ' : '';
  chart.parentElement.querySelector('.caption').textContent = values.length < 2 ? `${unit}collecting…` : `${unit}last ${secs < 120 ? `${secs} s` : `${Math.round(secs / 60)} min`}`;
  if (values.length < 2) {
    svg.replaceChildren();
    return;
  }
  const step = w / (values.length - 1);
  const y = (v) => h - 1 - ((v - lo) / (hi - lo)) * (h - 2);
  const points = vs.map((v, i) => `${(i * step).toFixed(1)},${y(v).toFixed(1)}`);
  const ns = 'http://www.w3.org/2000/svg';
  const area = document.createElementNS(ns, 'polygon');
  area.setAttribute('points', `0,${h} ${points.join(' ')} ${w},${h}`);
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', points.join(' '));
  svg.replaceChildren(area, line);
}

function setLabel(el, v) {
  el.dataset.value = String(v);
  el.textContent = chartLabel(v);
}

// Each sparkline sits in a chart with its scale on the left and a caption
// below saying what is plotted over which window.
for (const svg of document.querySelectorAll('svg[data-spark]')) {
  const chart = document.createElement('div');
  chart.className = 'chart';
  const axis = document.createElement('div');
  axis.className = 'axis';
  for (const cls of ['y-max', 'y-min']) {
    const label = document.createElement('span');
    label.className = cls;
    label.textContent = '–';
    axis.append(label);
  }
  const caption = document.createElement('span');
  caption.className = 'caption';
  svg.replaceWith(chart);
  chart.append(axis, svg);
  chart.after(caption);
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

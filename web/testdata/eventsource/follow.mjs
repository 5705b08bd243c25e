// follow.mjs opens one stream with an npm EventSource and reports everything it
// dispatches as JSON lines on stdout, for web/eventsource_test.go:
//
//   node follow.mjs <dir> <package> <url>
//
// <dir> holds node_modules/<package> (.ci/eventsource installs it). The first line
// names the package's version; then one line per open, error, message and per
// resync, reauth and anchor event. It stops when its standard input closes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dir, pkg, url] = process.argv.slice(2);
const root = join(dir, 'node_modules', pkg);
const meta = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
// The package's ES module entry, as `import` would pick it.
const dot = meta.exports?.['.'];
const entry = typeof dot === 'string' ? dot : dot?.import ?? dot?.default ?? meta.module ?? meta.main;
const { EventSource } = await import(pathToFileURL(join(root, entry)).href);

const out = (rec) => process.stdout.write(`${JSON.stringify(rec)}\n`);
out({ kind: 'started', version: meta.version });
const es = new EventSource(url);
es.onopen = () => out({ kind: 'open' });
es.onerror = () => out({ kind: 'error', readyState: es.readyState });
es.onmessage = (e) => out({ kind: 'message', type: e.type, id: e.lastEventId, data: e.data });
for (const type of ['resync', 'reauth', 'anchor']) {
  es.addEventListener(type, (e) => out({ kind: type, type: e.type, id: e.lastEventId, data: e.data }));
}
process.stdin.on('end', () => {
  es.close();
  process.exit(0);
});
process.stdin.resume();

// Records benchmark: 100-record pages of GET /api/tables/{id}/records through
// the router and straight to the owning shard node (signed principal, as in
// tables_get.js), and 100-record create batches.
//
//   k6 run -e ROUTER_URL=... -e CLUSTER_SECRET=... -e PATH_KIND=router|direct \
//          -e QUERY=first|deep|filter|sort|sort_deep|filter_sort -e VUS=8 -e DURATION=20s \
//          loadtest/k6/records.js
//   k6 run ... -e QUERY=create loadtest/k6/records.js      (100-record POST batches)
//
// PATH_KIND=interleaved runs both paths in one run: DURATION is cut into
// slices of SLICE seconds (5), each iteration goes to the path of the slice
// it starts in, and the slices go router, direct, direct, router, then
// direct, router, router, direct, and so on (as goose/src/lib.rs's
// `interleaved::path_of`), so a drift of the machine's speed during the run
// weighs on both paths alike. The summary is then one line per path, each
// path's rps its requests over half of DURATION.
//
// FIXTURE (default ../.records-fixture.json) is written by records_setup.sh.
// The summary files go to RESULTS (loadtest/results, from the working
// directory); PAUSE (seconds, 0) paces each VU.
// `deep` pages resume from a bookmark near record 90,000 of the order, found
// in setup() by walking pages of 1000.
import http from 'k6/http';
import { check, sleep } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';
import { signedHeaders } from './sign.js';
import encoding from 'k6/encoding';
import { pathOf, seconds } from './interleave.js';
import { withSmoke } from './smoke.js';

const ROUTER_URL = (__ENV.ROUTER_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const SECRET = __ENV.CLUSTER_SECRET || '';
const PATH_KIND = __ENV.PATH_KIND || 'router';
const QUERY = __ENV.QUERY || 'first';
const VUS = parseInt(__ENV.VUS || '8', 10);
const DURATION = __ENV.DURATION || '20s';
const SLICE_MS = 1000 * parseFloat(__ENV.SLICE || '5');
// Each VU's pause after a request, in seconds (0: closed loop; the smoke run paces).
const PAUSE = parseFloat(__ENV.PAUSE || '0');
const RESULTS = __ENV.RESULTS || 'loadtest/results';
const fx = JSON.parse(open(__ENV.FIXTURE || '../.records-fixture.json'));

export const options = {
  scenarios: { run: { executor: 'constant-vus', vus: VUS, duration: DURATION } },
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(99)', 'max'],
  // The body is still read off the socket in full (and timed), but not
  // copied into a JavaScript string: k6 shares the benchmark's two cores,
  // and that copy of a 40 kB page cost it ~0.1 ms of CPU per request
  // (0.46-0.54 -> 0.37-0.42 ms per direct first page, measured 2026-11-22).
  // BODIES=1 keeps them (the runs before 2026-11-22 run 4 did).
  discardResponseBodies: __ENV.BODIES !== '1',
  thresholds: withSmoke(),
};

const PATHS = PATH_KIND === 'interleaved' ? ['router', 'direct'] : [PATH_KIND];
// Per path: page latency (= http_req_duration), requests, failures.
const metrics = Object.fromEntries(PATHS.map((p) => [p, {
  duration: new Trend(`page_${p}`, true), reqs: new Counter(`reqs_${p}`), failed: new Rate(`failed_${p}`),
}]));
const principal = encoding.b64encode(JSON.stringify({
  user_id: fx.user_id, key_id: fx.key_id, access: 'read_write', narrowed: false,
  database_id: fx.database_id, role: 'owner', support: false,
}), 'rawurl');

function headers(kind, method, url, body) {
  if (kind !== 'direct') {
    return { Authorization: `Bearer ${fx.token}`, 'Content-Type': 'application/json' };
  }
  return Object.assign(signedHeaders(SECRET, principal, method, url, body),
    { 'Content-Type': 'application/json' });
}

const filter = encodeURIComponent(JSON.stringify({ conditions: [
  { field: 'Status', op: 'is', value: 'doing' }, { field: 'Score', op: 'greater', value: 200 }] }));
const QUERIES = {
  first: '',
  deep: '',
  filter: `filter=${filter}`,
  sort: 'sort=-Score',
  sort_deep: 'sort=-Score',
  filter_sort: `filter=${filter}&sort=-Score`,
};
const records = (kind) => `${kind === 'direct' ? fx.shard_url : ROUTER_URL}/api/tables/${fx.table_id}/records`;

export function setup() {
  if (!QUERY.endsWith('deep') && QUERY !== 'deep') return { bookmark: null, t0: Date.now() };
  let bookmark = null;
  const q = QUERIES[QUERY];
  for (let i = 0; i < 90; i++) {
    const url = `${ROUTER_URL}/api/tables/${fx.table_id}/records?page_size=1000&fields=Name${q ? '&' + q : ''}${bookmark ? '&bookmark=' + encodeURIComponent(bookmark) : ''}`;
    const r = http.get(url, { headers: { Authorization: `Bearer ${fx.token}` }, timeout: '120s', responseType: 'text' });
    bookmark = r.json('bookmark');
  }
  return { bookmark, t0: Date.now() };
}

let n = 0;
export default function (data) {
  if (QUERY === 'create') {
    const recs = [];
    for (let i = 0; i < 100; i++) {
      n++;
      recs.push({ fields: { Name: `New ${__VU}-${n}`, Email: `n${__VU}-${n}@example.com`, Score: n % 1000,
        Due: '2025-05-05', Stamp: '2025-05-05T10:00:00Z', Status: 'doing', Notes: 'created by k6', Owner: [fx.owner] } });
    }
    const body = JSON.stringify({ records: recs });
    const url = records(PATH_KIND);
    const r = http.post(url, body, { headers: headers(PATH_KIND, 'POST', url, body) });
    check(r, { '200': (x) => x.status === 200 });
    if (PAUSE > 0) sleep(PAUSE);
    return;
  }
  const kind = PATHS.length === 1 ? PATHS[0] : pathOf(Math.floor((Date.now() - data.t0) / SLICE_MS));
  let q = QUERIES[QUERY];
  if (data.bookmark) q += `${q ? '&' : ''}bookmark=${encodeURIComponent(data.bookmark)}`;
  const url = `${records(kind)}?page_size=100${q ? '&' + q : ''}`;
  const r = http.get(url, { headers: headers(kind, 'GET', url) });
  const ok = check(r, { '200': (x) => x.status === 200 });
  const m = metrics[kind];
  m.duration.add(r.timings.duration);
  m.reqs.add(1);
  m.failed.add(!ok);
  if (PAUSE > 0) sleep(PAUSE);
}

export function handleSummary(d) {
  if (QUERY === 'create') {
    const m = d.metrics.http_req_duration.values;
    const out = { path: PATH_KIND, query: QUERY, vus: VUS, duration: DURATION,
      rps: d.metrics.http_reqs.values.rate, failed: d.metrics.http_req_failed.values.rate,
      med_ms: m.med, p90_ms: m['p(90)'], p99_ms: m['p(99)'], max_ms: m.max };
    return { stdout: JSON.stringify(out) + '\n',
      [`${RESULTS}/records-${PATH_KIND}-${QUERY}.json`]: JSON.stringify(out, null, 1) };
  }
  // The pages are read for DURATION after setup() (which finds the deep
  // bookmark); each path of an interleaved run has half of it.
  const secs = seconds(DURATION) / PATHS.length;
  const lines = [];
  const files = {};
  for (const p of PATHS) {
    const m = d.metrics[`page_${p}`] ? d.metrics[`page_${p}`].values : {};
    const reqs = d.metrics[`reqs_${p}`] ? d.metrics[`reqs_${p}`].values.count : 0;
    const out = { path: p, query: QUERY, vus: VUS, duration: DURATION, rps: reqs / secs,
      failed: d.metrics[`failed_${p}`] ? d.metrics[`failed_${p}`].values.rate : 1,
      med_ms: m.med, p90_ms: m['p(90)'], p99_ms: m['p(99)'], max_ms: m.max };
    if (PATHS.length > 1) out.interleaved = `${SLICE_MS / 1000}s slices`;
    lines.push(JSON.stringify(out));
    files[`${RESULTS}/records-${p}-${QUERY}.json`] = JSON.stringify(out, null, 1);
  }
  return { stdout: lines.join('\n') + '\n', ...files };
}

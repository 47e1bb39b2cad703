// GET /api/tables/{id} through the router and, side by side in the same run,
// straight to the owning shard node with the principal the router would sign.
//
//   k6 run -e ROUTER_URL=... -e CLUSTER_SECRET=... -e RATE=500 -e DURATION=60s \
//          loadtest/k6/tables_get.js
//
// MODE (default "compare"):
//   compare   scenarios `router` and `direct`, constant-arrival-rate, RATE
//             iterations/s each (RATE_DIRECT overrides the direct one), DURATION
//   saturate  closed loop through the router only: VUS virtual users, no think
//             time, DURATION; the throughput it reaches is the saturated rate
//   interleaved  one constant-arrival-rate scenario of RATE iterations/s for
//             DURATION whose requests go through the router or straight to the
//             shard by time slice: SLICE seconds (5) each, router, direct,
//             direct, router, then the mirror image (as goose's
//             `interleaved::path_of`), so the box carries RATE at every moment
//             and a drift of its speed weighs on both paths alike; each path's
//             figures cover its own half of DURATION
//   router    the `router` scenario of compare alone (RATE, DURATION)
//   hold      VUS (default 200) constant virtual users through the router, each
//             pacing itself to PACE_MS between requests, so the router holds VUS
//             concurrent keep-alive connections (for its resident memory)
//
// Floor experiment (results/router-floor/nullproxy.c): with
// PROXY_URL set, the `router` requests go to that proxy instead, carrying
// the direct path's signed headers, so the shard behind it does the same
// work as for a direct request; FIXTURE_SHARD (a shard URL) keeps only the
// fixtures on that shard (nullproxy forwards to one shard).
//
// FIXTURES (default ../.fixtures.json relative to this file) is written by
// loadtest/setup.sh. SUMMARY_JSON (default loadtest/results/k6-<MODE>.json,
// relative to the working directory) receives the machine-readable summary.
import http from 'k6/http';
import { check, sleep } from 'k6';
import { signedHeaders } from './sign.js';
import encoding from 'k6/encoding';
import exec from 'k6/execution';
import { pathOf, seconds } from './interleave.js';
import { withSmoke } from './smoke.js';

const MODE = __ENV.MODE || 'compare';
const ROUTER_URL = (__ENV.ROUTER_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const CLUSTER_SECRET = __ENV.CLUSTER_SECRET || '';
const RATE = parseInt(__ENV.RATE || '200', 10);
const RATE_DIRECT = parseInt(__ENV.RATE_DIRECT || String(RATE), 10);
const DURATION = __ENV.DURATION || '30s';
const VUS = parseInt(__ENV.VUS || (MODE === 'hold' ? '200' : '16'), 10);
const PACE_MS = parseInt(__ENV.PACE_MS || '100', 10);
const SLICE_MS = 1000 * parseFloat(__ENV.SLICE || '5');
const SUMMARY_JSON = __ENV.SUMMARY_JSON || `loadtest/results/k6-${MODE}.json`;

const PROXY_URL = (__ENV.PROXY_URL || '').replace(/\/$/, '');
const fixtures = JSON.parse(open(__ENV.FIXTURES || '../.fixtures.json'))
  .filter((f) => !__ENV.FIXTURE_SHARD || f.shard_url.replace(/\/$/, '') === __ENV.FIXTURE_SHARD.replace(/\/$/, ''));
if (!Array.isArray(fixtures) || fixtures.length === 0) {
  throw new Error('no fixtures: run loadtest/setup.sh first');
}
const BOTH = MODE === 'compare' || MODE === 'interleaved';
if (BOTH && !CLUSTER_SECRET) {
  throw new Error('CLUSTER_SECRET is required to sign the direct requests');
}

// Pre-encode the principal of every fixture once: only the timestamp and the
// signature change per request.
const prepared = fixtures.map((f) => {
  const principal = JSON.stringify({
    user_id: f.user_id,
    key_id: f.key_id,
    access: 'read_write',
    narrowed: false,
    database_id: f.database_id,
    role: 'owner',
    support: false,
  });
  return {
    routerUrl: `${PROXY_URL || ROUTER_URL}/api/tables/${f.table_id}`,
    directUrl: `${f.shard_url.replace(/\/$/, '')}/api/tables/${f.table_id}`,
    auth: { Authorization: `Bearer ${f.token}` },
    principal: encoding.b64encode(principal, 'rawurl'),
  };
});

function pick() {
  // Round-robin over the keys, across every VU of the scenario.
  return prepared[exec.scenario.iterationInTest % prepared.length];
}

const trendStats = ['avg', 'min', 'med', 'p(90)', 'p(99)', 'max'];

function scenarios() {
  if (MODE === 'saturate') {
    return {
      router: { executor: 'constant-vus', exec: 'viaRouter', vus: VUS, duration: DURATION },
    };
  }
  if (MODE === 'hold') {
    return {
      router: { executor: 'constant-vus', exec: 'viaRouterPaced', vus: VUS, duration: DURATION },
    };
  }
  const common0 = {
    executor: 'constant-arrival-rate',
    timeUnit: '1s',
    duration: DURATION,
    preAllocatedVUs: Math.max(20, Math.ceil(RATE / 50)),
    maxVUs: Math.max(200, Math.ceil(RATE / 5)),
  };
  const common = common0;
  if (MODE === 'router') {
    return { router: Object.assign({}, common, { exec: 'viaRouter', rate: RATE }) };
  }
  if (MODE === 'interleaved') {
    return { interleaved: Object.assign({}, common, { exec: 'interleaved', rate: RATE }) };
  }
  return {
    router: Object.assign({}, common, { exec: 'viaRouter', rate: RATE }),
    direct: Object.assign({}, common, {
      exec: 'direct',
      rate: RATE_DIRECT,
      preAllocatedVUs: Math.max(20, Math.ceil(RATE_DIRECT / 50)),
      maxVUs: Math.max(200, Math.ceil(RATE_DIRECT / 5)),
    }),
  };
}

function thresholds() {
  // Thresholds on tagged sub-metrics make k6 keep them per scenario, so the
  // summary has p50/p99 for `router` and `direct` separately.
  // Interleaved: per `path` tag instead (one scenario carries both).
  const t = {};
  const names = BOTH ? ['router', 'direct'] : ['router'];
  for (const s of names) {
    const tag = MODE === 'interleaved' ? `path:${s}` : `scenario:${s}`;
    t[`http_req_duration{${tag}}`] = ['p(99)<1000'];
    t[`http_req_failed{${tag}}`] = ['rate<0.01'];
    t[`http_reqs{${tag}}`] = ['count>0'];
    t[`dropped_iterations{scenario:${MODE === 'interleaved' ? 'interleaved' : s}}`] = ['count>=0'];
  }
  return t;
}

export const options = {
  scenarios: scenarios(),
  thresholds: withSmoke(thresholds()),
  summaryTrendStats: trendStats,
  discardResponseBodies: true,
  noCookiesReset: true,
  // One connection per VU, kept alive: the same as a pooled client.
  noConnectionReuse: false,
};

export function setup() {
  return { t0: Date.now() };
}

export function viaRouter() {
  const p = pick();
  const headers = PROXY_URL ? signedHeadersFor(p, p.routerUrl) : p.auth;
  const r = http.get(p.routerUrl, { headers, tags: { path: 'router' } });
  check(r, { 'router 200': (res) => res.status === 200 });
}

// The router's signature headers for p's principal, signed now for `url`
// (re-signed per request with the current timestamp, valid +-300 s).
function signedHeadersFor(p, url) {
  return signedHeaders(CLUSTER_SECRET, p.principal, 'GET', url);
}

export function interleaved(data) {
  if (pathOf(Math.floor((Date.now() - data.t0) / SLICE_MS)) === 'router') viaRouter();
  else direct();
}

export function viaRouterPaced() {
  const p = prepared[(exec.vu.idInTest + exec.vu.iterationInScenario) % prepared.length];
  const r = http.get(p.routerUrl, { headers: p.auth });
  check(r, { 'router 200': (res) => res.status === 200 });
  sleep(PACE_MS / 1000);
}

export function direct() {
  const p = pick();
  const r = http.get(p.directUrl, { headers: signedHeadersFor(p, p.directUrl), tags: { path: 'direct' } });
  check(r, { 'direct 200': (res) => res.status === 200 });
}

function val(data, metric, stat) {
  const m = data.metrics[metric];
  if (!m || !m.values || m.values[stat] === undefined) return null;
  return m.values[stat];
}

function fmt(v, digits) {
  return v === null || v === undefined ? '-' : v.toFixed(digits);
}

export function handleSummary(data) {
  const names = BOTH ? ['router', 'direct'] : ['router'];
  const inter = MODE === 'interleaved';
  const rows = {};
  for (const s of names) {
    const tag = inter ? `path:${s}` : `scenario:${s}`;
    const d = `http_req_duration{${tag}}`;
    const requests = val(data, `http_reqs{${tag}}`, 'count');
    rows[s] = {
      requests,
      // Interleaved: each path had half of DURATION.
      rate: inter ? requests / (seconds(DURATION) / 2) : val(data, `http_reqs{${tag}}`, 'rate'),
      failed_rate: val(data, `http_req_failed{${tag}}`, 'rate'),
      // Interleaved: the one scenario's, for both paths together.
      dropped: val(data, `dropped_iterations{scenario:${inter ? 'interleaved' : s}}`, 'count') || 0,
      avg_ms: val(data, d, 'avg'),
      p50_ms: val(data, d, 'med'),
      p90_ms: val(data, d, 'p(90)'),
      p99_ms: val(data, d, 'p(99)'),
      max_ms: val(data, d, 'max'),
    };
  }
  const out = {
    mode: MODE,
    rate_per_scenario: MODE === 'compare' ? { router: RATE, direct: RATE_DIRECT } : inter ? { router: RATE, direct: RATE } : null,
    slice_s: inter ? SLICE_MS / 1000 : null,
    duration: DURATION,
    vus: BOTH ? null : VUS,
    fixtures: fixtures.length,
    scenarios: rows,
  };
  if (BOTH && rows.router.p50_ms !== null && rows.direct.p50_ms !== null) {
    out.added_ms = {
      p50: rows.router.p50_ms - rows.direct.p50_ms,
      p99: rows.router.p99_ms - rows.direct.p99_ms,
    };
  }

  let text = `\nGET /api/tables/{id}  mode=${MODE}  duration=${DURATION}  keys=${fixtures.length}\n`;
  text += 'scenario  requests     req/s  failed  dropped   p50 ms   p90 ms   p99 ms   max ms\n';
  for (const s of names) {
    const r = rows[s];
    text += `${s.padEnd(8)} ${String(r.requests ?? '-').padStart(9)} ${fmt(r.rate, 1).padStart(9)} `
      + `${fmt(r.failed_rate === null ? null : r.failed_rate * 100, 2).padStart(6)}% ${String(r.dropped).padStart(8)} `
      + `${fmt(r.p50_ms, 3).padStart(8)} ${fmt(r.p90_ms, 3).padStart(8)} ${fmt(r.p99_ms, 3).padStart(8)} ${fmt(r.max_ms, 3).padStart(8)}\n`;
  }
  if (out.added_ms) {
    text += `router adds: p50 ${fmt(out.added_ms.p50, 3)} ms, p99 ${fmt(out.added_ms.p99, 3)} ms\n`;
  }
  const result = { stdout: text };
  result[SUMMARY_JSON] = JSON.stringify(out, null, 2);
  result[SUMMARY_JSON.replace(/\.json$/, '') + '.full.json'] = JSON.stringify(data);
  return result;
}

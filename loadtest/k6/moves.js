// The records load for the move benchmark (moves_bench.py): writes and reads
// of one database through the router at a constant arrival rate while the
// database moves between shards. Every request is logged as one JSON line
// on the console ({s, e, op, st}: start and end in unix ms, op, HTTP status),
// so moves_bench.py can find the longest request around each cutover;
// run it with `--console-output <file>`.
//
//   k6 run -e ROUTER_URL=... -e FIXTURE=loadtest/.moves-fixture.json \
//          -e ROWS=10000 -e RATE=50 -e DURATION=600s \
//          --console-output /tmp/reqs.log loadtest/k6/moves.js
//
// The mix, per 10 iterations: 4 reads (the first page of 20 records),
// 3 creates (one record, the shape records_setup.sh loads), 3 updates
// (PATCH of Score and Notes of a random record of the fixture: its ids are
// records_setup.sh's, 'rec_' + md5(g)[0:2] + hex(g) padded to 10).
// FIXTURE is written by records_setup.sh (OUT=...).
import http from 'k6/http';
import { check } from 'k6';
import crypto from 'k6/crypto';
import { Counter } from 'k6/metrics';
import { withSmoke } from './smoke.js';

const ROUTER_URL = (__ENV.ROUTER_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const RATE = parseInt(__ENV.RATE || '50', 10);
const DURATION = __ENV.DURATION || '60s';
const ROWS = parseInt(__ENV.ROWS || '10000', 10);
const fx = JSON.parse(open(__ENV.FIXTURE || '../.moves-fixture.json'));

export const options = {
  scenarios: {
    load: {
      executor: 'constant-arrival-rate', rate: RATE, timeUnit: '1s', duration: DURATION,
      preAllocatedVUs: Math.max(10, Math.ceil(RATE / 5)), maxVUs: Math.max(50, RATE * 4),
    },
  },
  discardResponseBodies: false,
  summaryTrendStats: ['med', 'p(99)', 'max'],
  thresholds: withSmoke(),
};

const acked = new Counter('creates_acked');
const failed = new Counter('requests_failed');
const headers = { Authorization: `Bearer ${fx.token}`, 'Content-Type': 'application/json' };
const url = `${ROUTER_URL}/api/tables/${fx.table_id}/records`;

function recordId(g) {
  return 'rec_' + crypto.md5(String(g), 'hex').slice(0, 2) + g.toString(16).padStart(10, '0');
}

let n = 0;
export default function () {
  n++;
  const slot = (__VU * 7 + n) % 10;
  let op, r;
  const s = Date.now();
  if (slot < 4) {
    op = 'read';
    r = http.get(`${url}?page_size=20`, { headers, responseType: 'none', timeout: '30s' });
  } else if (slot < 7) {
    op = 'create';
    const body = JSON.stringify({ records: [{ fields: {
      Name: `Moved ${__VU}-${n}`, Email: `m${__VU}-${n}@example.com`, Score: n % 1000,
      Due: '2025-05-05', Stamp: '2025-05-05T10:00:00Z', Status: 'doing', Notes: 'created during a move',
      Owner: [fx.owner] } }] });
    r = http.post(url, body, { headers, responseType: 'none', timeout: '30s' });
    if (r.status === 200) acked.add(1);
  } else {
    op = 'update';
    const g = 1 + Math.floor(Math.random() * ROWS);
    const body = JSON.stringify({ records: [{ id: recordId(g), fields: { Score: n % 1000, Notes: `updated ${__VU}-${n}` } }] });
    r = http.patch(url, body, { headers, responseType: 'none', timeout: '30s' });
  }
  const e = Date.now();
  if (!check(r, { '200': (x) => x.status === 200 })) failed.add(1, { op, status: String(r.status) });
  console.log(JSON.stringify({ s, e, op, st: r.status }));
}

export function handleSummary(d) {
  const m = d.metrics;
  const out = {
    requests: m.http_reqs ? m.http_reqs.values.count : 0,
    creates_acked: m.creates_acked ? m.creates_acked.values.count : 0,
    requests_failed: m.requests_failed ? m.requests_failed.values.count : 0,
    med_ms: m.http_req_duration.values.med, p99_ms: m.http_req_duration.values['p(99)'],
    max_ms: m.http_req_duration.values.max,
  };
  return { stdout: JSON.stringify(out) + '\n' };
}

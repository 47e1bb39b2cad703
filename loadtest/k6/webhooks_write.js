// Webhook write cost: single-record creates (OP=create) or updates
// (OP=update) through the router on a table without a webhook (`plain`)
// and on one with a matching webhook (`hooked`), interleaved in one run:
// one constant arrival stream of RATE writes/s for DURATION, each write
// going to the table of the slice (SLICE seconds) it starts in, slices in
// interleave.js's order (plain takes the "router" slices, hooked the
// "direct" ones), so a drift of the machine's speed weighs on both alike.
//
//   k6 run -e FIXTURE=... -e ROUTER_URL=... -e OP=create -e RATE=100 -e DURATION=60s \
//          loadtest/k6/webhooks_write.js
//
// FIXTURE is written by webhooks_write.sh: {token, tables:{plain,hooked},
// records:{plain:[ids], hooked:[ids]}}. Prints one JSON line: each
// table's median, p90, p99 and count, and median_diff_ms (hooked - plain).
import http from 'k6/http';
import { check } from 'k6';
import { Trend, Counter, Rate } from 'k6/metrics';
import { pathOf } from './interleave.js';
import { withSmoke } from './smoke.js';

const ROUTER_URL = (__ENV.ROUTER_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const OP = __ENV.OP || 'create';
const RATE = parseInt(__ENV.RATE || '100', 10);
const DURATION = __ENV.DURATION || '60s';
const SLICE_MS = 1000 * parseFloat(__ENV.SLICE || '5');
const fx = JSON.parse(open(__ENV.FIXTURE));
const TABLES = ['plain', 'hooked'];

export const options = {
  scenarios: {
    writes: {
      executor: 'constant-arrival-rate', rate: RATE, timeUnit: '1s', duration: DURATION,
      preAllocatedVUs: Math.max(4, Math.ceil(RATE / 20)), maxVUs: Math.max(16, RATE),
    },
  },
  summaryTrendStats: ['med', 'p(90)', 'p(99)'],
  discardResponseBodies: true,
  thresholds: withSmoke(),
};

const metrics = Object.fromEntries(TABLES.map((t) => [t, {
  duration: new Trend(`write_${t}`, true), count: new Counter(`writes_${t}`), failed: new Rate(`failed_${t}`),
}]));
const headers = { Authorization: `Bearer ${fx.token}`, 'Content-Type': 'application/json' };

export function setup() {
  return { t0: Date.now() };
}

let n = 0;
export default function (data) {
  const table = pathOf(Math.floor((Date.now() - data.t0) / SLICE_MS)) === 'router' ? 'plain' : 'hooked';
  const url = `${ROUTER_URL}/api/tables/${fx.tables[table]}/records`;
  n++;
  let r;
  if (OP === 'update') {
    const ids = fx.records[table];
    const id = ids[(__VU * 7919 + n) % ids.length];
    r = http.patch(url, JSON.stringify({ records: [{ id, fields: { Amount: n, Name: `u ${__VU}-${n}` } }] }), { headers });
  } else {
    r = http.post(url, JSON.stringify({ records: [{ fields: { Name: `c ${__VU}-${n}`, Amount: n, Status: 'Open' } }] }), { headers });
  }
  const ok = check(r, { '200': (x) => x.status === 200 });
  const m = metrics[table];
  m.duration.add(r.timings.duration);
  m.count.add(1);
  m.failed.add(!ok);
}

export function handleSummary(d) {
  const of = (t) => {
    const m = d.metrics[`write_${t}`] ? d.metrics[`write_${t}`].values : {};
    return {
      med_ms: m.med, p90_ms: m['p(90)'], p99_ms: m['p(99)'],
      count: d.metrics[`writes_${t}`] ? d.metrics[`writes_${t}`].values.count : 0,
      failed: d.metrics[`failed_${t}`] ? d.metrics[`failed_${t}`].values.rate : 1,
    };
  };
  const plain = of('plain');
  const hooked = of('hooked');
  const out = {
    op: OP, rate: RATE, duration: DURATION, slice_s: SLICE_MS / 1000, plain, hooked,
    median_diff_ms: hooked.med_ms - plain.med_ms,
  };
  return { stdout: JSON.stringify(out) + '\n' };
}

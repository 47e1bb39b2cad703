// SMOKE=1 (deploy/loadtest-smoke runs every script for a few seconds that
// way): every check must pass and at least one request must have been sent,
// or k6 ends with exit status 99. No timing assertion in a smoke run: a
// latency threshold of the script keeps its sub-metric (its summary reads
// it) but cannot fail. Without SMOKE, the script's own thresholds.
export function withSmoke(thresholds) {
  const t = Object.assign({}, thresholds || {});
  if (__ENV.SMOKE !== '1') return t;
  for (const k of Object.keys(t)) {
    if (k.startsWith('http_req_duration')) t[k] = ['max>=0'];
  }
  return Object.assign(t, { checks: ['rate==1'], http_reqs: ['count>0'] });
}

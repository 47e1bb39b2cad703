// What records.js and tables_get.js share for measuring two paths
// interleaved in one run (goose's counterpart: goose/src/lib.rs,
// `interleaved`).

// The path of slice i: blocks of four, router, direct, direct, router,
// then the mirror image direct, router, router, direct. Over every eight
// slices each path has four at the same mean position, so a steady drift
// of the machine's speed cancels out.
export function pathOf(i) {
  const routerFirst = Math.floor(i / 4) % 2 === 0;
  const outer = i % 4 === 0 || i % 4 === 3;
  return outer === routerFirst ? 'router' : 'direct';
}

// A k6 duration ('30s', '2m', '1m30s') in seconds.
export function seconds(text) {
  let total = 0;
  for (const [, n, unit] of text.matchAll(/([\d.]+)(h|m|s)/g)) total += parseFloat(n) * { h: 3600, m: 60, s: 1 }[unit];
  return total;
}

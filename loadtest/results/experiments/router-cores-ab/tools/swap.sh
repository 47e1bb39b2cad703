#!/usr/bin/env bash
# swap.sh BINARY [EXTRA_ENV=...]  : restart the bench router with BINARY, same environment
set -euo pipefail
D=/work/main/.dev-cluster-bench
bin="$1"; shift
pid=$(cat $D/run/router.pid)
if [ ! -f /tmp/rbench/router.env ]; then
  tr '\0' '\n' < /proc/$pid/environ | grep -v '^$' > /tmp/rbench/router.env
fi
kill "$pid" 2>/dev/null || true; for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
mapfile -t E < /tmp/rbench/router.env
(cd $D && exec nohup env -i "${E[@]}" "$@" "$bin" </dev/null >>$D/logs/router.log 2>&1) &
echo $! > $D/run/router.pid
for i in $(seq 50); do curl -sf http://127.0.0.1:35080/api/health >/dev/null && break; sleep 0.2; done
echo "router pid $(cat $D/run/router.pid) running $bin $*"

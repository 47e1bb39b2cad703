"""Helpers the capacity scripts share (shard10k_fixture.py, shard10k_bench.py,
shard10k_floor.py): a dev cluster's env file read, and latency summaries.
Imported from the scripts' own directory (`python3 loadtest/capacity/X.py`
puts it first on sys.path)."""


def load_env(path):
    """The variables of a dev cluster's env file (`export K='v'` lines)."""
    env = {}
    for line in open(path):
        line = line.strip()
        if line.startswith("export "):
            line = line[len("export "):]
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        if v.startswith("'") and v.endswith("'"):
            v = v[1:-1].replace("'\\''", "'")
        env[k] = v
    return env


def pct(xs, p):
    """The p-th percentile of xs (the sample at rank floor(n * p / 100))."""
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p / 100))], 2)


def summary(xs):
    """n, p50, p90, p99, max and mean of latencies in ms."""
    return {"n": len(xs), "p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99),
            "max": round(max(xs), 2), "mean": round(sum(xs) / len(xs), 2)}

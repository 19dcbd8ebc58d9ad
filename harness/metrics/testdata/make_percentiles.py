#!/usr/bin/env python3
"""Reference values from NumPy for harness/metrics tests.

Writes one JSON file with
  - np.percentile (default method "linear"), np.mean and np.max of fixed sample
    sets: n = 0, 1, 2, ties, all-equal, negatives, and large generated sets;
  - the two-sided 95% Student t critical values t_{0.975, df} used for the
    confidence intervals of --repeat rounds, computed by Gauss-Legendre
    quadrature of the t density (numpy only, no scipy) and bisection.

Large sets are not stored: both this script and the Go test generate them with
the same SplitMix64 sequence and IEEE-exact arithmetic (no transcendental
functions), so only their statistics go into the JSON.

Run (NumPy required):
    python3 harness/metrics/testdata/make_percentiles.py --out harness/metrics/testdata/percentiles.json
"""
import argparse
import json
import math
import platform

import numpy as np

PERCENTILES = [0, 1, 5, 10, 12.5, 25, 33.3, 50, 66.7, 75, 90, 95, 99, 99.9, 100]

MASK = (1 << 64) - 1


def splitmix(seed, n):
    """n unit floats u in [0, 1): the top 53 bits of SplitMix64 outputs."""
    x = seed & MASK
    out = []
    for _ in range(n):
        x = (x + 0x9E3779B97F4A7C15) & MASK
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        out.append((z >> 11) * 2.0**-53)
    return out


# Each generator maps u to a sample with exactly rounded IEEE operations, in
# the order written (the Go test mirrors these expressions).
GENERATORS = {
    # heavy right tail, like latencies in ms
    "cubed": lambda u: u * u * u * 1000.0,
    # many ties: 50 distinct values
    "ties50": lambda u: float(math.floor(u * 50.0)),
    # both signs, large magnitude
    "signed": lambda u: (u - 0.5) * 1e6,
}

SETS = [
    {"name": "empty", "values": []},
    {"name": "one", "values": [3.7]},
    {"name": "two", "values": [2.0, 1.0]},
    {"name": "two equal", "values": [4.25, 4.25]},
    {"name": "three", "values": [10.0, 0.5, 7.25]},
    {"name": "ties", "values": [1, 1, 1, 2, 2, 3, 3, 3, 3, 5]},
    {"name": "all equal", "values": [7.5] * 11},
    {"name": "negatives", "values": [-3.0, -1.5, 0.0, 2.25, -0.125, 9.0, -7.75]},
    {"name": "tiny gaps", "values": [1.0, 1.0 + 2**-52, 1.0 + 2**-51, 1.0 + 3 * 2**-52]},
    {"name": "0..100", "values": [float(i) for i in range(101)]},
    {"name": "cubed 1000", "gen": {"kind": "cubed", "seed": 1, "n": 1000}},
    {"name": "cubed 100001", "gen": {"kind": "cubed", "seed": 7, "n": 100001}},
    {"name": "ties50 100000", "gen": {"kind": "ties50", "seed": 11, "n": 100000}},
    {"name": "signed 99999", "gen": {"kind": "signed", "seed": 3, "n": 99999}},
]


def values_of(s):
    if "values" in s:
        return [float(v) for v in s["values"]]
    g = s["gen"]
    f = GENERATORS[g["kind"]]
    return [f(u) for u in splitmix(g["seed"], g["n"])]


def stats(values):
    if not values:
        return {"percentiles": None, "mean": None, "max": None}
    arr = np.asarray(values, dtype=np.float64)
    return {
        "percentiles": [float(np.percentile(arr, p)) for p in PERCENTILES],
        "mean": float(arr.mean()),
        "max": float(arr.max()),
    }


def t_two_sided_95(df):
    """t with P(|T| <= t) = 0.95 for Student's t with df degrees of freedom."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    nodes, weights = np.polynomial.legendre.leggauss(400)

    def central_mass(t):  # P(0 <= T <= t) by Gauss-Legendre on [0, t]
        x = (nodes + 1.0) * (t / 2.0)
        pdf = np.exp(log_norm - (df + 1) / 2 * np.log1p(x * x / df))
        return float(np.sum(weights * pdf) * (t / 2.0))

    lo, hi = 0.0, 20.0  # t_{0.975,1} = 12.706...
    for _ in range(200):
        mid = (lo + hi) / 2
        if central_mass(mid) < 0.475:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = {
        "numpy": np.__version__,
        "python": platform.python_version(),
        "method": "np.percentile default (linear); np.mean; np.max; float64",
        "percentiles_p": PERCENTILES,
        "sets": [],
        "t975": [],
    }
    for s in SETS:
        entry = {"name": s["name"]}
        entry.update({k: s[k] for k in ("values", "gen") if k in s})
        entry.update(stats(values_of(s)))
        out["sets"].append(entry)
    for df in list(range(1, 31)) + [40, 60, 120, 1000]:
        out["t975"].append({"df": df, "t": t_two_sided_95(df)})
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

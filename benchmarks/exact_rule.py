"""Issue 51's rule for re-recording an algorithm's stores once: is a new kernel no
farther from the exact posterior of the same releases than the old one?

Three stores of Section 6's configuration (n = N = 1000, eps 1, 2, 5, 10, ``--runs``
runs) are compared, each against the exact grid posterior (eq. 5) of its own runs'
releases and intervals (kept in the store; Proposition 1 makes the adaptive intervals a
function of the past releases, so the exact posterior of an adaptive run is that of
its stored (y, l, r)):

* ``old``: the old kernel;
* ``reseeded``: the old kernel with another algorithm seed (the same data);
* ``new``: the new kernel.

Per run and parameter: z = (sampler's median - exact median) / (exact IQR / 1.349),
and the exact posterior mass of the sampler's 90% interval [q05, q95].  Pooled per
method and parameter over eps, a kernel passes against ``old`` when

1. the one-sided 95% bootstrap upper bound (runs resampled in pairs, by (eps, run)) of
   RMS(z) / RMS(z_old) is at most ``RATIO`` = 1.25;
2. its mean 90%-interval mass is within ``MASS`` = 0.03 of the old kernel's.

The rule is used only if ``reseeded`` passes it (a gate a correct rerun fails decides
nothing); ``compare`` prints both and exits 1 unless both pass.

    # the old code (a checkout of the starting commit), then the new:
    python benchmarks/exact_rule.py run --out eq/old
    python benchmarks/exact_rule.py run --out eq/reseeded --algorithm-seed 1
    python benchmarks/exact_rule.py run --out eq/new
    python benchmarks/exact_rule.py compare eq/old eq/reseeded eq/new

More runs are pooled from stores of other seeds (``run --seed 1 ...``, then ``compare
eq/old,eq/old1 eq/reseeded,eq/reseeded1 eq/new,eq/new1``; a reseeded store of seed s
takes ``--algorithm-seed`` other than s).  ``benchmarks/results/exact_rule/`` keeps the
per-run rows of the 60-run stores of issue 51's note (seed 0).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

RATIO, MASS, LEVEL, B = 1.25, 0.03, 0.95, 10_000
METHODS = ("smc-adaptive", "smc-fixed")
IQR_SD = 1.349  # the IQR of a normal in sds


def _exact_row(args):
    """z and the 90% mass of one run against the exact posterior of its releases."""
    from dpbook.posterior import exact_posterior

    key, y, l, r, eps, params, q05, q50, q95 = args
    post = exact_posterior(y, l, r, eps)
    q = post.quantile([0.25, 0.5, 0.75])
    row = dict(zip(("method", "eps", "run"), key))
    lo, hi = post.cdf(q05), post.cdf(q95)
    for j, p in enumerate(params):
        row[f"z_{p}"] = (q50[j] - q[1, j]) / ((q[2, j] - q[0, j]) / IQR_SD)
        row[f"mass_{p}"] = hi[j] - lo[j]
    return row


def against_exact(store, workers=2):
    """One row per online task of ``store``: z and 90% mass per parameter (cached in
    the store as ``exact_rule.parquet``; ``store`` may be such a file itself)."""
    from dpbook.experiment import load_results

    cache = Path(store)
    cache = cache if cache.suffix == ".parquet" else cache / "exact_rule.parquet"
    if cache.exists():
        return pd.read_parquet(cache)
    est, tr = load_results(store)
    params = tuple(c[:-4] for c in est.columns if c.endswith("_hat"))
    jobs = []
    for row in est[est.method.isin(METHODS)].itertuples():
        arr = tr.get(row.method, row.eps, row.run)
        qs = [np.array([getattr(row, f"{p}_q{k:02d}") for p in params]) for k in (5, 50, 95)]
        jobs.append(((row.method, row.eps, row.run), arr["y"], arr["l"], arr["r"], row.eps,
                     params, *qs))
    with ProcessPoolExecutor(workers) as pool:
        df = pd.DataFrame(list(pool.map(_exact_row, jobs, chunksize=4)))
    df.to_parquet(cache)
    return df


def pooled(stores):
    """The rows of several stores (comma-separated; each with its own ``--seed``, so
    other data), told apart by their position in the list."""
    return pd.concat([against_exact(s).assign(root=i) for i, s in enumerate(stores.split(","))],
                     ignore_index=True)


def judge(old, other, rng=0):
    """Per (method, param): RMS z of both, the bootstrap upper bound of their ratio, the
    mean 90% masses, and whether ``other`` passes against ``old``."""
    rng = np.random.default_rng(rng)
    key = ["root", "method", "eps", "run"]
    both = old.merge(other, on=key, suffixes=("_old", "_new"))
    if len(both) != len(old) or len(both) != len(other):
        raise ValueError("the stores do not hold the same tasks (method, eps, run)")
    params = [c[2:] for c in old.columns if c.startswith("z_")]
    rows = []
    for method, g in both.groupby("method"):
        for p in params:
            zo, zn = g[f"z_{p}_old"].to_numpy() ** 2, g[f"z_{p}_new"].to_numpy() ** 2
            idx = rng.integers(0, len(g), (B, len(g)))
            boot = np.sqrt(zn[idx].mean(axis=1) / zo[idx].mean(axis=1))
            mo, mn = g[f"mass_{p}_old"].mean(), g[f"mass_{p}_new"].mean()
            up = float(np.quantile(boot, LEVEL))
            rows.append(dict(method=method, param=p, runs=len(g),
                             rms_z_old=np.sqrt(zo.mean()), rms_z_new=np.sqrt(zn.mean()),
                             ratio=np.sqrt(zn.mean() / zo.mean()), ratio_upper=up,
                             mass_old=mo, mass_new=mn,
                             ok=up <= RATIO and abs(mn - mo) <= MASS))
    return pd.DataFrame(rows)


def run(args):
    from dpbook.experiment import run_experiment

    df = run_experiment(out=args.out, runs=args.runs, methods=METHODS, quartiles=True,
                        seed=args.seed, algorithm_seed=args.algorithm_seed,
                        workers=args.workers)
    print(f"{len(df)} tasks in {args.out}; seconds by method:")
    print(df.groupby("method").seconds.sum().round(1).to_string())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run Section 6's online methods into a store")
    r.add_argument("--out", required=True)
    r.add_argument("--runs", type=int, default=30)
    r.add_argument("--seed", type=int, default=0, help="the data's (and by default the "
                   "algorithms') root: another seed gives other runs to pool")
    r.add_argument("--algorithm-seed", type=int, default=None)
    r.add_argument("--workers", type=int, default=None)
    c = sub.add_parser("compare", help="the rule: old, reseeded old, new (each a store, "
                       "its exact_rule.parquet, or a comma-separated list to pool)")
    c.add_argument("old")
    c.add_argument("reseeded")
    c.add_argument("new")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        return run(args)
    old, re_, new = (pooled(s) for s in (args.old, args.reseeded, args.new))
    ok = True
    with pd.option_context("display.width", 200):
        for name, other in (("reseeded old kernel (can the rule pass?)", re_),
                            ("new kernel", new)):
            t = judge(old, other)
            print(f"{name} against the old kernel:\n{t.round(4).to_string(index=False)}\n")
            ok &= bool(t.ok.all())
    print(f"rule: ratio upper bound <= {RATIO}, |mass - old mass| <= {MASS}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

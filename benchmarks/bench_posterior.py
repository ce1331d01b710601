"""The exact posterior (eq. 5 on a grid) of a user's non-conjugate family against the
paper's normal/Laplace model, as issue 24's target states it: ``exact_posterior`` on the
same n releases (default 1000) at eps = 5, warm (the first, compiling call timed apart),
all in one process so that the ratios are measured side by side.

    NUMBA_NUM_THREADS=2 .venv/bin/python benchmarks/bench_posterior.py [--n 1000] [--numpy-n 200]

Set NUMBA_NUM_THREADS before the run (the likelihood grids run on that many threads;
issue 24's targets are for 2 cores).  Models: the normal family with the Laplace
mechanism (the closed-form likelihood, the paper's model), a logistic written as a user
writes one (numpy only, in this file, ``-z - 2 log1p(exp(-z))``) with the Laplace and
the Gaussian mechanism, the shipped Laplace and Student-t (df 3) families, and the
normal family on the engine's quadrature (``generic=True``).  The numpy pipeline that
ran every other family before (kept as the test oracle, tests/posterior_oracle.py) is
timed on ``--numpy-n`` releases and scaled by n / numpy_n (its cost is linear in n).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from bench_engine import Logistic

from dpbook.model.families import get_family
from dpbook.model.mechanisms import release
from dpbook.posterior import exact_posterior


def releases(n, eps, mechanism, seed=1):
    rng = np.random.default_rng(seed)
    x = 50.0 + 10**0.5 * rng.standard_normal(n)
    l, r = np.full(n, 35.0), np.full(n, 65.0)
    return release(x, l, r, eps, rng, mechanism), l, r


def timed(fn, reps):
    """(first call, best of ``reps`` warm calls) seconds, and the result."""
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    warm = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        warm.append(time.perf_counter() - t0)
    return first, min(warm), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--eps", type=float, default=5.0)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--numpy-n", type=int, default=200)
    a = ap.parse_args()
    print(f"exact posterior, n = {a.n}, eps = {a.eps}, NUMBA_NUM_THREADS = "
          f"{os.environ.get('NUMBA_NUM_THREADS', 'unset')}; warm = best of {a.reps}")
    rows = []
    for name, fam, mech, kw in (
            ("normal/laplace (closed form)", get_family("normal"), "laplace", {}),
            ("logistic/laplace", Logistic(), "laplace", {}),
            ("logistic/gaussian", Logistic(), "gaussian", {}),
            ("laplace family/laplace", get_family("laplace"), "laplace", {}),
            ("student_t df 3/laplace", get_family("student_t", df=3.0), "laplace", {}),
            ("normal/laplace (engine)", get_family("normal"), "laplace", {"generic": True})):
        y, l, r = releases(a.n, a.eps, mech)
        def run(y=y, l=l, r=r, fam=fam, mech=mech, kw=kw):
            return exact_posterior(y, l, r, a.eps, family=fam, mechanism=mech, **kw)

        first, warm, post = timed(run, a.reps)
        rows.append((name, first, warm, post))
    base = rows[0][2]
    print(f"{'model':<30} {'warm s':>8} {'ratio':>6} {'1st s':>8} {'compile s':>9}  grid")
    for name, first, warm, post in rows:
        print(f"{name:<30} {warm:8.2f} {warm / base:6.2f} {first:8.2f} {first - warm:9.2f}  "
              f"{post.axes[0].size} x {post.axes[1].size}")
    if a.numpy_n:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from posterior_oracle import exact_posterior_quadrature

        y, l, r = releases(a.numpy_n, a.eps, "laplace")
        t0 = time.perf_counter()
        exact_posterior_quadrature(y, l, r, a.eps, Logistic(), "laplace")
        old = (time.perf_counter() - t0) * a.n / a.numpy_n
        print(f"{'logistic/laplace, numpy (old)':<30} {old:8.2f} {old / base:6.2f}  "
              f"(n = {a.numpy_n} scaled x {a.n / a.numpy_n:g})")


if __name__ == "__main__":
    main()

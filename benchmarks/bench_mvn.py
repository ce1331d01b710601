"""The latent SMC in two dimensions against one (issue 54's target: d = 2 at n = N =
1000 at most 3x the one-dimensional time on the same engine).

Both runs are the one :class:`dpbook.smc.SMC` (``generic=True`` keeps the normal family
off the paper's fused kernel): the normal family with its Gibbs move in one dimension,
:class:`dpbook.multivariate.mvnormal.MultivariateNormal` with its NIW draw in two, on
the same n releases through a fixed interval/box at eps = 2, warm (a first short run
compiles), alternated ``--repeats`` times in one process so the ratio is side by side.

    NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_mvn.py [--n 1000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpbook.model.families.normal import Normal
from dpbook.multivariate.mvnormal import MultivariateNormal, niw_from_ranges
from dpbook.smc import SMC


def run(d, y, n, N):
    if d == 1:
        smc = SMC(2.0, Normal(), n_particles=N, n_max=n, seed=1, generic=True)
        args = (-3.0, 3.0)
    else:
        fam = MultivariateNormal(d, prior=niw_from_ranges([(-3, 3)] * d))
        smc = SMC(2.0, fam, n_particles=N, n_max=n, seed=1)
        args = (np.full(d, -3.0), np.full(d, 3.0))
    t0 = time.perf_counter()
    for t in range(n):
        smc.update(y[t, 0] if d == 1 else y[t, :d], *args)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    y = np.random.default_rng(0).normal(size=(a.n, 2))
    run(1, y, 20, 20), run(2, y, 20, 20)  # compile
    times = {1: [], 2: []}
    for _ in range(a.repeats):
        for d in (1, 2):
            times[d].append(run(d, y, a.n, a.n))
    t1, t2 = min(times[1]), min(times[2])
    print(f"n = N = {a.n}: d = 1 {t1:.2f} s, d = 2 {t2:.2f} s (best of {a.repeats}); "
          f"ratio {t2 / t1:.2f}")


if __name__ == "__main__":
    main()

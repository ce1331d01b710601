"""Chapter 7's repeated-runs comparison (the Gumbel family, Algorithm 1 with the adaptive
and the fixed interval) on the compiled engine against the numpy SMC that ran it before,
in one process, compile time included:

    .venv/bin/python benchmarks/bench_chapter7.py [--runs 2] [--n 300] [--N 300]

Each side runs ``--runs`` tasks per (eps, policy) of chapter 7's full mode (n = N = 300,
eps = 1, 5, 10) and reports the seconds per task; the full comparison is 30 runs, 180
tasks, so its CPU time is 180 times that (plus compiling once per worker process).  The
numpy side is chosen by emptying dpbook.backends.ENGINES, so that no engine is asked.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpbook import backends
from dpbook.fisher import best_interval
from dpbook.model.families import LocationScaleFamily
from dpbook.online import run_online
from dpbook.privacy.policies import AdaptivePolicy, FixedPolicy
from dpbook.privacy.population import family_population


class Gumbel(LocationScaleFamily):
    """As chapter 7 writes it."""

    name = "gumbel"

    def base_logpdf(self, z):
        return -z - np.exp(-np.maximum(z, -700.0))

    def base_dlogpdf(self, z):
        return -1.0 + np.exp(-np.maximum(z, -700.0))

    def base_cdf(self, z):
        return np.exp(-np.exp(-np.maximum(z, -700.0)))

    def base_sf(self, z):
        return -np.expm1(-np.exp(-np.maximum(z, -700.0)))

    def base_ppf(self, q):
        return -np.log(-np.log(q))

    def base_sample(self, rng, size=None):
        return rng.gumbel(0.0, 1.0, size)


THETA = (50.0, 3.0)


def tasks(fam, runs, n, N, intervals):
    """Seconds of every (eps, policy, run) task, in order."""
    out = []
    for eps, best in intervals.items():
        for policy in (AdaptivePolicy(*best), FixedPolicy(*fam.fixed_interval(*THETA))):
            for run in range(runs):
                pop = family_population(fam, THETA, n, eps, seed=[7, run])
                t0 = time.perf_counter()
                run_online(pop, policy, n, n_particles=N, seed=[7, run, 1], family=fam)
                out.append(time.perf_counter() - t0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--N", type=int, default=300)
    a = ap.parse_args()
    fam = Gumbel()
    intervals = {eps: tuple(best_interval(eps, fam, grid=50)[k] for k in ("a", "b"))
                 for eps in (1.0, 5.0, 10.0)}
    t0 = time.perf_counter()
    engine = tasks(fam, a.runs, a.n, a.N, intervals)
    first = engine[0]
    print(f"engine: {np.mean(engine[1:]):.2f} s per task warm; the first task (compiling) "
          f"{first:.1f} s; all {len(engine)} tasks {time.perf_counter() - t0:.1f} s")
    saved = dict(backends.ENGINES)
    backends.ENGINES.clear()
    try:
        numpy = tasks(fam, a.runs, a.n, a.N, intervals)
    finally:
        backends.ENGINES.update(saved)
    print(f"numpy SMC: {np.mean(numpy):.2f} s per task")
    warm = np.mean(engine[1:])
    compile_s = first - warm
    full_engine = 180 * warm + 2 * compile_s  # two worker processes compile once each
    full_numpy = 180 * np.mean(numpy)
    print(f"the 180 tasks of the full comparison: engine ~{full_engine / 60:.1f} CPU-min "
          f"(compiling in two workers included), numpy ~{full_numpy / 60:.1f} CPU-min: "
          f"{full_numpy / full_engine:.1f}x faster")


if __name__ == "__main__":
    main()

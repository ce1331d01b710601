"""The compiled latent SMC (dpbook.smc.compiled_smc) against the paper's normal/Laplace kernel
and the numpy SMC, as issue 24's targets state them: ``smc_posterior`` on n releases
(default 1000) with N = 1000 particles at eps = 5, warm (the first, compiling run timed
apart), all in one process so that the ratios are measured side by side.

    .venv/bin/python benchmarks/bench_engine.py [--n 1000] [--numpy-n 300] [--only W ...]

Families: a logistic written as a user writes one (numpy only, in this file), the
normal family with its conjugate move replaced by the engine's random walk (the
baseline the targets name), the shipped Laplace family, the logistic with the
Gaussian mechanism, the shipped Student-t with df = 3 (proposing by its keyed draw,
``StudentT.base_draw``, not its quantile) and the normal family with the Gaussian
mechanism (its conjugate move compiled, ``Normal.engine_gibbs``).  The numpy SMC
(``generic=True``, the code that ran these families before the engine) is timed on
``--numpy-n`` releases and scaled by (n / numpy_n)^2,
its measured growth (the MH sweep of Algorithm 3 is O(n^2 N)).
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np
from scipy import special

from dpbook.model.families import get_family
from dpbook.model.families.base import Family, LocationScaleFamily
from dpbook.model.families.normal import Normal
from dpbook.model.mechanisms import release
from dpbook.smc import smc_posterior


class Logistic(LocationScaleFamily):
    """A family written as a user writes one (chapter 7): numpy only; the other
    benchmarks take it from here."""

    name = "logistic"

    def base_logpdf(self, z):
        return -z - 2.0 * np.log1p(np.exp(-z))

    def base_dlogpdf(self, z):
        return -1.0 + 2.0 / (1.0 + np.exp(z))

    def base_cdf(self, z):
        return special.expit(z)

    def base_ppf(self, q):
        return np.log(q) - np.log1p(-q)

    def base_sample(self, rng, size=None):
        return rng.logistic(0.0, 1.0, size)


class NormalRW(Normal):
    """The normal family moved by the engine's random walk (no conjugate Gibbs move)."""

    name = "normal_rw"
    gibbs = Family.gibbs


def releases(n, eps, mechanism, seed=1):
    rng = np.random.default_rng(seed)
    x = 50.0 + 10**0.5 * rng.standard_normal(n)
    l, r = np.full(n, 35.0), np.full(n, 65.0)
    return release(x, l, r, eps, rng, mechanism), l, r


def timed(fam, mech, n, N, eps, generic=False):
    """(first run, warm run) seconds."""
    y, l, r = releases(n, eps, mech)
    out = []
    for seed in (3, 4):
        t0 = time.perf_counter()
        smc_posterior(y, l, r, eps, family=fam, mechanism=mech, n_particles=N, seed=seed,
                      generic=generic)
        out.append(time.perf_counter() - t0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--N", type=int, default=1000)
    ap.add_argument("--numpy-n", type=int, default=300)
    ap.add_argument("--eps", type=float, default=5.0)
    ap.add_argument("--only", nargs="*", default=None,
                    help="rows whose name contains one of these words (the normal family "
                         "with the random walk, the ratios' base, always runs)")
    a = ap.parse_args()
    n, N, eps = a.n, a.N, a.eps
    print(f"n = {n}, N = {N}, eps = {eps}, numba threads = {numba.get_num_threads()}")
    _, paper = timed("normal", "laplace", n, N, eps)
    print(f"paper kernel (normal, Laplace mechanism, Gibbs move): {paper:.2f} s warm")
    rows = [("logistic (user's, in this file)", Logistic(), "laplace"),
            ("normal, random-walk move", NormalRW(), "laplace"),
            ("laplace (shipped)", get_family("laplace"), "laplace"),
            ("logistic, Gaussian mechanism", Logistic(), "gaussian"),
            ("student_t df 3 (shipped)", get_family("student_t", df=3.0), "laplace"),
            ("normal, Gaussian mechanism (its compiled Gibbs move)", get_family("normal"),
             "gaussian")]
    if a.only is not None:
        rows = [row for row in rows if row[1].name == "normal_rw" or
                any(w in row[0] for w in a.only)]
    done = []
    for name, fam, mech in rows:
        first, warm = timed(fam, mech, n, N, eps)
        line = (f"{name}: engine {warm:.2f} s warm ({warm / paper:.1f}x the paper kernel), "
                f"compiling {first - warm:.1f} s")
        if a.numpy_n:  # 0: the numpy SMC not timed
            scale = (n / a.numpy_n) ** 2
            numpy = timed(fam, mech, a.numpy_n, N, eps, generic=True)[1] * scale
            line += f"; numpy SMC ~{numpy:.1f} s ({numpy / warm:.1f}x the engine)"
        print(line, flush=True)
        done.append((name, warm))
    base = dict(done)["normal, random-walk move"]
    for name, warm in done:
        print(f"  {name}: {warm / base:.2f}x the normal family with the random walk")


if __name__ == "__main__":
    main()

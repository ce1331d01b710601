"""The latent SMC engine against the machine's floor: nanoseconds per latent update.

    NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_floor.py [--n 1000] [--particles 1000]

The floor is a plain numba loop over particles and k < t doing only the arithmetic
of one latent update of Algorithm 3: one draw from the prior (the ziggurat from a keyed
word, as the engine's normal family draws), one clip, one Laplace log-density, one
accept test of log u (libm's log) against the log ratio; the current x_k and its
log-density are read from and written to arrays.  The engine (``CompiledSMC``) and the
paper's kernel (``SMC(eps)``) each run the paper's model through all n releases
(Section 6's fixed interval, eps = 5), everything included (resampling, the Gibbs move,
propagation, weights, history).  All are divided by the number of latent updates,
N n (n - 1) / 2, on one thread, warm, the median of ``--repeats`` runs, interleaved.
(The plain loop is scalar: its ziggurat branch and libm log keep LLVM from vectorising
it, which is what the engine's separate passes over k are for.)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from dpbook import rng
from dpbook.smc import smc_posterior
from dpbook.smc.compiled_smc import CompiledSMC

FAST, SLOW = rng.ZIGGURAT


@njit(cache=True)
def floor_sweeps(key, n, x, ll, y, lo, hi, invb, m, c):
    """Algorithm 3's latent moves at every t < n for every particle (rows of x)."""
    acc = 0
    for t in range(1, n):
        for i in range(x.shape[0]):
            base = rng.stream_key(key, t, i)
            for k in range(t):
                w = rng.keyed_word(base, 2 * k)
                z = FAST(w)
                if z != z:
                    z = SLOW(w)
                xp = m + c * z
                lp = -abs(y[k] - min(max(xp, lo), hi)) * invb
                if np.log(rng.keyed_uniform(base, 2 * k + 1)) < lp - ll[i, k]:
                    x[i, k] = xp
                    ll[i, k] = lp
                    acc += 1
    return acc


def releases(n, eps, seed=0):
    g = np.random.default_rng(seed)
    mu, sigma = 50.0, 10 ** 0.5
    lo, hi = mu - 10 * sigma, mu + 10 * sigma
    return np.clip(g.normal(mu, sigma, n), lo, hi) + g.laplace(0, (hi - lo) / eps, n), lo, hi


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--particles", type=int, default=1000)
    ap.add_argument("--eps", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    y, lo, hi = releases(a.n, a.eps)
    l, r = np.full(a.n, lo), np.full(a.n, hi)
    updates = a.particles * a.n * (a.n - 1) / 2
    invb = a.eps / (hi - lo)

    def floor():
        x = np.full((a.particles, a.n), 50.0)
        ll = -np.abs(y - 50.0) * invb * np.ones((a.particles, 1))
        floor_sweeps(np.uint64(7), a.n, x, ll, y, lo, hi, invb, 50.0, 10 ** 0.5)

    def kernel():
        smc_posterior(y, l, r, a.eps, n_particles=a.particles, seed=1)

    def engine():
        smc = CompiledSMC(a.eps, n_particles=a.particles, n_max=a.n, seed=1)
        for t in range(a.n):
            smc.update(y[t], lo, hi)

    floor_sweeps(np.uint64(7), 3, np.zeros((2, 3)), np.zeros((2, 3)), y, lo, hi, invb, 0.0, 1.0)
    smc_posterior(y[:5], l[:5], r[:5], a.eps, n_particles=10)  # compile or load
    CompiledSMC(a.eps, n_particles=10, n_max=5).update(y[0], lo, hi)
    times = {"floor": [], "kernel": [], "engine": []}
    for _ in range(a.repeats):  # interleaved
        for name, fn in (("floor", floor), ("kernel", kernel), ("engine", engine)):
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    ns = {k: 1e9 * float(np.median(v)) / updates for k, v in times.items()}
    print(f"n = N = {a.n}/{a.particles}, eps {a.eps:g}, {updates:.3g} latent updates, one "
          f"thread, median of {a.repeats}")
    for k, v in ns.items():
        print(f"{k:>7}: {v:6.2f} ns per latent update  ({np.median(times[k]):.2f} s)")
    print(f"engine / floor: {ns['engine'] / ns['floor']:.2f} (target <= 2); "
          f"engine / paper's kernel: {ns['engine'] / ns['kernel']:.2f}")


if __name__ == "__main__":
    main()

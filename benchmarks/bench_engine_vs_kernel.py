"""The paper's model (normal family, Laplace mechanism) through the latent SMC engine
(``backends.engine("smc", "normal", "laplace")``) beside the paper's kernel
(``SMC(eps)``), in one process, interleaved: issue 38's 1.2x gate for the engine.

    NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_engine_vs_kernel.py \
        [--n 1000] [--particles 1000] [--repeats 5]

Data as in Section 6 with the fixed interval (eps = 5); every x_k moved at every t;
CPU seconds (``process_time``) of the ``update`` calls, warm; the ratio engine/kernel
is the median over repeats of the per-repeat ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpbook import backends
from dpbook.smc import SMC

GATE = 1.2


def _releases(n, eps, seed=0):
    rng = np.random.default_rng(seed)
    mu, sigma = 50.0, 10 ** 0.5
    lo, hi = mu - 10 * sigma, mu + 10 * sigma
    return np.clip(rng.normal(mu, sigma, n), lo, hi) + rng.laplace(0, (hi - lo) / eps, n), lo, hi


def _time(make, size, y, lo, hi):
    smc = make(*size)
    t0 = time.process_time()
    for v in y:
        smc.update(v, lo, hi)
    return time.process_time() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--particles", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    eps = 5.0
    y, lo, hi = _releases(a.n, eps)
    engine = backends.engine("smc", "normal", "laplace")
    makers = {
        "kernel": lambda N, n: SMC(eps, "normal", n_particles=N, n_max=n, seed=1),
        "engine": lambda N, n: engine(eps, "normal", "laplace", n_particles=N, n_max=n,
                                      seed=1)}
    for make in makers.values():  # compile or load the cache
        _time(make, (50, 20), y[:20], lo, hi)
    times = {k: [] for k in makers}
    for _ in range(a.repeats):
        for k, make in makers.items():
            times[k].append(_time(make, (a.particles, a.n), y, lo, hi))
    ratio = float(np.median(np.divide(times["engine"], times["kernel"])))
    for k, v in times.items():
        print(f"{k}: median {np.median(v):.3f} s  {[round(x, 3) for x in v]}")
    print(f"engine/kernel {ratio:.2f}  (gate {GATE}: {'pass' if ratio <= GATE else 'FAIL'})")


if __name__ == "__main__":
    main()
